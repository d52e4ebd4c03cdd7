"""Training documents the segment encoder did not train on (segments.thresholds: held_out or cross_fitted,
segments.combination: fitted): which ones are held out, the thresholds chosen on them, and the combination with
the linear model fitted on them. The strategies of `evidence.py` call it."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.segment_classifier import SegmentClassifier
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.rundir import load_meta, write_meta
from toolkit.spans.segment_decoding import probability_logit, segment_targets, sigmoid
from toolkit.tasks.segments.combination import LINEAR_ONLY, Combination, HeldOutEvidence, fit_combination
from toolkit.tasks.segments.prepared import Choice, OutOfFold, SegmentPrepared
from toolkit.tasks.segments.thresholding import best_thresholds


def hold_out(n: int, share: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of `n` training documents: the ones to train on and the `share` held out (at least one each),
    drawn by `seed`, each list in document order."""
    if n < 2:
        raise ToolkitError(
            f"segments.thresholds=held_out needs at least 2 training documents; data.train has {n}",
            fix="add training documents, or use segments.thresholds=tuned",
        )
    count = min(n - 1, max(1, round(n * share)))
    held = sorted(random.Random(seed).sample(range(n), count))
    chosen = set(held)
    return [i for i in range(n) if i not in chosen], held


def stopping_split(documents: list[int], share: float, seed: int) -> tuple[list[int], list[int]]:
    """`documents` (indices) as (trained on, stopped on): the `share` an encoder is evaluated on after each epoch,
    to stop and keep its best epoch, drawn by `seed` (at least one of each when there are two), each in order."""
    if len(documents) < 2:
        return list(documents), []
    count = min(len(documents) - 1, max(1, round(len(documents) * share)))
    stopped = set(random.Random(seed).sample(documents, count))
    return [i for i in documents if i not in stopped], [i for i in documents if i in stopped]


def held_out_thresholds(
    recipe: SegmentClassificationRecipe, classifier: SegmentClassifier, p: SegmentPrepared, oof: OutOfFold | None = None
) -> tuple[list[float], str]:
    """thresholds=held_out: per-label thresholds with the best Jaccard F1 on the training documents the
    encoder did not train on (with the linear prior's out-of-fold scores of them), so dev only reports;
    cross_fitted: on every training document, as the fold encoders scored them (`oof`)."""
    records = p.threshold_records
    texts = [r.text for r in records]
    if oof is None:
        scores = classifier.score(texts, recipe.train.eval_batch_size, p.threshold_priors)
        how = f"chosen on {len(records)} training documents held out of training"
    else:
        scores = classifier.scores_from_encoder(texts, oof.segments, oof.encoder, p.threshold_priors)
        how = f"chosen on {len(records)} training documents scored out of fold by {oof.report['folds']} fold encoders"
    return best_thresholds(scores, records, p.labels, recipe.eval.jaccard_threshold), how


def fit_held_out_combination(
    recipe: SegmentClassificationRecipe,
    p: SegmentPrepared,
    segments: list[list[tuple[int, int]]],
    encoder: list[np.ndarray],
) -> tuple[Combination, list[float]]:
    """combination=fitted: per label, the combination of the encoder's own logits of the training documents it
    did not train on (`segments`, `encoder`: a held-out share scored by the saved encoder, or every document
    scored by the fold encoders) and the linear prior's out-of-fold logits, fitted and tested on them (or the
    linear model alone where the encoder does not add to it); also the encoder alone's thresholds, chosen on them."""
    records = p.threshold_records
    texts = [r.text for r in records]
    priors = p.threshold_priors
    evidence = HeldOutEvidence(
        texts,
        [r.spans for r in records],
        segments,
        [
            np.asarray(segment_targets(segs, r.spans, p.labels, recipe.segments.min_overlap), dtype=int).reshape(
                len(segs), len(p.labels)
            )
            for segs, r in zip(segments, records)
        ],
        encoder,
        [probability_logit(x) for x in priors.probabilities],
        priors.starts,
    )
    combination = fit_combination(
        evidence, p.labels, p.linear_thresholds, recipe.eval.jaccard_threshold, seed=recipe.seed
    )
    alone = SegmentScores(segments, [sigmoid(x) for x in encoder])
    return combination, best_thresholds(alone, records, p.labels, recipe.eval.jaccard_threshold)


def choose_on_held_out(
    recipe: SegmentClassificationRecipe,
    classifier: SegmentClassifier,
    p: SegmentPrepared,
    oof: OutOfFold | None,
    model_dir: Path,
) -> Choice:
    """The saved model's thresholds (and how they were chosen) from the training documents its encoder did not
    train on (`oof`: the fold encoders' scores of every one; None: the saved encoder scores the held-out share),
    the combination's record, and the encoder alone's thresholds; with combination=fitted the fitted weights are
    written into `model_dir`'s toolkit.json and set on `classifier`."""
    if oof is not None and oof.scored is not None:  # the budget cut the folds short
        if not oof.scored:
            return linear_fallback(recipe, classifier, p, model_dir, oof.report["cut_short"]["why"])
        oof, p = oof.restricted(p)
    if recipe.segments.combination != "fitted":
        return Choice(held_out_thresholds(recipe, classifier, p, oof))
    texts = [r.text for r in p.threshold_records]
    started = time.perf_counter()
    segments, encoder = (
        (oof.segments, oof.encoder) if oof else classifier.score_encoder(texts, recipe.train.eval_batch_size)
    )
    scored = time.perf_counter()
    combination, encoder_thresholds = fit_held_out_combination(recipe, p, segments, encoder)
    # What the stack costs beside the encoder's training (the folds' scoring is in run.cross_fitting).
    seconds = {"stack": round(time.perf_counter() - scored, 1)}
    if not oof:
        seconds["scoring_held_out"] = round(scored - started, 1)
    write_meta(model_dir, load_meta(model_dir).model_copy(update={"combination": combination.weights}))
    classifier.combination = combination.weights
    where = f"scored out of fold by {oof.report['folds']} fold encoders" if oof else "held out of training"
    how = f"fitted with the combination on {len(texts)} training documents {where}"
    record = {
        "combination": combination.report,
        "combination_pooled": combination.pooled,
        "combination_note": combination.note(),
        "encoder_kept": combination.kept,
        "combination_seconds": seconds,
    }
    return Choice((combination.thresholds, how), record, encoder_thresholds)


def linear_fallback(
    recipe: SegmentClassificationRecipe, classifier: SegmentClassifier, p: SegmentPrepared, model_dir: Path, why: str
) -> Choice:
    """No fold encoder finished under budget.seconds: every label is the linear model alone at its out-of-fold
    threshold (the --linear-baseline decision); the encoder is saved at weight 0."""
    if p.linear_thresholds is None:
        raise ToolkitError(
            f"budget.seconds: {why}, and without segments.linear_prior there is no linear model to fall back on",
            fix="raise budget.seconds, or set segments.linear_prior=true",
        )
    weights = [list(LINEAR_ONLY)] * len(p.labels)
    write_meta(model_dir, load_meta(model_dir).model_copy(update={"combination": weights}))
    classifier.combination = weights
    note = f"the budget left no finished fold encoder ({why}): the model is the linear baseline"
    report = {label: {"uses": "linear", "why": note} for label in p.labels}
    record = {"combination": report, "combination_note": note, "encoder_kept": {}}
    return Choice((list(p.linear_thresholds), f"the linear model's, chosen out of fold ({note})"), record)
