"""Training documents held out of the segment encoder's training (segments.thresholds: held_out, segments.combination:
fitted): which ones, the thresholds chosen on them, and the combination with the linear prior fitted on them."""

from __future__ import annotations

import random

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.segmenter import SegmentClassifier
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.spans.segment_decoding import probability_logit, segment_targets, sigmoid
from toolkit.tasks.combination import Combination, HeldOutEvidence, fit_combination
from toolkit.tasks.flow import Prepared
from toolkit.tasks.segment_scoring import (
    best_thresholds,
)


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


def held_out_thresholds(
    recipe: SegmentClassificationRecipe, classifier: SegmentClassifier, p: Prepared
) -> tuple[list[float], str]:
    """thresholds=held_out: per-label thresholds with the best Jaccard F1 on the training documents the
    encoder did not train on (with the linear prior's out-of-fold scores of them), so dev only reports."""
    records = p.threshold_records
    texts = [r.text for r in records]
    scores = classifier.score(texts, recipe.train.eval_batch_size, p.threshold_priors)
    thresholds = best_thresholds(scores, records, p.labels, recipe.eval.jaccard_threshold)
    return thresholds, f"chosen on {len(records)} training documents held out of training"


def fit_held_out_combination(
    recipe: SegmentClassificationRecipe, classifier: SegmentClassifier, p: Prepared
) -> tuple[Combination, list[float]]:
    """combination=fitted: the saved encoder's own logits and the linear prior's out-of-fold logits of the
    held-out training documents, and per label the combination of the two fitted on them (or the linear
    model alone where the encoder does not help there); also the encoder alone's thresholds, chosen on them."""
    records = p.threshold_records
    texts = [r.text for r in records]
    segments, encoder = classifier.score_encoder(texts, recipe.train.eval_batch_size)
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
