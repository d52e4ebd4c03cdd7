"""A span holds at least one word character: a span of only punctuation or whitespace (a "." beside real
clauses) is never returned or scored. One rule, used where spans leave the toolkit (`toolkit predict`'s rows,
the service's answers, `toolkit eval`'s predictions file), by the scorer, which counts what it dropped, and by
the ranking metrics and threshold sweeps, which do not rank or count such a span.
Pure: no torch, no I/O."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from toolkit.spans.span_columns import SpanColumns

_WORD = re.compile(r"\w")
S = TypeVar("S")


def has_content(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] holds a letter, a digit or an underscore (searched in place in a str, not copied;
    a `FileText`, a long file read as it is sliced, gives the slice)."""
    if isinstance(text, str):
        return _WORD.search(text, start, end) is not None
    return _WORD.search(text[start:end]) is not None


def drop_contentless(text: str, spans: Sequence[S]) -> tuple[Sequence[S], int]:
    """The spans that hold a word (as columns again where they came as `SpanColumns`), and how many did not."""
    if isinstance(spans, SpanColumns):
        columns = spans.where(lambda start, end: has_content(text, start, end))
        return columns, len(spans) - len(columns)  # type: ignore[return-value]
    kept = [s for s in spans if has_content(text, s.start, s.end)]  # type: ignore[attr-defined]
    return kept, len(spans) - len(kept)
