"""Fitting the linear segment model (TF-IDF over each segment with its neighbours' words, one logistic
regression per label with balanced class weights, scikit-learn): documents segmented once, the fit, its
out-of-fold scores over the training documents, and the fit as an encoder's prior (segments.linear_prior).
The baseline's flow (`segment_linear`) and the encoder's segment flow both use it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.infer.linear import LinearSegmentClassifier, segment_inputs
from toolkit.rundir import ModelMeta
from toolkit.spans.segment_decoding import probability_logit, segment_targets
from toolkit.spans.segments import segment_text


def _pipeline(n_labels: int, seed: int):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline

    classifier = LogisticRegression(class_weight="balanced", max_iter=2000, C=1.0, random_state=seed)
    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, lowercase=True),
        OneVsRestClassifier(classifier),
    )


@dataclass(frozen=True)
class SegmentedDocument:
    """A training document cut into segments once: their spans, model inputs and per-label targets."""

    segments: list[tuple[int, int]]
    inputs: list[str]
    targets: list[list[int]]


def segment_documents(records: list[SpanRecord], labels: list[str], min_overlap: float) -> list[SegmentedDocument]:
    out = []
    for r in records:
        segments = segment_text(r.text)
        out.append(
            SegmentedDocument(
                segments, segment_inputs(r.text, segments), segment_targets(segments, r.spans, labels, min_overlap)
            )
        )
    return out


def stacked(documents: list[SegmentedDocument], n_labels: int) -> tuple[list[str], np.ndarray]:
    """Every segment's input text and its targets [segments, labels], in document order."""
    inputs = [x for d in documents for x in d.inputs]
    targets = [t for d in documents for t in d.targets]
    return inputs, np.asarray(targets, dtype=np.int64).reshape(len(inputs), n_labels)


def fit_pipeline(inputs: list[str], y: np.ndarray, seed: int):
    import warnings

    with warnings.catch_warnings():
        # sklearn warns for every label without positives; the run reports them.
        warnings.filterwarnings("ignore", message="Label not .* is present in all training examples")
        return _pipeline(y.shape[1], seed).fit(inputs, y)


def out_of_fold_scores(
    documents: list[SegmentedDocument], meta: ModelMeta, folds: int, seed: int
) -> tuple[list[np.ndarray], int]:
    """Each training document's [segments x labels] probabilities from a linear model fitted on the other
    folds (documents in `folds` random folds), in the documents' order; and the number of folds used."""
    k = min(folds, len(documents))
    order = np.random.default_rng(seed).permutation(len(documents))
    out: list[np.ndarray | None] = [None] * len(documents)
    for fold in range(k):
        held = sorted(order[fold::k].tolist())
        kept = sorted(set(range(len(documents))) - set(held))
        inputs, y = stacked([documents[i] for i in kept], len(meta.labels))
        scorer = LinearSegmentClassifier(fit_pipeline(inputs, y, seed), meta)
        scores = scorer.score_segments([documents[i].segments for i in held], [documents[i].inputs for i in held])
        for i, probabilities in zip(held, scores.probabilities):
            out[i] = probabilities
    return out, k  # type: ignore[return-value]


@dataclass
class LinearPrior:
    """segments.linear_prior: the linear model fitted on every training document (it scores dev and new
    text) and the training documents' out-of-fold logits (what the encoder trains against)."""

    pipeline: object
    train_logits: list[np.ndarray]
    folds: int
    seconds: float


def fit_linear_prior(
    records: list[SpanRecord], labels: list[str], min_overlap: float, folds: int, seed: int, task: str
) -> LinearPrior:
    """The linear baseline as the encoder's prior: fitted on all of `records`, and out of fold on each."""
    started = time.perf_counter()
    documents = segment_documents(records, labels, min_overlap)
    inputs, y = stacked(documents, len(labels))
    if not inputs:
        raise ToolkitError("segments.linear_prior: the training documents hold no text", fix="check data.train")
    meta = ModelMeta(task=task, labels=labels, multi_label=True)
    probabilities, k = out_of_fold_scores(documents, meta, folds, seed)
    return LinearPrior(
        fit_pipeline(inputs, y, seed),
        [probability_logit(p) for p in probabilities],
        k,
        time.perf_counter() - started,
    )
