"""Clause-sized segments of a document: lines, sentences, enumerated items. Pure: no I/O, no torch.

Contract clauses mostly start and end where a sentence, a line or an enumerated item does, so a model
that decides per segment has far fewer decisions to learn than one that tags every token. The rules
are written for contract layouts rather than taken from a general sentence splitter (spaCy's parser
splits on grammar and runs about 10k words a second; a 300-page contract takes that long per pass
and its headings and `(a)`-items are not sentences to it):

- a line break always ends a segment;
- `.`, `;` or `:` followed by whitespace ends one, except after common abbreviations (`Inc.`,
  `No.`, `U.S.`, `e.g.`, single letters) and inside a number (`12.2`);
- an enumeration marker (`(a)`, `(iv)`, `(12)`, `12.2`, `Section 4.`) that follows a run of two or
  more spaces or a tab (layout, not prose) starts one;
- a marker (`(d)`, `b)`, `15.1`) opening a segment is a segment of its own, because annotators start
  the clause after it;
- a segment longer than MAX_SEGMENT_CHARS is split (text without sentence ends or line breaks).

`boundary_ceiling` measures how many gold spans a segment model could reproduce exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ALL = "__all__"
# Words whose trailing period does not end a sentence (compared lower-cased, without the period).
ABBREVIATIONS = frozenset(
    (
        "inc corp co ltd llc lp plc no nos sec secs art arts para paras cl mr mrs ms dr st jr sr vs etc "
        "e.g i.e u.s u.k "
        "fig figs approx dept est ex exh sched govt assn bros intl mfg natl univ "
        "jan feb mar apr jun jul aug sep sept oct nov dec"
    ).split()
)
# "Schedule A." ends a sentence; "John A. Smith" does not: a single letter is an initial unless one of
# these words precedes it.
LETTERED = frozenset(
    "schedule exhibit annex appendix attachment article section clause part item rider addendum".split()
)
_END = re.compile(r"[.;:](?=\s)")
# An enumeration marker opening a segment: annotators start the clause after it (CUAD does).
_LEADING_MARKER = re.compile(
    r"(?:\((?:[a-zA-Z]|[ivxlcdm]+|\d{1,3})\)|(?:[a-zA-Z]|[ivxlcdm]+)\)|\d{1,3}(?:\.\d{1,3})*\.?)\s+(?=\S)"
)
_LAYOUT_ENUM = re.compile(
    r"(?:  "
    r"+|\t+)(?=(?:\((?:[a-zA-Z]|[ivxlcdm]+|\d{1,3})\)|\d{1,3}(?:\.\d{1,3})+\.?|(?:Section|SECTION|Article|ARTICLE)\s+\d)\s)"
)


# The longest segment: a longer one (a line of base64, of CJK text without a sentence end) is split, at the last
# whitespace in reach when there is one, else at the bound. CUAD's longest segment is far below it, so contract
# text is segmented as before; a segment model's input reads only a segment's first tokens anyway, and without
# the bound one segment could be the whole document.
MAX_SEGMENT_CHARS = 10_000
_LAST_SPACE = re.compile(r"\s(?=\S*$)")  # with endpos: the last whitespace before it


def _is_abbreviation(text: str, line_start: int, dot: int) -> bool:
    """Whether the period at `dot` belongs to an abbreviation rather than ending a sentence."""
    start = dot
    while start > line_start and not text[start - 1].isspace() and text[start - 1] not in "(\"'":
        start -= 1
    word = text[start:dot].lower()
    if len(word) == 1 and word.isalpha():
        return _previous_word(text, line_start, start).lower() not in LETTERED
    return word in ABBREVIATIONS or word.rstrip(".") in ABBREVIATIONS


def _previous_word(text: str, line_start: int, end: int) -> str:
    """The last whitespace-separated word of text[line_start:end] ("" if none), read backwards from `end` so a
    long line is not split again at every initial (which made one long line quadratic)."""
    stop = end
    while stop > line_start and text[stop - 1].isspace():
        stop -= 1
    begin = stop
    while begin > line_start and not text[begin - 1].isspace():
        begin -= 1
    return text[begin:stop]


def _cuts(text: str, lo: int, hi: int) -> list[int]:
    """Offsets inside the line text[lo:hi] where a new segment starts (the pattern's `endpos` stands for the
    line's end, so the line is never copied)."""
    cuts = []
    for m in _END.finditer(text, lo, hi):
        if m.group() == "." and _is_abbreviation(text, lo, m.start()):
            continue
        cuts.append(m.end())
    cuts.extend(m.end() for m in _LAYOUT_ENUM.finditer(text, lo, hi))
    return sorted(set(cuts))


def _bounded(text: str, start: int, end: int, tally: dict | None) -> list[tuple[int, int]]:
    """[start, end) as pieces of at most MAX_SEGMENT_CHARS, each stripped (`tally["segments_split"]` counts the
    segments split)."""
    if end - start <= MAX_SEGMENT_CHARS:
        return [(start, end)]
    if tally is not None:
        tally["segments_split"] = tally.get("segments_split", 0) + 1
    out = []
    while end - start > MAX_SEGMENT_CHARS:
        cut = start + MAX_SEGMENT_CHARS
        space = _LAST_SPACE.search(text, start + MAX_SEGMENT_CHARS // 2, cut)
        piece_end = cut if space is None else space.end()
        b = piece_end
        while b > start and text[b - 1].isspace():
            b -= 1
        out.append((start, b))
        start = piece_end
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        out.append((start, end))
    return out


def segment_text(text: str, lo: int = 0, hi: int | None = None, tally: dict | None = None) -> list[tuple[int, int]]:
    """Character spans (start, end) of the segments of `text` (of text[lo:hi], whole lines, in the text's
    offsets, without copying it), in order, stripped of surrounding whitespace; whitespace-only pieces are
    dropped. `tally["segments_split"]` counts the segments longer than MAX_SEGMENT_CHARS, split."""
    hi = len(text) if hi is None else hi
    out: list[tuple[int, int]] = []
    line_start = lo
    while line_start <= hi:
        newline = text.find("\n", line_start, hi)
        line_end = hi if newline < 0 else newline
        bounds = [line_start, *_cuts(text, line_start, line_end), line_end]
        for a, b in zip(bounds, bounds[1:]):
            while a < b and text[a].isspace():
                a += 1
            while b > a and text[b - 1].isspace():
                b -= 1
            if a == b:
                continue
            marker = _LEADING_MARKER.match(text, a, b)
            if marker:
                out.append((a, a + len(marker.group().rstrip())))
                a = marker.end()
            out += _bounded(text, a, b, tally)
        if newline < 0:
            break
        line_start = newline + 1
    return out


def count_split_segments(text: str) -> int:
    """How many segments of `text` `segment_text` splits at MAX_SEGMENT_CHARS (only lines that long are read)."""
    tally: dict = {}
    lo = 0
    while True:
        newline = text.find("\n", lo)
        hi = len(text) if newline < 0 else newline
        if hi - lo > MAX_SEGMENT_CHARS:
            segment_text(text, lo, hi, tally)
        if newline < 0:
            return tally.get("segments_split", 0)
        lo = newline + 1


def segments_covering(segments: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """Indices (first, last) of the segments that overlap [start, end); None when none does."""
    hit = [i for i, (a, b) in enumerate(segments) if a < end and start < b]
    return (hit[0], hit[-1]) if hit else None


_WORD = re.compile(r"\w+")


def _jaccard_words(text: str, a: tuple[int, int], b: tuple[int, int]) -> float:
    # CUAD's normalisation (lower-cased words, punctuation dropped), as evaluate.metrics.word_set;
    # spans/ imports nothing outside spans/, so the two lines live here too.
    x, y = set(_WORD.findall(text[a[0] : a[1]].lower())), set(_WORD.findall(text[b[0] : b[1]].lower()))
    return len(x & y) / len(x | y) if x | y else 1.0


def count_boundaries(text: str, spans: Sequence[tuple[int, int, str]], counts: dict[str, list[int]]) -> None:
    """Add one document's spans to `counts` (label -> [spans, both ends on boundaries, end on a
    boundary, run of covering segments at word Jaccard >= 0.5]); see `ceiling_from_counts`."""
    segments = segment_text(text)
    starts, ends = {a for a, _ in segments}, {b for _, b in segments}
    for start, end, label in spans:
        piece = text[start:end]
        s = start + len(piece) - len(piece.lstrip())
        e = end - (len(piece) - len(piece.rstrip()))
        cover = segments_covering(segments, s, e)
        union = (segments[cover[0]][0], segments[cover[1]][1]) if cover else None
        for key in (label, ALL):
            row = counts.setdefault(key, [0, 0, 0, 0])
            row[0] += 1
            row[1] += s in starts and e in ends
            row[2] += e in ends
            row[3] += union is not None and _jaccard_words(text, union, (s, e)) >= 0.5


def ceiling_from_counts(counts: dict[str, list[int]]) -> dict:
    """How well segment decisions can reproduce the gold spans, per label and over all (`__all__`):
    `both_ends`: share of spans whose start is a segment's start and end a segment's end (after
    stripping the span's own surrounding whitespace); `end`: share whose end is; `jaccard_05`: share
    for which the run of segments overlapping the span matches it at word Jaccard >= 0.5 (CUAD's
    matching rule), the ceiling of a segment model's Jaccard recall."""
    return {
        label: {"spans": n, "both_ends": round(both / n, 4), "end": round(end / n, 4), "jaccard_05": round(jac / n, 4)}
        for label, (n, both, end, jac) in sorted(counts.items())
        if n
    }


def boundary_ceiling(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int, str]]]) -> dict:
    """`ceiling_from_counts` over documents."""
    counts: dict[str, list[int]] = {}
    for text, doc_spans in zip(texts, spans):
        count_boundaries(text, doc_spans, counts)
    return ceiling_from_counts(counts)
