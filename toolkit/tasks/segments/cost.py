"""What a segment run will cost on this machine, before it runs (`toolkit run --dry-run`): each stage's unit costs
timed for a few steps, in the precision the run will use, and the run's wall time estimated from them.

Timed here:
- one optimizer step of the encoder on the recipe's batches, on inputs it meets for the first time and on the same
  inputs again (what cached frozen layers make cheaper);
- scoring one input, as evaluation and scoring read it;
- the linear model, fitted once on a few training documents and scaled to every document and its folds.

The number of epochs a run trains is not known beforehand where it stops at its plateau
(train.early_stopping_patience), so the estimate is a range: `low` if every encoder stopped as soon as its
patience allows (its best epoch the first), `high` if every one ran to the epoch cap. The same unit costs size
a smaller plan for a budget (a later step); here they are reported.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.tasks.segments.linear_model import fit_classifier, segment_documents
from toolkit.tasks.segments.prepared import SegmentPrepared
from toolkit.tasks.segments.trainer import examples_per_epoch, planned_epochs

TIMED_STEPS = 3  # optimizer steps timed after one untimed (the first pays for allocation and kernel choice)
TIMED_INPUTS = 32  # inputs scored to time scoring
LINEAR_SAMPLE_DOCUMENTS = 8  # training documents the linear model is timed on


def time_encoder(trainer) -> dict[str, float]:
    """Seconds of one optimizer step on fresh inputs and on inputs seen once, and of scoring one input, with the
    run's Trainer (its precision, collator, sampler and frozen-layer cache). The model's weights change: the
    caller discards it."""
    loader = trainer.get_train_dataloader()
    batches = list(itertools.islice(iter(loader), TIMED_STEPS + 1))
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1  # what the Trainer's loop sets before its steps
    model = trainer.model
    model.train()

    def step(batch) -> None:
        trainer.training_step(model, batch)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()

    step(batches[0])
    timed = batches[1:] or batches
    started = time.perf_counter()
    for batch in timed:
        step(batch)
    fresh = (time.perf_counter() - started) / len(timed)
    started = time.perf_counter()
    for batch in timed:
        step(batch)
    seen = (time.perf_counter() - started) / len(timed)
    dataset = trainer.eval_dataset or trainer.train_dataset
    sample = dataset.select(range(min(TIMED_INPUTS, len(dataset))))
    compute_metrics, trainer.compute_metrics = trainer.compute_metrics, None
    try:
        trainer.predict(sample)  # untimed: the first call builds the loader and warms the kernels
        started = time.perf_counter()
        trainer.predict(sample)
        per_input = (time.perf_counter() - started) / len(sample)
    finally:
        trainer.compute_metrics = compute_metrics
    return {"step_seconds": fresh, "step_seconds_seen_inputs": seen, "scoring_seconds_per_input": per_input}


def time_linear(recipe: SegmentClassificationRecipe, p: SegmentPrepared, documents: int) -> float:
    """Seconds the linear model takes, fitted once on a few training documents and scaled: its folds fit
    (folds - 1) times every document between them, and the full fit once more."""
    from toolkit.rundir import model_meta

    records = p.train_records[:LINEAR_SAMPLE_DOCUMENTS]
    started = time.perf_counter()
    sample = segment_documents(records, p.labels, recipe.segments.min_overlap)
    fit_classifier(sample, model_meta(task=recipe.task, labels=p.labels, multi_label=True), recipe.seed)
    seconds = time.perf_counter() - started
    folds = min(recipe.segments.folds, documents)
    return seconds / max(1, len(records)) * documents * folds


def epoch_range(recipe: SegmentClassificationRecipe, cap: float) -> tuple[float, float]:
    """(fewest, most) epochs an encoder stopping at its plateau trains: patience + 1 evaluations, or the cap."""
    patience = recipe.train.early_stopping_patience
    return (min(cap, float(patience + 1)) if patience else cap), cap


def estimate(
    recipe: SegmentClassificationRecipe,
    p: SegmentPrepared,
    documents: int,
    units: dict[str, float],
    linear_seconds: float | None,
) -> dict:
    """The run's stages and their seconds (low, high) from the unit costs; see the module's docstring."""
    per_epoch = examples_per_epoch(recipe, p.train)
    steps = -(-per_epoch // recipe.train.batch_size)
    cap = planned_epochs(recipe, per_epoch)
    low_epochs, high_epochs = epoch_range(recipe, cap)
    score = units["scoring_seconds_per_input"]
    evaluated = len(p.evaluation.windows.windows)
    if recipe.segments.evaluation_negatives is not None:
        positives = sum(any(rows[0]) for rows in p.evaluation.windows.segment_labels)
        evaluated = min(evaluated, positives + recipe.segments.evaluation_negatives)

    def training(epochs: float, share: float, evaluated_inputs: float) -> float:
        first = min(1.0, epochs)  # later epochs meet inputs already seen (cheaper with cached frozen layers)
        step_cost = first * units["step_seconds"] + (epochs - first) * units["step_seconds_seen_inputs"]
        return steps * share * step_cost + epochs * evaluated_inputs * score

    stages: dict[str, tuple[float, float]] = {}
    if linear_seconds is not None:
        stages["linear_prior"] = (linear_seconds, linear_seconds)
    folds = p.plan.get("cross_fitted", {}).get("folds")
    if folds:
        share = (folds - 1) / folds * (1 - recipe.segments.stopping_share)
        stopping_inputs = evaluated * (folds - 1) / folds * recipe.segments.stopping_share
        scored = len(p.train.windows) / folds
        for f in range(folds):
            stages[f"fold_{f}"] = tuple(  # type: ignore[assignment]
                training(e, share, stopping_inputs) + scored * score for e in (low_epochs, high_epochs)
            )
        stages["refit"] = (training(1.0, 1.0, 0), training(cap, 1.0, 0))
    else:
        stages["training"] = (training(low_epochs, 1.0, evaluated), training(high_epochs, 1.0, evaluated))
        if p.strategy.scored:
            held = len(p.threshold_records) / max(1, len(p.train_records)) * len(p.train.windows)
            stages["scoring_held_out"] = (held * score, held * score)
    dev = len(p.dev.windows) * score
    stages["dev_scoring"] = (dev, dev)
    total = [sum(v[i] for v in stages.values()) for i in (0, 1)]
    return {
        "seconds": {"low": round(total[0]), "high": round(total[1])},
        "stages": {name: {"low": round(a, 1), "high": round(b, 1)} for name, (a, b) in stages.items()},
        "epochs": {"low": low_epochs, "high": high_epochs, "steps_per_epoch": steps},
        "timed": {k: round(v, 4) for k, v in units.items()},
        "low_and_high": "low: every encoder stops as soon as its patience allows; high: every one runs to the epoch "
        "cap; setup, saving and the curve's evaluations are not included",
    }


def cost_estimate(
    recipe: SegmentClassificationRecipe,
    p: SegmentPrepared,
    documents: int,
    make_trainer: Callable[[Path], object],
) -> dict:
    """--dry-run's estimate of the run's wall time on this CPU (`make_trainer(directory)`: the run's Trainer)."""
    from toolkit.hardware import describe
    from toolkit.tasks.training import precision_flags

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        units = time_encoder(make_trainer(Path(tmp)))
    linear = time_linear(recipe, p, documents) if recipe.segments.linear_prior else None
    flags = precision_flags(recipe.train.precision)
    report = estimate(recipe, p, documents, units, linear)
    machine = describe()
    return {
        **report,
        "precision": "bf16" if flags.get("bf16") else "fp16" if flags.get("fp16") else "fp32",
        "cpu": machine.get("cpu"),
        "cpu_flags": [f for f in machine.get("cpu_flags", []) if f.startswith(("avx", "amx"))],
        "timing_seconds": round(time.perf_counter() - started, 1),
    }
