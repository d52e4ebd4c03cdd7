"""segments.thresholds=cross_fitted: every training document scored by an encoder that did not train on it.

The training documents are split into segments.encoder_folds folds. Each fold's encoder starts from the
recipe's model and trains on the other folds but a share of them (segments.stopping_share), to its plateau: the
macro AUPR of that share, read after each epoch, stops it and chooses its checkpoint. It then scores the fold
it left out, documents it neither trained on nor chose by. Those out-of-fold scores are the evidence the
combination is fitted and tested on and the thresholds are chosen on (`combination.py`), so every training
clause counts, not a held-out quarter. The encoder served is then refit on every training document as the
folds trained (the same schedule, over the same horizon of epochs) and stopped at their median best epoch: one
model, not K.

The stack's weights and thresholds are fitted on the fold encoders' scores and applied to the refit's, which
trained on more documents and may score on another scale; each run reports the encoder alone on dev at those
thresholds (`models.encoder`), so a mismatch shows.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import random
import shutil
import statistics
import time
from pathlib import Path

from toolkit.models.building import build_segment_model
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.tasks.segments.features import segment_input_features
from toolkit.tasks.segments.held_out import stopping_split
from toolkit.tasks.segments.prepared import EvaluationSet, FitEncoder, OutOfFold, ScorerOf, SegmentPrepared
from toolkit.tasks.segments.trainer import encoder_training

FOLDS_DIR = "folds"


def assign_folds(documents: int, folds: int, seed: int) -> list[int]:
    """Each document's fold: a shuffle by `seed` dealt round-robin, so folds differ in size by at most one."""
    order = list(range(documents))
    random.Random(seed).shuffle(order)
    fold = [0] * documents
    for position, i in enumerate(order):
        fold[i] = position % folds
    return fold


def cross_fit(
    recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared, fit: FitEncoder, scorer_of: ScorerOf
) -> OutOfFold:
    """Train one encoder per fold of the training documents (`p.threshold_records`: every one, in the order
    `p.train` was built from) and score the documents it left out."""
    from transformers import set_seed

    s, labels, records = recipe.segments, p.labels, p.threshold_records
    k = min(s.encoder_folds, len(records))
    fold = assign_folds(len(records), k, recipe.seed)
    segments: list = [None] * len(records)
    encoder: list = [None] * len(records)
    folds = []
    for f in range(k):
        started = time.perf_counter()
        held = [i for i in range(len(records)) if fold[i] == f]
        held_records = [records[i] for i in held]
        trained_on, stopped_on = stopping_split(
            [i for i in range(len(records)) if fold[i] != f], s.stopping_share, recipe.seed + f
        )
        stopping_records = [records[i] for i in stopped_on]
        set_seed(recipe.seed)  # every fold's encoder starts as the served one does
        model, _ = build_segment_model(recipe.model, labels)
        inputs, _ = segment_input_features(
            p.tokenizer, stopping_records, labels, s.segment_tokens, s.context_tokens, s.min_overlap
        )
        training = set(trained_on)
        part = dataclasses.replace(
            p,
            model=model,
            train=p.train.subset([n for n, w in enumerate(p.train.windows) if w.doc in training]),
            evaluation=EvaluationSet(stopping_records, inputs, None, on_dev=False),
            threshold_records=held_records,
            threshold_priors=None,
        )
        fold_dir = run_dir / FOLDS_DIR / f"fold_{f}"
        trained = fit(fold_dir, part)  # the fold's encoder alone: no refit, no later stages
        training_seconds = time.perf_counter() - started
        scorer = scorer_of(part, trained.trainer.model)
        fold_segments, logits = scorer.score_encoder([r.text for r in held_records], recipe.train.eval_batch_size)
        for i, segs, x in zip(held, fold_segments, logits):
            segments[i], encoder[i] = segs, x
        shutil.rmtree(fold_dir / "checkpoints", ignore_errors=True)  # scored: its checkpoints are not needed
        folds.append(
            {
                "documents": len(held),
                "trained_on_documents": len(trained_on),
                "stopped_on_documents": len(stopped_on),
                "horizon_epochs": trained.trainer.args.num_train_epochs,
                "clauses": {lb: sum(sp.label == lb for r in held_records for sp in r.spans) for lb in labels},
                **encoder_training(recipe, trained),
                "training_seconds": round(training_seconds, 1),
                "scoring_seconds": round(time.perf_counter() - started - training_seconds, 1),
            }
        )
        del trained, model, part, scorer  # one fold's model in memory at a time
        gc.collect()
    best = [f["best_epoch"] for f in folds if f["best_epoch"]]
    # Whole epochs: each epoch draws its negatives anew, so a fraction would cut one short.
    refit = float(math.ceil(statistics.median(best))) if best else float(recipe.train.epochs)
    horizon = float(statistics.median(f["horizon_epochs"] for f in folds))
    report = {
        "folds": k,
        "documents": len(records),
        "out_of_fold_clauses": {lb: sum(f["clauses"][lb] for f in folds) for lb in labels},
        "refit_epochs": refit,
        "refit_horizon": horizon,
        "per_fold": folds,
        "seconds": round(sum(f["training_seconds"] + f["scoring_seconds"] for f in folds), 1),
    }
    return OutOfFold(segments, encoder, refit, report, horizon)
