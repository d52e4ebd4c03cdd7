"""segment_classification inference: windows -> per-token label logits -> per-segment probabilities ->
spans at the saved per-label thresholds.

The model is an ordinary token classifier (one logit per label), so windowing, batching, the exported
paths and the service are the Tagger's; only decoding differs. `toolkit eval`, the end-of-training
evaluation, export parity and the service all call `SegmentClassifier.predict`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.infer.tagger import Tagger
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.segment_decoding import merge_segments, segment_logits, sigmoid, token_segments
from toolkit.spans.segments import segment_text
from toolkit.spans.windows import Window

DEFAULT_THRESHOLD = 0.5


class SegmentDecisions:
    """Per-label thresholds over segment probabilities, shared by every segment model (the encoder and
    the linear baseline): the last predicted documents' spans at any thresholds."""

    def init_decisions(self, meta: dict) -> None:
        self.labels = list(meta["labels"])
        self.thresholds = list(meta.get("thresholds") or [DEFAULT_THRESHOLD] * len(self.labels))
        self.last_segments: list[list[tuple[int, int]]] = []
        self.last_probabilities: list[np.ndarray] = []

    def spans_at(self, texts: Sequence[str], thresholds: Sequence[float] | Sequence[Sequence[float]]) -> list[list[PredictedSpan]]:
        """Spans of the last predicted documents at other thresholds (one list for all, or one per document)."""
        per_doc = thresholds if thresholds and isinstance(thresholds[0], (list, tuple)) else [thresholds] * len(texts)
        return [
            [PredictedSpan(a, b, label, score) for a, b, label, score in merge_segments(segs, p, self.labels, t)]
            for segs, p, t in zip(self.last_segments, self.last_probabilities, per_doc)
        ]


class SegmentClassifier(SegmentDecisions, Tagger):
    """A trained segment model: per-label probabilities of each segment, merged into spans."""

    def __init__(self, model, tokenizer, meta: dict, device: str = "cpu"):
        Tagger.__init__(self, model, tokenizer, meta, device)
        self.init_decisions(meta)

    def probabilities(self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]) -> tuple[list, list[np.ndarray]]:
        """(segments, [segments x labels] probabilities) per document."""
        segments = [segment_text(t) for t in texts]
        by_doc: list[tuple[list, list]] = [([], []) for _ in texts]
        for w, window_logits in zip(windows, logits):
            by_doc[w.doc][0].append(token_segments(w.offsets, segments[w.doc]))
            by_doc[w.doc][1].append(window_logits)
        probs = [sigmoid(segment_logits(len(segs), len(self.labels), ids, lg)) for segs, (ids, lg) in zip(segments, by_doc)]
        return segments, probs

    def decode(self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]) -> list[list[PredictedSpan]]:
        self.last_segments, self.last_probabilities = self.probabilities(texts, windows, logits)
        return self.spans_at(texts, self.thresholds)
