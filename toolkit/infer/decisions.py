"""What every segment model shares (the encoder's `SegmentClassifier` and the linear baseline's
`LinearModel`): scores before any threshold, and per-label thresholds over them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.registry.saved import ModelMeta
from toolkit.scoring_defaults import SCORING
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.segment_decoding import merge_segments


@dataclass(frozen=True)
class SegmentScores:
    """What a segment model says about documents before any threshold: each document's segments and
    their per-label probabilities [segments x labels]. Evaluation sweeps thresholds over these."""

    segments: list[list[tuple[int, int]]]
    probabilities: list[np.ndarray]
    # segments.clause_starts: per document, [segments x labels] probability that a segment begins a clause
    starts: list[np.ndarray] | None = None

    def subset(self, documents: Sequence[int]) -> SegmentScores:
        """These scores for the given documents only, in that order."""
        return SegmentScores(
            [self.segments[i] for i in documents],
            [self.probabilities[i] for i in documents],
            None if self.starts is None else [self.starts[i] for i in documents],
        )


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
        starts = scores.starts or [None] * len(scores.segments)
        return [
            [PredictedSpan(a, b, label, score) for a, b, label, score in merge_segments(segs, p, self.labels, t, s)]
            for segs, p, t, s in zip(scores.segments, scores.probabilities, per_doc, starts)
        ]
