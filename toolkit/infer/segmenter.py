"""segment_classification inference: windows -> per-token label logits -> per-segment probabilities ->
spans at the saved per-label thresholds.

The model is an ordinary token classifier (one logit per label), so windowing, batching, the exported
paths and the service are the Tagger's; only decoding differs. `toolkit eval`, the end-of-training
evaluation, export parity and the service all call `SegmentClassifier.predict`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.infer.tagger import Tagger
from toolkit.rundir import ModelMeta
from toolkit.scoring import SCORING
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.segment_decoding import merge_segments, segment_logits, sigmoid, token_segments
from toolkit.spans.segments import segment_text
from toolkit.spans.windows import Window


@dataclass(frozen=True)
class SegmentScores:
    """What a segment model says about documents before any threshold: each document's segments and
    their per-label probabilities [segments x labels]. Evaluation sweeps thresholds over these."""

    segments: list[list[tuple[int, int]]]
    probabilities: list[np.ndarray]


class SegmentDecisions:
    """Per-label thresholds over segment probabilities, shared by every segment model (the encoder and
    the linear baseline): `score` documents once, then `spans_at` any thresholds."""

    def init_decisions(self, meta: ModelMeta) -> None:
        self.labels = list(meta.labels)
        self.thresholds = list(meta.thresholds or self.default_thresholds())

    def default_thresholds(self) -> list[float]:
        return [SCORING.decision_threshold] * len(self.labels)

    def score(self, texts: Sequence[str], batch_size: int = 16) -> SegmentScores:
        raise NotImplementedError

    def spans_at(
        self, scores: SegmentScores, thresholds: Sequence[float] | Sequence[Sequence[float]] | None = None
    ) -> list[list[PredictedSpan]]:
        """Spans at the saved thresholds, or at others (one list for all documents, or one per document)."""
        thresholds = self.thresholds if thresholds is None else thresholds
        per_doc = (
            thresholds
            if thresholds and isinstance(thresholds[0], (list, tuple))
            else [thresholds] * len(scores.segments)
        )
        return [
            [PredictedSpan(a, b, label, score) for a, b, label, score in merge_segments(segs, p, self.labels, t)]
            for segs, p, t in zip(scores.segments, scores.probabilities, per_doc)
        ]


class SegmentClassifier(SegmentDecisions, Tagger):
    """A trained segment model: per-label probabilities of each segment, merged into spans."""

    def __init__(self, model, tokenizer, meta: ModelMeta, device: str = "cpu"):
        Tagger.__init__(self, model, tokenizer, meta, device)
        self.init_decisions(meta)

    def probabilities(
        self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]
    ) -> tuple[list, list[np.ndarray]]:
        """(segments, [segments x labels] probabilities) per document."""
        segments = [segment_text(t) for t in texts]
        by_doc: list[tuple[list, list]] = [([], []) for _ in texts]
        for w, window_logits in zip(windows, logits):
            by_doc[w.doc][0].append(token_segments(w.offsets, segments[w.doc]))
            by_doc[w.doc][1].append(window_logits)
        probs = [
            sigmoid(segment_logits(len(segs), len(self.labels), ids, lg)) for segs, (ids, lg) in zip(segments, by_doc)
        ]
        return segments, probs

    def decode(
        self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]
    ) -> list[list[PredictedSpan]]:
        return self.spans_at(SegmentScores(*self.probabilities(texts, windows, logits)))

    def score(self, texts: Sequence[str], batch_size: int = 16) -> SegmentScores:
        start = time.perf_counter()
        windows = self.windows(texts)
        scores = SegmentScores(*self.probabilities(texts, windows, self.logits(windows, batch_size)))
        self.last_report = {
            "seconds": time.perf_counter() - start,
            "windows": len(windows),
            "tokens": sum(len(w.input_ids) for w in windows),
        }
        return scores
