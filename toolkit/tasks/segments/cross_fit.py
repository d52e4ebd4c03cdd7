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
    recipe: SegmentClassificationRecipe,
    run_dir: Path,
    p: SegmentPrepared,
    fit: FitEncoder,
    scorer_of: ScorerOf,
    deadline: float | None = None,
) -> OutOfFold:
    """Train one encoder per fold of the training documents (`p.threshold_records`: every one, in the order
    `p.train` was built from) and score the documents it left out. Under budget.seconds (`deadline`,
    time.monotonic()), a fold that would not finish in time is not started, and one the deadline stops is not
    scored: the documents of the finished folds are the evidence and the last finished fold's encoder is served
    without a refit, or, where none finished, the linear model alone decides (`OutOfFold.scored`, `.served`)."""
    s, records = recipe.segments, p.threshold_records
    k = min(s.encoder_folds, len(records))
    fold = assign_folds(len(records), k, recipe.seed)
    segments: list = [None] * len(records)
    encoder: list = [None] * len(records)
    folds: list[dict] = []
    served, cut = None, None
    for f in range(k):
        if deadline is not None and folds and time.monotonic() + folds[-1]["training_seconds"] > deadline:
            cut = f"fold {f} would not finish before the budget's deadline (fold {f - 1} trained for "
            cut += f"{folds[-1]['training_seconds']:.0f} s; {max(0.0, deadline - time.monotonic()):.0f} s left)"
            break
        held = [i for i in range(len(records)) if fold[i] == f]
        started = time.perf_counter()
        trained, part, sizes = _train_fold(recipe, run_dir / FOLDS_DIR / f"fold_{f}", p, fit, f, fold, held)
        training_seconds = time.perf_counter() - started
        if deadline is not None and time.monotonic() >= deadline:
            cut = f"fold {f} was stopped at the budget's deadline after {training_seconds:.0f} s of training"
            served = served or trained  # where no fold finished: served, weighted 0 (the linear model decides)
            break
        scorer = scorer_of(part, trained.trainer.model)
        fold_segments, logits = scorer.score_encoder([records[i].text for i in held], recipe.train.eval_batch_size)
        for i, segs, x in zip(held, fold_segments, logits):
            segments[i], encoder[i] = segs, x
        shutil.rmtree(run_dir / FOLDS_DIR / f"fold_{f}" / "checkpoints", ignore_errors=True)  # scored: not needed
        folds.append(_fold_report(recipe, p, trained, part, sizes, training_seconds, started))
        # Under a budget the last finished fold's encoder is kept, to serve if a later fold is cut short.
        served = trained if deadline is not None else None
        del trained, part, scorer  # one fold's model in memory at a time (two under a budget)
        gc.collect()
    best = [f["best_epoch"] for f in folds if f["best_epoch"]]
    # Whole epochs: each epoch draws its negatives anew, so a fraction would cut one short.
    refit = float(math.ceil(statistics.median(best))) if best else float(recipe.train.epochs)
    horizon = float(statistics.median(f["horizon_epochs"] for f in folds)) if folds else None
    report = {
        "folds": k,
        "documents": len(records),
        "out_of_fold_clauses": {lb: sum(f["clauses"][lb] for f in folds) for lb in p.labels},
        "refit_epochs": refit,
        "refit_horizon": horizon,
        "per_fold": folds,
        "seconds": round(sum(f["training_seconds"] + f["scoring_seconds"] for f in folds), 1),
    }
    needed = refit_seconds(folds, refit, len(records)) if cut is None and served is not None else 0.0
    if needed and time.monotonic() + needed > deadline:
        # Every fold finished, but a refit the deadline stops early would serve an encoder trained less than any fold.
        cut = f"the refit would not finish before the budget's deadline (about {needed:.0f} s for {refit:g} epochs "
        cut += f"on {len(records)} documents; {max(0.0, deadline - time.monotonic()):.0f} s left)"
    if cut is None:
        return OutOfFold(segments, encoder, refit, report, horizon)
    scored = [i for i in range(len(records)) if encoder[i] is not None]
    report["cut_short"] = {
        "why": cut,
        "finished_folds": len(folds),
        "scored_documents": len(scored),
        "fallback": (
            f"the {len(scored)} documents of {len(folds)} finished fold(s) are the evidence; the last finished "
            "fold's encoder is served, not refit"
            if folds
            else "no fold finished: the linear model alone decides (the encoder is served at weight 0)"
        ),
    }
    return OutOfFold(segments, encoder, refit, report, horizon, scored=scored, served=served)


def refit_seconds(folds: list[dict], epochs: float, documents: int) -> float:
    """The refit's training time, from the last finished fold's seconds per epoch and training document (its
    evaluations included, so on the safe side)."""
    last = folds[-1]
    return (
        last["training_seconds"] / max(last["epochs"], 1e-9) / max(last["trained_on_documents"], 1) * epochs * documents
    )


def _train_fold(recipe, fold_dir: Path, p: SegmentPrepared, fit: FitEncoder, f: int, fold: list[int], held: list[int]):
    """Fold f's encoder, trained on the other folds but a share it stops on, and the prepared part it trained on."""
    from transformers import set_seed

    s, records = recipe.segments, p.threshold_records
    trained_on, stopped_on = stopping_split(
        [i for i in range(len(records)) if fold[i] != f], s.stopping_share, recipe.seed + f
    )
    stopping_records = [records[i] for i in stopped_on]
    set_seed(recipe.seed)  # every fold's encoder starts as the served one does
    model, _ = build_segment_model(recipe.model, p.labels)
    inputs, _ = segment_input_features(
        p.tokenizer, stopping_records, p.labels, s.segment_tokens, s.context_tokens, s.min_overlap
    )
    training = set(trained_on)
    part = dataclasses.replace(
        p,
        model=model,
        train=p.train.subset([n for n, w in enumerate(p.train.windows) if w.doc in training]),
        evaluation=EvaluationSet(stopping_records, inputs, None, on_dev=False),
        threshold_records=[records[i] for i in held],
        threshold_priors=None,
    )
    # the fold's encoder alone: no refit, no later stages
    return fit(fold_dir, part), part, (len(trained_on), len(stopped_on))


def _fold_report(recipe, p: SegmentPrepared, trained, part, sizes, training_seconds: float, started: float) -> dict:
    trained_on, stopped_on = sizes
    return {
        "documents": len(part.threshold_records),
        "trained_on_documents": trained_on,
        "stopped_on_documents": stopped_on,
        "horizon_epochs": trained.trainer.args.num_train_epochs,
        "clauses": {lb: sum(sp.label == lb for r in part.threshold_records for sp in r.spans) for lb in p.labels},
        **encoder_training(recipe, trained),
        "training_seconds": round(training_seconds, 1),
        "scoring_seconds": round(time.perf_counter() - started - training_seconds, 1),
    }
