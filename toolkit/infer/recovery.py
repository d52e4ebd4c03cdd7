"""Mapping generated span text back to character offsets in the source window. Pure: no torch, no I/O.

Order of attempts, per generated span (spans are generated in order of appearance):
1. exact: a verbatim occurrence; among repeats, the first one at or after the previous
   span's start that this (text, label) has not taken yet;
2. whitespace: the same words with any whitespace between them;
3. fuzzy: the best-aligned substring (rapidfuzz partial ratio) at or above `min_similarity`;
otherwise the span is a hallucination: a false positive, listed in the run's report.
A repeat of a span whose every occurrence is already taken is a duplicate: counted, not
a new prediction (the text is in the window, so it is no hallucination).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from toolkit.infer.prompts import GeneratedLine


@dataclass(frozen=True)
class RecoveredSpan:
    start: int
    end: int
    label: str
    method: str  # exact | whitespace | fuzzy
    similarity: float = 100.0


@dataclass
class Recovery:
    spans: list[RecoveredSpan] = field(default_factory=list)
    hallucinated: list[GeneratedLine] = field(default_factory=list)
    duplicates: list[GeneratedLine] = field(default_factory=list)


def _pick(starts: list[int], cursor: int, taken: set[int]) -> int | None:
    free = [s for s in starts if s not in taken]
    if not free:
        return None
    after = [s for s in free if s >= cursor]
    return after[0] if after else free[0]


def _exact(window: str, text: str) -> list[int]:
    out, at = [], window.find(text)
    while at != -1:
        out.append(at)
        at = window.find(text, at + 1)
    return out


def _whitespace(window: str, text: str) -> list[tuple[int, int]]:
    words = text.split()
    if not words:
        return []
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    return [m.span() for m in pattern.finditer(window)]


def _fuzzy(window: str, text: str, min_similarity: float) -> tuple[int, int, float] | None:
    from rapidfuzz import fuzz

    if len(text) < 3:
        return None  # too short to align meaningfully
    alignment = fuzz.partial_ratio_alignment(text, window, score_cutoff=min_similarity)
    if alignment is None:
        return None
    start, end = alignment.dest_start, alignment.dest_end
    # The alignment has the query's length; snap it to whole words of the window.
    while start > 0 and window[start - 1].isalnum() and window[start].isalnum():
        start -= 1
    while end < len(window) and window[end - 1].isalnum() and window[end].isalnum():
        end += 1
    while end > start and not window[end - 1].isalnum() and text[-1].isalnum():
        end -= 1
    while end > start and not window[start].isalnum() and text[0].isalnum():
        start += 1
    return (start, end, float(alignment.score)) if end > start else None


def recover_offsets(window: str, generated: Sequence[GeneratedLine], min_similarity: float = 90.0) -> Recovery:
    """Offsets in `window` for every generated span, or its listing as a hallucination."""
    result = Recovery()
    cursor = 0
    taken: dict[tuple[str, str], set[int]] = {}
    for line in generated:
        used = taken.setdefault((line.label, line.text), set())
        found: RecoveredSpan | None = None
        exact = _exact(window, line.text)
        matches = {a: b for a, b in _whitespace(window, line.text)} if not exact else {}
        if (exact or matches) and all(a in used for a in (exact or matches)):
            result.duplicates.append(line)
            continue
        at = _pick(exact, cursor, used)
        if at is not None:
            found = RecoveredSpan(at, at + len(line.text), line.label, "exact")
        else:
            at = _pick(sorted(matches), cursor, used)
            if at is not None:
                found = RecoveredSpan(at, matches[at], line.label, "whitespace")
            else:
                fuzzy = _fuzzy(window, line.text, min_similarity)
                if fuzzy is not None and fuzzy[0] not in used:
                    found = RecoveredSpan(fuzzy[0], fuzzy[1], line.label, "fuzzy", fuzzy[2])
        if found is None:
            result.hallucinated.append(line)
            continue
        used.add(found.start)
        cursor = found.start
        result.spans.append(found)
    return result
