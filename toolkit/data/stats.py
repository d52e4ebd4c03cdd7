"""Corpus statistics for `toolkit check`, accumulated one record at a time; texts and spans measured in tokens."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass, field
from statistics import mean

from toolkit.spans.overlaps import flat_loss, overlap_counts, per_label_loss
from toolkit.spans.segments import ceiling_from_counts, count_boundaries


@dataclass(frozen=True)
class TokenOffsets:
    """Character offsets of a text's tokens (no special tokens), for span arithmetic."""

    starts: list[int]
    ends: list[int]

    def __len__(self) -> int:
        return len(self.starts)

    def span_tokens(self, start: int, end: int) -> int:
        """How many tokens overlap the character span [start, end)."""
        first = bisect_right(self.ends, start)
        last = bisect_left(self.starts, end) - 1
        return max(0, last - first + 1)

    def aligned(self, start: int, end: int) -> bool:
        """True when the span starts at a token start and ends at a token end."""
        i = bisect_left(self.starts, start)
        j = bisect_left(self.ends, end)
        return i < len(self.starts) and self.starts[i] == start and j < len(self.ends) and self.ends[j] == end


def token_offsets(tokenizer, text: str) -> TokenOffsets:
    """Offsets of `text`'s tokens without special tokens; uses the Rust backend (no length warnings)."""
    enc = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    pairs = [(s, e) for s, e in enc.offsets if e > s]
    return TokenOffsets([s for s, _ in pairs], [e for _, e in pairs])


def special_tokens_count(tokenizer) -> int:
    """Tokens the model adds around a single sequence ([CLS] ... [SEP] is 2)."""
    return tokenizer.num_special_tokens_to_add(pair=False)


def distribution(values: list[int]) -> dict[str, float | int]:
    """min / median / p90 / p99 / max / mean of a list of lengths (nearest-rank percentiles)."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def pct(q: float) -> int:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {
        "count": len(ordered),
        "min": ordered[0],
        "median": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "max": ordered[-1],
        "mean": round(mean(ordered), 1),
    }


@dataclass
class CorpusStats:
    """Running counts; `add` takes one document's valid spans and, optionally, its token offsets."""

    max_length: int | None = None
    documents: int = 0
    labels: Counter = field(default_factory=Counter)
    doc_chars: list[int] = field(default_factory=list)
    doc_tokens: list[int] = field(default_factory=list)
    span_chars: list[int] = field(default_factory=list)
    span_tokens: list[int] = field(default_factory=list)
    over_max_length: list[str] = field(default_factory=list)
    misaligned_spans: int = 0
    overlaps: Counter = field(default_factory=Counter)
    flat_bio_loss: int = 0
    per_label_bio_loss: int = 0
    docs_without_spans: int = 0
    segment_boundaries: dict = field(default_factory=dict)

    def add(
        self, doc_id: str, text: str, spans: list, tokens: TokenOffsets | None = None, special_tokens: int = 0
    ) -> None:
        self.documents += 1
        self.doc_chars.append(len(text))
        if not spans:
            self.docs_without_spans += 1
        for s in spans:
            self.labels[s.label] += 1
            self.span_chars.append(s.end - s.start)
        if tokens is not None:
            n_tokens = len(tokens)
            self.doc_tokens.append(n_tokens)
            if self.max_length is not None and n_tokens + special_tokens > self.max_length:
                self.over_max_length.append(doc_id)
            for s in spans:
                self.span_tokens.append(tokens.span_tokens(s.start, s.end))
                if not tokens.aligned(s.start, s.end):
                    self.misaligned_spans += 1
        count_boundaries(text, [(s.start, s.end, s.label) for s in spans], self.segment_boundaries)
        self.overlaps.update(overlap_counts(spans))
        self.flat_bio_loss += flat_loss(spans)
        self.per_label_bio_loss += per_label_loss(spans)

    def to_dict(self, list_limit: int = 20) -> dict:
        spans = sum(self.labels.values())
        return {
            "documents": self.documents,
            "documents_without_spans": self.docs_without_spans,
            "spans": spans,
            "labels": dict(self.labels.most_common()),
            "doc_chars": distribution(self.doc_chars),
            "doc_tokens": distribution(self.doc_tokens),
            "span_chars": distribution(self.span_chars),
            "span_tokens": distribution(self.span_tokens),
            "max_length": self.max_length,
            "docs_over_max_length": {"count": len(self.over_max_length), "ids": self.over_max_length[:list_limit]},
            "spans_misaligned_with_tokens": self.misaligned_spans,
            # The ceiling of segment_classification: spans whose ends fall on segment boundaries.
            "segment_ceiling": ceiling_from_counts(self.segment_boundaries),
            "overlaps": {
                "spans_overlapping": self.overlaps.get("spans_overlapping", 0),
                "pairs": {k: self.overlaps.get(k, 0) for k in ("identical_extent", "duplicate", "nested", "crossing")},
                "flat_bio_loss": self.flat_bio_loss,
                "per_label_bio_loss": self.per_label_bio_loss,
            },
        }
