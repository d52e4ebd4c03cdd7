"""segment_classification features (no torch): documents -> token windows whose tokens carry their segment's
index and each segment's multi-hot labels (`segment_features`), or one input per segment with a little context
(`segment_input_features`); the per-epoch sampler of segment inputs; the choice of hard negatives."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

import numpy as np

from toolkit.data.records import filter_labels
from toolkit.data.schema import SpanRecord
from toolkit.spans.windows import Window, make_windows
from toolkit.tasks.features import FeatureReport, sample_negatives


@dataclass
class SegmentWindows:
    """segment_classification features: token windows, each token's window-local segment index
    (NO_SEGMENT outside segments) and each window-local segment's multi-hot labels."""

    windows: list[Window]
    local_ids: list[list[int]]  # window-local segment index per token
    segment_labels: list[list[list[int]]]  # per window: [local segments][labels]
    segment_index: list[list[int]]  # per window: the document's index of each local segment
    priors: list[list[list[float]]] | None = None  # segments.linear_prior: per window, [local segments][labels]

    def subset(self, indices: list[int]) -> SegmentWindows:
        return SegmentWindows(
            [self.windows[i] for i in indices],
            [self.local_ids[i] for i in indices],
            [self.segment_labels[i] for i in indices],
            [self.segment_index[i] for i in indices],
            None if self.priors is None else [self.priors[i] for i in indices],
        )

    def __add__(self, other: SegmentWindows) -> SegmentWindows:
        if (self.priors is None) != (other.priors is None):
            raise ValueError("windows with and without prior logits cannot be joined")
        return SegmentWindows(
            self.windows + other.windows,
            self.local_ids + other.local_ids,
            self.segment_labels + other.segment_labels,
            self.segment_index + other.segment_index,
            None if self.priors is None else self.priors + other.priors,
        )

    def with_priors(self, document_logits: list[np.ndarray]) -> SegmentWindows:
        """These windows with each local segment's prior logits, read from per-document [segments x labels]."""
        priors = [
            np.asarray(document_logits[w.doc])[index].tolist() for w, index in zip(self.windows, self.segment_index)
        ]
        return dataclasses.replace(self, priors=priors)


def segment_features(
    tokenizer,
    records: list[SpanRecord],
    labels: list[str],
    max_length: int,
    stride: int,
    min_overlap: float,
    negative_ratio: float | None = None,
    seed: int = 0,
) -> tuple[SegmentWindows, FeatureReport, SegmentWindows]:
    """Windows over whole documents (never truncated), their segments and targets. Windows without a
    positive segment are sampled by `negative_ratio` (training only). Returns (kept windows, report,
    the negative windows left out: the pool hard-negative mining draws from)."""
    from toolkit.spans.segment_decoding import NO_SEGMENT, segment_targets, token_segments
    from toolkit.spans.segments import segment_text

    report = FeatureReport(documents=len(records))
    records = filter_labels(records, labels, report.spans_other_labels)
    report.spans = sum(len(r.spans) for r in records)
    segments = [segment_text(r.text) for r in records]
    targets = [segment_targets(segs, r.spans, labels, min_overlap) for segs, r in zip(segments, records)]
    windows = make_windows(tokenizer, [r.text for r in records], max_length, stride)
    local_ids, seg_labels, index, positive = [], [], [], []
    for w in windows:
        ids = token_segments(w.offsets, segments[w.doc])
        order = list(dict.fromkeys(i for i in ids if i != NO_SEGMENT))
        local = {g: k for k, g in enumerate(order)}
        local_ids.append([local.get(i, NO_SEGMENT) for i in ids])
        rows = [targets[w.doc][g] for g in order]
        seg_labels.append(rows)
        index.append(order)
        positive.append(any(any(row) for row in rows))
    report.windows = len(windows)
    report.windows_with_spans = sum(positive)
    keep, report.negative_windows_kept, report.negative_windows_dropped = sample_negatives(
        positive, negative_ratio, seed
    )
    every = SegmentWindows(windows, local_ids, seg_labels, index)
    kept = every.subset(keep)
    kept_set = set(keep)
    left_out = every.subset([i for i in range(len(windows)) if i not in kept_set])
    report.tokens = sum(len(w.input_ids) for w in kept.windows)
    report.segment_tokens = sum(sum(i != NO_SEGMENT for i in kept.local_ids[n]) for n in range(len(kept.windows)))
    report.positive_segment_tokens = sum(
        sum(i != NO_SEGMENT and any(rows[i]) for i in ids) for ids, rows in zip(kept.local_ids, kept.segment_labels)
    )
    report.spans_not_representable = uncarried_spans(records, segments, targets, labels)
    return kept, report, left_out


def uncarried_spans(records: list[SpanRecord], segments: list, targets: list, labels: list[str]) -> int:
    """Spans no segment carries (every segment they touch is mostly outside them): counted, not dropped silently."""
    carried = [{(k, j) for k, row in enumerate(t) for j, v in enumerate(row) if v} for t in targets]
    index = {label: j for j, label in enumerate(labels)}
    return sum(
        not any((k, index[s.label]) in c for k, (a, b) in enumerate(segs) if a < s.end and s.start < b)
        for r, segs, c in zip(records, segments, carried)
        for s in r.spans
    )


def segment_input_features(
    tokenizer,
    records: list[SpanRecord],
    labels: list[str],
    segment_tokens: int,
    context_tokens: int,
    min_overlap: float,
) -> tuple[SegmentWindows, FeatureReport]:
    """segments.encoder_input=segments: one input per segment of every document (`make_segment_windows`), its
    targets the segment's. Nothing is sampled here: training draws its negatives anew each epoch
    (`SegmentEpochSampler`). The report counts inputs as windows, the ones with a positive segment as
    windows_with_spans, and the tokens of context and of segments cut at segment_tokens."""
    from toolkit.spans.segment_decoding import NO_SEGMENT, segment_targets
    from toolkit.spans.segment_windows import make_segment_windows
    from toolkit.spans.segments import segment_text

    report = FeatureReport(documents=len(records))
    records = filter_labels(records, labels, report.spans_other_labels)
    report.spans = sum(len(r.spans) for r in records)
    segments = [segment_text(r.text) for r in records]
    targets = [segment_targets(segs, r.spans, labels, min_overlap) for segs, r in zip(segments, records)]
    windows, index = make_segment_windows(
        tokenizer, [r.text for r in records], segments, segment_tokens, context_tokens
    )
    local_ids = [[NO_SEGMENT if b <= a else 0 for a, b in w.offsets] for w in windows]
    rows = [[targets[w.doc][k]] for w, k in zip(windows, index)]
    report.windows = len(windows)
    report.windows_with_spans = sum(any(r[0]) for r in rows)
    report.tokens = sum(len(w.input_ids) for w in windows)
    report.segment_tokens = sum(sum(i == 0 for i in ids) for ids in local_ids)
    report.positive_segment_tokens = sum(sum(i == 0 for i in ids) for ids, r in zip(local_ids, rows) if any(r[0]))
    report.spans_not_representable = uncarried_spans(records, segments, targets, labels)
    return SegmentWindows(windows, local_ids, rows, [[k] for k in index]), report


def choose_hard_negatives(
    scores: list[float], min_score: float, limit: int, choose: str = "hardest", seed: int = 0
) -> list[int]:
    """Indices of the windows whose best segment score reaches `min_score`, highest first, at most `limit`;
    with choose="random", as many indices drawn at random from all the scored windows (the control)."""
    fired = sorted((i for i, v in enumerate(scores) if v >= min_score), key=lambda i: (-scores[i], i))[:limit]
    return sorted(random.Random(seed).sample(range(len(scores)), len(fired))) if choose == "random" else fired


class SegmentEpochSampler:
    """Training order for segments.encoder_input=segments: each epoch, every positive input and `ratio` x as
    many clause-free ones drawn anew, cut into batches of inputs of similar length (sorted within pools of 50
    batches), the batches shuffled. Our own because transformers' LengthGroupedSampler orders a fixed
    dataset: it cannot draw a fresh sample of negatives each epoch."""

    POOL_BATCHES = 50

    def __init__(self, positive: list[bool], lengths: list[int], ratio: float | None, batch_size: int, seed: int):
        self.positives = [i for i, p in enumerate(positive) if p]
        self.negatives = [i for i, p in enumerate(positive) if not p]
        wanted = len(self.negatives) if ratio is None else int(round(ratio * len(self.positives)))
        self.draw = min(len(self.negatives), wanted)
        self.lengths, self.batch_size, self.seed = lengths, batch_size, seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.positives) + self.draw

    def __iter__(self):
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        self.epoch += 1
        chosen = self.positives + rng.sample(self.negatives, self.draw)
        rng.shuffle(chosen)
        pool = self.batch_size * self.POOL_BATCHES
        batches = []
        for lo in range(0, len(chosen), pool):
            part = sorted(chosen[lo : lo + pool], key=self.lengths.__getitem__)
            batches += [part[i : i + self.batch_size] for i in range(0, len(part), self.batch_size)]
        rng.shuffle(batches)
        return iter([i for batch in batches for i in batch])
