"""segment_classification: segment targets for training, and per-token logits -> per-segment
probabilities -> spans. Pure: no torch, no I/O.

The model is a token classifier with one logit per label. A segment's logit is the mean of its
tokens' logits; since the head is linear, that equals a linear head on the mean-pooled token states,
so the exported graph is an ordinary token-classification graph (ONNX export, parity and the service
work unchanged) while the decision is per segment. A segment seen by several windows takes the mean
over windows, weighted by how many of its tokens each window holds.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from toolkit.spans.overlaps import SpanLike

NO_SEGMENT = -100  # special tokens and tokens outside every segment (whitespace)
# segments.clause_starts: a segment inside a run that begins a clause with this probability starts a new span.
START_THRESHOLD = 0.5


def carrying_segments(segments: Sequence[tuple[int, int]], span: SpanLike, min_overlap: float) -> list[int]:
    """Indices of the segments that carry `span`: at least `min_overlap` of their characters lie inside it."""
    return [
        k
        for k, (a, b) in enumerate(segments)
        if a < span.end and span.start < b and (min(b, span.end) - max(a, span.start)) >= min_overlap * (b - a)
    ]


def segment_targets(
    segments: Sequence[tuple[int, int]], spans: Sequence[SpanLike], labels: Sequence[str], min_overlap: float
) -> list[list[int]]:
    """Multi-hot label vector per segment: a segment is positive for a label when at least `min_overlap`
    of its characters lie inside one gold span of that label."""
    index = {label: i for i, label in enumerate(labels)}
    out = [[0] * len(labels) for _ in segments]
    for s in spans:
        for k in carrying_segments(segments, s, min_overlap) if s.label in index else []:
            out[k][index[s.label]] = 1
    return out


def segment_starts(
    segments: Sequence[tuple[int, int]], spans: Sequence[SpanLike], labels: Sequence[str], min_overlap: float
) -> list[list[int]]:
    """Per segment and label, 1 where the segment is the first that carries a gold span of the label (the B
    of B/I/O over segments; `segment_targets` marks B and I alike)."""
    index = {label: i for i, label in enumerate(labels)}
    out = [[0] * len(labels) for _ in segments]
    for s in spans:
        carried = carrying_segments(segments, s, min_overlap) if s.label in index else []
        if carried:
            out[carried[0]][index[s.label]] = 1
    return out


def segment_runs(inside: np.ndarray, starts: np.ndarray | None = None) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive True in `inside`. With `starts` (True where a segment
    begins a clause), a run also splits before each of its segments but the first that begins one, so
    adjacent clauses of one label stay apart."""
    inside = np.asarray(inside, dtype=bool)
    if not inside.any():
        return []
    padded = np.concatenate([[False], inside, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    runs = [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]
    if starts is None:
        return runs
    out = []
    for a, b in runs:
        cuts = [a] + [k for k in range(a + 1, b + 1) if starts[k]]
        out += [(c, cuts[i + 1] - 1 if i + 1 < len(cuts) else b) for i, c in enumerate(cuts)]
    return out


def token_segments(offsets: Sequence[tuple[int, int]], segments: Sequence[tuple[int, int]]) -> list[int]:
    """Index of the segment holding each token (by its first character), NO_SEGMENT for special tokens."""
    starts = [a for a, _ in segments]
    out = []
    for a, b in offsets:
        k = bisect_right(starts, a) - 1
        out.append(k if b > a and k >= 0 and a < segments[k][1] else NO_SEGMENT)
    return out


def segment_logits(
    n_segments: int, n_labels: int, token_segment_ids: Sequence[Sequence[int]], logits: Sequence[np.ndarray]
) -> np.ndarray:
    """[n_segments, n_labels] mean token logit per segment over every window of one document; NaN rows
    for segments no token fell in."""
    sums = np.zeros((n_segments, n_labels))
    counts = np.zeros(n_segments)
    for ids, window_logits in zip(token_segment_ids, logits):
        ids = np.asarray(ids)
        keep = ids != NO_SEGMENT
        np.add.at(sums, ids[keep], np.asarray(window_logits, dtype=float)[: len(ids)][keep])
        np.add.at(counts, ids[keep], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts[:, None]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.nan_to_num(x, nan=-np.inf)))


def combine_logits(
    encoder: np.ndarray, linear: np.ndarray, weights: Sequence[Sequence[float]] | None = None
) -> np.ndarray:
    """A segment model's [segments x labels] logits from its encoder's and its linear prior's. Without
    `weights` their sum (the prior the encoder was trained against); with per-label (w_linear, w_encoder,
    bias) their fitted combination (segments.combination: fitted). A label whose encoder weight is 0 is the
    linear model alone, also on segments no window token reached (where the encoder's logit is NaN)."""
    encoder, linear = np.asarray(encoder, dtype=float), np.asarray(linear, dtype=float)
    if weights is None:
        return encoder + linear
    w = np.asarray(weights, dtype=float).reshape(-1, 3)
    encoder_term = np.where(w[:, 1] == 0, 0.0, encoder * w[:, 1])
    return linear * w[:, 0] + encoder_term + w[:, 2]


def probability_logit(probabilities: np.ndarray, floor: float = 1e-6) -> np.ndarray:
    """log(p / (1 - p)), with p kept within [floor, 1 - floor] so a certain 0 or 1 stays finite (a label the
    linear model never saw positive predicts a constant 0)."""
    p = np.clip(np.asarray(probabilities, dtype=float), floor, 1 - floor)
    return np.log(p) - np.log1p(-p)


def best_segment_probability(
    local_ids: Sequence[int], logits: np.ndarray, prior: Sequence[Sequence[float]] | None = None
) -> float:
    """The highest probability any segment of one window gets for any label, read from that window alone
    (how hard-negative mining ranks clause-free windows), with its segments' prior logits added when the
    model has one (segments.linear_prior); 0 for a window without segments."""
    ids = [i for i in local_ids if i != NO_SEGMENT]
    if not ids:
        return 0.0
    logits = np.asarray(logits, dtype=float)
    local = segment_logits(max(ids) + 1, logits.shape[-1], [local_ids], [logits])
    if prior is not None:
        local = local + np.asarray(prior, dtype=float).reshape(local.shape)
    return float(np.max(sigmoid(local)))


def merge_segments(
    segments: Sequence[tuple[int, int]],
    probs: np.ndarray,
    labels: Sequence[str],
    thresholds: Sequence[float],
    starts: np.ndarray | None = None,
) -> list[tuple[int, int, str, float]]:
    """Consecutive segments at or above a label's threshold become one span of that label, scored by the
    mean probability of its segments; with `starts` ([segments x labels] probability that a segment begins
    a clause), a run splits where it reaches START_THRESHOLD. Spans sorted by (start, end, label)."""
    out = []
    for j, label in enumerate(labels):
        begins = None if starts is None else starts[:, j] >= START_THRESHOLD
        for a, b in segment_runs(probs[:, j] >= thresholds[j], begins):
            out.append((segments[a][0], segments[b][1], label, float(np.mean(probs[a : b + 1, j]))))
    return sorted(out, key=lambda s: (s[0], s[1], s[2]))
