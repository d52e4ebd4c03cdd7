"""segment_classification inference: windows -> per-token label logits -> per-segment probabilities ->
spans at the saved per-label thresholds.

The model is an ordinary token classifier (one logit per label), so windowing, batching, the exported
paths and the service are the Tagger's; only decoding differs. `toolkit eval`, the end-of-training
evaluation, export parity and the service all call `SegmentClassifier.predict`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from toolkit.infer.decisions import SegmentDecisions, SegmentScores
from toolkit.infer.linear_model import LinearModel, segment_inputs
from toolkit.infer.tagger import Tagger, new_tally
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import Run, open_run
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.segment_decoding import (
    combine_logits,
    probability_logit,
    segment_logits,
    sigmoid,
    token_segments,
)
from toolkit.spans.segment_streaming import merge_stream, score_stream, stream_segment_windows
from toolkit.spans.segments import count_split_segments, segment_text
from toolkit.spans.windows import Window


class SegmentClassifier(SegmentDecisions, Tagger):
    """A trained segment model: per-label probabilities of each segment, merged into spans. A model trained
    with segments.linear_prior adds the linear model's per-label logit to each segment's logit (`prior`,
    a LinearModel saved in the model folder), or combines the two with the per-label weights
    fitted on held-out training documents (`combination`, segments.combination: fitted)."""

    def __init__(self, model, tokenizer, meta: ModelMeta, device: str = "cpu", prior=None):
        Tagger.__init__(self, model, tokenizer, meta, device)
        self.init_decisions(meta)
        self.prior = prior
        self.combination = meta.combination  # None: the encoder's logit plus the prior's

    @classmethod
    def load(cls, run: Run | Path, device: str | None = None) -> SegmentClassifier:
        run = run if isinstance(run, Run) else open_run(run)
        classifier = super().load(run, device)
        if run.meta.linear_prior:
            classifier.prior = LinearModel.load_files(run.model_dir, run.meta.linear_prior, run.meta)
        return classifier

    def predict(self, texts: Sequence[str], batch_size: int | None = None) -> list[list[PredictedSpan]]:
        spans = super().predict(texts, batch_size)
        split = {i: n for i, text in enumerate(texts) if (n := count_split_segments(text))}
        if split:  # document index -> segments split at spans.segments.MAX_SEGMENT_CHARS (toolkit predict's meta)
            self.last_report["segments_split_in_documents"] = split
        return spans

    def decisions(self, logits: np.ndarray) -> np.ndarray:
        """One sigmoid per label: the decision is its sign."""
        return logits > 0

    def windows(self, texts: Sequence[str]) -> list[Window]:
        """The model's inputs: one per segment for a model trained on segments (segments.encoder_input), else
        the tagger's windows over each document."""
        if self.meta.segment_tokens is None:
            return super().windows(texts)
        from toolkit.spans.segment_windows import make_segment_windows

        segments = [segment_text(t) for t in texts]
        return make_segment_windows(
            self.tokenizer, texts, segments, self.meta.segment_tokens, self.meta.context_tokens or 0
        )[0]

    def encoder_logits(
        self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]
    ) -> tuple[list[list[tuple[int, int]]], list[np.ndarray]]:
        """Each document's segments and the encoder's own [segments x labels] logits (no prior), from the
        windows' token logits."""
        segments = [segment_text(t) for t in texts]
        by_doc: list[tuple[list, list]] = [([], []) for _ in texts]
        for w, window_logits in zip(windows, logits):
            by_doc[w.doc][0].append(token_segments(w.offsets, segments[w.doc]))
            by_doc[w.doc][1].append(window_logits)
        return segments, [
            segment_logits(len(segs), len(self.labels), ids, lg) for segs, (ids, lg) in zip(segments, by_doc)
        ]

    def segment_scores(
        self,
        texts: Sequence[str],
        windows: Sequence[Window],
        logits: Sequence[np.ndarray],
        prior: SegmentScores | None = None,
    ) -> SegmentScores:
        """Each document's segments and their [segments x labels] probabilities, from the windows' logits
        (combined with the linear prior's logits, and its clause starts, when the model has one). `prior`
        gives the prior's scores of these texts instead: training documents' out-of-fold ones."""
        segments, logits_per_doc = self.encoder_logits(texts, windows, logits)
        return self.scores_from_encoder(texts, segments, logits_per_doc, prior)

    def scores_from_encoder(
        self,
        texts: Sequence[str],
        segments: list[list[tuple[int, int]]],
        logits_per_doc: list[np.ndarray],
        prior: SegmentScores | None = None,
    ) -> SegmentScores:
        """The model's scores from its encoder's own segment logits (`score_encoder`), with the prior's."""
        if self.prior is None:
            return SegmentScores(segments, [sigmoid(x) for x in logits_per_doc])
        if prior is None:
            prior = self.prior.score_segments(segments, [segment_inputs(t, segs) for t, segs in zip(texts, segments)])
        combined = [self.probabilities(a, b) for a, b in zip(logits_per_doc, prior.probabilities)]
        return SegmentScores(segments, combined, prior.starts)

    def probabilities(self, encoder_logits: np.ndarray, prior_probabilities: np.ndarray | None) -> np.ndarray:
        """[segments x labels] probabilities from the encoder's segment logits and the prior's probabilities."""
        if prior_probabilities is None:
            return sigmoid(encoder_logits)
        return sigmoid(combine_logits(encoder_logits, probability_logit(prior_probabilities), self.combination))

    def long_windows(self, text: str, tally: dict | None = None) -> Iterator[Window]:
        if self.meta.segment_tokens is None:
            return super().long_windows(text, tally)
        return stream_segment_windows(
            self.tokenizer, text, self.meta.segment_tokens, self.meta.context_tokens or 0, self.chunk_chars, tally
        )

    def block_scorer(self, text: str):
        """`score_block` for `toolkit.spans.segment_streaming`: settled segments' probabilities (and clause-start
        probabilities) from their encoder logits, the prior reading each segment with its neighbours."""

        def score_block(segments, encoder, before, after) -> tuple[np.ndarray, np.ndarray | None]:
            if self.prior is None:
                return self.probabilities(encoder, None), None
            around = [before] * (before is not None) + segments + [after] * (after is not None)
            inputs = segment_inputs(text, around)[before is not None :][: len(segments)]
            prior = self.prior.score_segments([segments], [inputs])
            starts = None if prior.starts is None else prior.starts[0]
            return self.probabilities(encoder, prior.probabilities[0]), starts

        return score_block

    def predict_long(self, text: str, batch_size: int = 16, tally: dict | None = None) -> list[PredictedSpan]:
        """One long document's spans (what `predict` gives), in memory bounded by `group_windows`."""
        tally = new_tally() if tally is None else tally
        groups = self.scored_groups(self.long_windows(text, tally), batch_size, tally)
        spans, forced = merge_stream(
            text, groups, self.labels, self.thresholds, self.block_scorer(text), self.chunk_chars
        )
        tally["forced_cuts"] += forced
        return [PredictedSpan(a, b, label, score) for a, b, label, score in spans]

    def decode(
        self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]
    ) -> list[list[PredictedSpan]]:
        return self.spans_at(self.segment_scores(texts, windows, logits))

    def score_encoder(
        self, texts: Sequence[str], batch_size: int = 16
    ) -> tuple[list[list[tuple[int, int]]], list[np.ndarray]]:
        """The documents' segments and the encoder's own segment logits (what segments.combination fits), read as
        `score` reads them."""
        segments, encoder, _ = self._read(
            texts, batch_size, lambda *read: (*self.encoder_logits(*read), None), lambda text: _encoder_alone
        )
        return segments, encoder

    def score(self, texts: Sequence[str], batch_size: int = 16, prior: SegmentScores | None = None) -> SegmentScores:
        """Each document's segments and probabilities; with `prior` (the linear model's scores of training
        documents), from the encoder's logits combined with those."""
        if prior is not None:
            segments, encoder = self.score_encoder(texts, batch_size)
            return self.scores_from_encoder(texts, segments, encoder, prior)

        def whole(*read):
            scores = self.segment_scores(*read)
            return scores.segments, scores.probabilities, scores.starts

        segments, probabilities, starts = self._read(texts, batch_size, whole, self.block_scorer)
        has_starts = self.prior is not None and self.prior.starts is not None
        return SegmentScores(segments, probabilities, starts if has_starts else None)  # type: ignore[arg-type]

    def _read(self, texts: Sequence[str], batch_size: int, whole, block_scorer) -> tuple[list, list, list]:
        """(segments, per-segment values, clause starts) of each document: the short ones read together by
        `whole(texts, windows, logits)`, one longer than `long_document_chars` a group of windows at a time
        through `block_scorer(text)` (what is kept is its segments' values, not its windows')."""
        start = time.perf_counter()
        long = {i for i, t in enumerate(texts) if len(t) > self.long_document_chars}
        short = [i for i in range(len(texts)) if i not in long]
        short_texts = [texts[i] for i in short]
        windows = self.windows(short_texts)
        part_segments, part_values, part_starts = whole(short_texts, windows, self.logits(windows, batch_size))
        segments: list = [None] * len(texts)
        values: list = [None] * len(texts)
        starts: list = [None] * len(texts)
        for k, i in enumerate(short):
            segments[i], values[i] = part_segments[k], part_values[k]
            starts[i] = None if part_starts is None else part_starts[k]
        tally = new_tally()
        for i in sorted(long):
            groups = self.scored_groups(self.long_windows(texts[i], tally), batch_size, tally)
            segments[i], values[i], starts[i] = score_stream(
                texts[i], groups, len(self.labels), block_scorer(texts[i]), self.chunk_chars
            )
        self.last_report = self.report_since(start, windows, tally)
        return segments, values, starts


def _encoder_alone(segments, encoder, before, after) -> tuple[np.ndarray, None]:
    """A block scorer that keeps the encoder's own segment logits (`score_encoder`'s streamed path)."""
    return encoder, None
