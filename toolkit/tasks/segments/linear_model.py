"""Fitting the linear segment model (TF-IDF over each segment with its neighbours' words, one logistic
regression per label with balanced class weights, scikit-learn): documents segmented once, the fit, its
out-of-fold scores over the training documents, and the fit as an encoder's prior (segments.linear_prior).
The baseline's flow (`segment_baseline`) and the encoder's segment flow both use it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.linear_model import LinearModel, segment_inputs
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import model_meta
from toolkit.spans.segment_decoding import probability_logit, segment_starts, segment_targets
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
    """A training document cut into segments once: their spans, model inputs, per-label targets, and which
    segments begin a clause (`segment_starts`)."""

    segments: list[tuple[int, int]]
    inputs: list[str]
    targets: list[list[int]]
    starts: list[list[int]]


def segment_documents(records: list[SpanRecord], labels: list[str], min_overlap: float) -> list[SegmentedDocument]:
    out = []
    for r in records:
        segments = segment_text(r.text)
        out.append(
            SegmentedDocument(
                segments,
                segment_inputs(r.text, segments),
                segment_targets(segments, r.spans, labels, min_overlap),
                segment_starts(segments, r.spans, labels, min_overlap),
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


def fit_starts(pipeline, inputs: list[str], y: np.ndarray, starts: np.ndarray, seed: int) -> list:
    """segments.clause_starts: per label, a logistic regression on the pipeline's TF-IDF features of the
    label's clause segments, telling the first segment of a clause from the ones that continue it; a
    constant (1.0 or 0.0) where the training clauses never or always span several segments. Unweighted:
    a run splits only where a new clause is likelier than a continuation."""
    from sklearn.linear_model import LogisticRegression

    # Only clause segments are read: TF-IDF of every segment of a long-document corpus costs more than the fits.
    clause_rows = np.flatnonzero(y.any(axis=1))
    features = pipeline[:-1].transform([inputs[i] for i in clause_rows])
    out: list = []
    for j in range(y.shape[1]):
        rows = np.flatnonzero(y[clause_rows, j])
        begins = starts[clause_rows[rows], j]
        if len(set(begins.tolist())) < 2:
            out.append(float(begins[0]) if len(rows) else 0.0)
            continue
        out.append(LogisticRegression(max_iter=2000, random_state=seed).fit(features[rows], begins))
    return out


def fit_classifier(
    documents: list[SegmentedDocument], meta: ModelMeta, seed: int, clause_starts: bool = False
) -> LinearModel:
    """The linear segment model fitted on `documents` (with its clause-start classifiers when asked)."""
    inputs, y = stacked(documents, len(meta.labels))
    pipeline = fit_pipeline(inputs, y, seed)
    starts = None
    if clause_starts:
        begins = np.asarray([t for d in documents for t in d.starts], dtype=np.int64).reshape(y.shape)
        starts = fit_starts(pipeline, inputs, y, begins, seed)
    return LinearModel(pipeline, meta, starts)


def out_of_fold_scores(
    documents: list[SegmentedDocument], meta: ModelMeta, folds: int, seed: int, clause_starts: bool = False
) -> tuple[SegmentScores, int]:
    """Each training document's scores from a linear model fitted on the other folds (documents in `folds`
    random folds), in the documents' order; and the number of folds used."""
    k = min(folds, len(documents))
    order = np.random.default_rng(seed).permutation(len(documents))
    probabilities: list = [None] * len(documents)
    starts: list = [None] * len(documents)
    for fold in range(k):
        held = sorted(order[fold::k].tolist())
        kept = sorted(set(range(len(documents))) - set(held))
        scorer = fit_classifier([documents[i] for i in kept], meta, seed, clause_starts)
        scores = scorer.score_segments([documents[i].segments for i in held], [documents[i].inputs for i in held])
        for n, i in enumerate(held):
            probabilities[i] = scores.probabilities[n]
            starts[i] = scores.starts[n] if scores.starts else None
    return SegmentScores([d.segments for d in documents], probabilities, starts if clause_starts else None), k


@dataclass
class FittedLinearModel:
    """segments.linear_prior: the linear model fitted on every training document (it scores dev and new
    text) and the training documents' out-of-fold logits (what the encoder trains against)."""

    classifier: LinearModel
    train_scores: SegmentScores  # out of fold, with clause starts when asked (fold_starts)
    folds: int
    seconds: float

    @property
    def train_logits(self) -> list[np.ndarray]:
        return [probability_logit(p) for p in self.train_scores.probabilities]

    def train_logits_of(self, documents: list[int]) -> list[np.ndarray]:
        """The out-of-fold logits of these training documents, in that order."""
        logits = self.train_logits
        return [logits[i] for i in documents]


def fit_linear_model(
    records: list[SpanRecord],
    labels: list[str],
    min_overlap: float,
    folds: int,
    seed: int,
    task: str,
    clause_starts: bool = False,
    fold_starts: bool = False,
) -> FittedLinearModel:
    """The linear baseline as the encoder's prior: fitted on all of `records`, and out of fold on each."""
    started = time.perf_counter()
    documents = segment_documents(records, labels, min_overlap)
    if not any(d.inputs for d in documents):
        raise ToolkitError("segments.linear_prior: the training documents hold no text", fix="check data.train")
    meta = model_meta(task=task, labels=labels, multi_label=True)
    # Out-of-fold clause starts are read only where thresholds are chosen on training documents (held_out).
    scores, k = out_of_fold_scores(documents, meta, folds, seed, clause_starts and fold_starts)
    return FittedLinearModel(
        fit_classifier(documents, meta, seed, clause_starts), scores, k, time.perf_counter() - started
    )
