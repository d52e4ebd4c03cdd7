"""Pure span arithmetic: overlaps, nesting, and what a flat tagging scheme loses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol


class SpanLike(Protocol):
    start: int
    end: int
    label: str


def overlap_kind(a: SpanLike, b: SpanLike) -> str | None:
    """How two spans relate: None (disjoint), 'duplicate', 'identical_extent', 'nested' or 'crossing'."""
    if a.end <= b.start or b.end <= a.start:
        return None
    if a.start == b.start and a.end == b.end:
        return "duplicate" if a.label == b.label else "identical_extent"
    if (a.start <= b.start and b.end <= a.end) or (b.start <= a.start and a.end <= b.end):
        return "nested"
    return "crossing"


def overlapping_pairs(spans: Sequence[SpanLike]) -> list[tuple[int, int, str]]:
    """Every overlapping pair as (i, j, kind), i < j indexing `spans`. Sweep over sorted starts."""
    order = sorted(range(len(spans)), key=lambda k: (spans[k].start, spans[k].end))
    pairs: list[tuple[int, int, str]] = []
    active: list[int] = []
    for k in order:
        s = spans[k]
        active = [a for a in active if spans[a].end > s.start]
        for a in active:
            kind = overlap_kind(spans[a], s)
            if kind is not None:
                pairs.append((min(a, k), max(a, k), kind))
        active.append(k)
    return pairs


def max_disjoint(spans: Sequence[SpanLike]) -> list[int]:
    """Indices of a largest set of pairwise non-overlapping spans (greedy by earliest end is optimal)."""
    order = sorted(range(len(spans)), key=lambda k: (spans[k].end, spans[k].start))
    kept: list[int] = []
    last_end = -1
    for k in order:
        if spans[k].start >= last_end:
            kept.append(k)
            last_end = spans[k].end
    return sorted(kept)


def flat_loss(spans: Sequence[SpanLike]) -> int:
    """Fewest spans a flat (one tag per token) BIO scheme must drop to hold the rest."""
    return len(spans) - len(max_disjoint(spans))


def per_label_loss(spans: Sequence[SpanLike]) -> int:
    """Spans lost when each label has its own BIO layer (multi-label mode): only same-label overlaps cost."""
    by_label: dict[str, list[SpanLike]] = {}
    for s in spans:
        by_label.setdefault(s.label, []).append(s)
    return sum(flat_loss(group) for group in by_label.values())


def overlap_counts(spans: Sequence[SpanLike]) -> Counter:
    """Counts of overlapping pairs by kind, plus 'spans_overlapping': spans that overlap any other."""
    pairs = overlapping_pairs(spans)
    counts: Counter = Counter(kind for _, _, kind in pairs)
    involved = {i for i, _, _ in pairs} | {j for _, j, _ in pairs}
    counts["spans_overlapping"] = len(involved)
    return counts


def split_offsets(offsets: Sequence[tuple[int, int]], cuts: set[int]) -> list[tuple[int, int]]:
    """Split token offsets at every cut point that falls strictly inside a token.

    Used by exporters so that every span edge lies on a token edge: a span is then
    representable whatever tokenizer produced the tokens (no spaCy-W030-style loss).
    """
    out: list[tuple[int, int]] = []
    for start, end in offsets:
        inner = sorted(c for c in cuts if start < c < end)
        edges = [start, *inner, end]
        out.extend(zip(edges, edges[1:]))
    return out
