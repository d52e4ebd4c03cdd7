"""What a segment run will cost on this machine, before it runs (`toolkit run --dry-run`): each stage's unit costs
timed for a few steps, in the precision the run will use, and the run's wall time estimated from them.

Timed here:
- one optimizer step of the encoder on the recipe's batches, on inputs it meets for the first time and on the same
  inputs again (what cached frozen layers make cheaper);
- scoring one input, as evaluation and scoring read it;
- the linear model, fitted once on a few training documents and scaled to every document and its folds.

The number of epochs a run trains is not known beforehand where it stops at its plateau
(train.early_stopping_patience), so the estimate is a range: `low` if every encoder stopped as soon as its
patience allows (its best epoch the first), `high` if every one ran to the epoch cap; and a point, `expected`,
where each encoder stops where the clause runs recorded before it stopped (`expected_stop`). The same unit costs
size a smaller plan when the recipe sets a budget (`plan_to_budget`).
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.tasks.segments.cross_fit import FOLDS_DIR
from toolkit.tasks.segments.evidence import choose_strategy
from toolkit.tasks.segments.linear_model import fit_classifier, segment_documents
from toolkit.tasks.segments.prepared import SegmentPrepared
from toolkit.tasks.segments.trainer import examples_per_epoch, planned_epochs

TIMED_STEPS = 6  # optimizer steps timed after one untimed (the first pays for allocation and kernel choice)
TIMED_INPUTS = 32  # inputs scored to time scoring
SCORING_REPEATS = 3  # scoring is timed this many times and the median kept: one timing of 32 inputs swung 60%
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
        timings = []
        for _ in range(SCORING_REPEATS):
            started = time.perf_counter()
            trainer.predict(sample)
            timings.append((time.perf_counter() - started) / len(sample))
        per_input = statistics.median(timings)
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


# The epoch at which a clause encoder stops at its plateau, E(d) = STOP_SCALE * d ** -STOP_EXPONENT for d training
# documents per encoder: fewer epochs the more documents an epoch holds. Fitted (issue 75) before any run it is
# judged on, through the mean stop of each of two groups of records at the recipe's cap of 20, patience 3 and
# learning rate 1e-4, on sets other than the two the estimate target names: confirm_ip_35_cross_fitted's three
# folds (about 19 documents each) and cuad4_default / cuad4_all_layers and confirm_liability_408_cross_fitted (a
# held-out quarter, about 250-300 documents). A prior, not a measurement of this data: `low` and `high` bound it.
STOP_SCALE, STOP_EXPONENT = 34.9, 0.305


def expected_stop(documents: float) -> float:
    """The epoch an encoder trained on `documents` is expected to stop at (before the cap and the patience)."""
    return STOP_SCALE * max(1.0, documents) ** -STOP_EXPONENT


def epoch_range(recipe: SegmentClassificationRecipe, cap: float, documents: float) -> tuple[float, float, float]:
    """(fewest, expected, most) epochs an encoder stopping at its plateau trains on `documents`: patience + 1
    evaluations, `expected_stop` between those two, or the cap. Without a patience every one runs to the cap."""
    patience = recipe.train.early_stopping_patience
    if not patience:
        return cap, cap, cap
    low = min(cap, float(patience + 1))
    return low, min(cap, max(low, round(expected_stop(documents)))), cap


@dataclass(frozen=True)
class Sizes:
    """What the estimate scales with, per training document: optimizer steps an epoch, inputs scored, inputs and
    positive inputs evaluated after each epoch; and dev's inputs. Read once from the prepared run, so that
    another plan (fewer epochs, another strategy) is sized without preparing it."""

    documents: int
    steps_per_document: float
    inputs_per_document: float
    evaluated_per_document: float
    positives_per_document: float
    dev_inputs: int


def sizes_of(recipe: SegmentClassificationRecipe, p: SegmentPrepared, documents: int) -> Sizes:
    trained = max(1, len(p.train_records))
    evaluated = max(1, len(p.evaluation.records))
    windows = p.evaluation.windows
    return Sizes(
        documents,
        examples_per_epoch(recipe, p.train) / recipe.train.batch_size / trained,
        len(p.train.windows) / trained,
        len(windows.windows) / evaluated,
        sum(any(rows[0]) for rows in windows.segment_labels) / evaluated,
        len(p.dev.windows),
    )


def estimate(
    recipe: SegmentClassificationRecipe, sizes: Sizes, units: dict[str, float], linear_seconds: float | None
) -> dict:
    """The run's stages and their seconds (low, high) under `recipe`'s plan, from the unit costs: see the module's
    docstring."""
    s, score = recipe.segments, units["scoring_seconds_per_input"]
    strategy = choose_strategy(recipe, sizes.documents)
    steps = sizes.steps_per_document * sizes.documents  # an epoch over every training document
    cap = planned_epochs(recipe, round(steps * recipe.train.batch_size))
    patience = recipe.train.early_stopping_patience or 0

    def evaluated(documents: float) -> float:  # inputs evaluated after each epoch (negatives capped)
        every = documents * sizes.evaluated_per_document
        if s.evaluation_negatives is None:
            return every
        return min(every, documents * sizes.positives_per_document + s.evaluation_negatives)

    def training(epochs: float, documents: float, evaluated_documents: float) -> float:
        first = min(1.0, epochs)  # later epochs meet inputs already seen (cheaper with cached frozen layers)
        step_cost = first * units["step_seconds"] + (epochs - first) * units["step_seconds_seen_inputs"]
        return sizes.steps_per_document * documents * step_cost + epochs * evaluated(evaluated_documents) * score

    n = sizes.documents
    points = ("low", "expected", "high")
    stages: dict[str, tuple[float, ...]] = {}
    if linear_seconds is not None:
        stages["linear_prior"] = (linear_seconds,) * 3
    if strategy.name == "cross_fitted":
        k = min(s.encoder_folds, n)
        trained, stopped = (k - 1) / k * n * (1 - s.stopping_share), (k - 1) / k * n * s.stopping_share
        epochs = epoch_range(recipe, cap, trained)
        for f in range(k):
            stages[f"fold_{f}"] = tuple(
                training(e, trained, stopped) + n / k * sizes.inputs_per_document * score for e in epochs
            )
        # The refit trains for the folds' best epoch: the stop less the patience, one epoch at least.
        refit = (1.0, max(1.0, epochs[1] - patience) if patience else cap, cap)
        stages["refit"] = tuple(training(e, n, 0) for e in refit)
    else:
        held, stopped = len(strategy.held), len(strategy.stopping)
        # Evaluated on dev when the strategy stops on no training document.
        on = stopped if strategy.evaluates_held_out(recipe) else sizes.dev_inputs / max(sizes.evaluated_per_document, 1)
        trained = n - held - stopped
        epochs = epoch_range(recipe, cap, trained)
        stages["training"] = tuple(training(e, trained, on) for e in epochs)
        if strategy.scored:
            stages["scoring_held_out"] = (len(strategy.scored) * sizes.inputs_per_document * score,) * 3
    stages["dev_scoring"] = (sizes.dev_inputs * score,) * 3
    total = [sum(v[i] for v in stages.values()) for i in range(3)]
    return {
        "seconds": {p: round(t, 1) for p, t in zip(points, total)},
        "stages": {name: {p: round(t, 1) for p, t in zip(points, v)} for name, v in stages.items()},
        "epochs": {**dict(zip(points, epochs)), "steps_per_epoch": round(steps)},
        "evidence_strategy": strategy.name,
        "timed": {k: round(v, 4) for k, v in units.items()},
        "low_and_high": "low: every encoder stops as soon as its patience allows; high: every one runs to the epoch "
        "cap; expected: each stops where the clause runs recorded before stopped for its number of training "
        "documents (a prior); each epoch's evaluation is counted at the timed scoring rate, but setup, checkpoint "
        "saving and the evaluation's metrics are not",
    }


# The plan aims at this share of the budget: its figures come from a few timed steps.
BUDGET_SHARE = 0.9


def plan_to_budget(
    recipe: SegmentClassificationRecipe,
    sizes: Sizes,
    units: dict[str, float],
    linear_seconds: float | None,
    spent: float,
) -> tuple[SegmentClassificationRecipe, dict]:
    """The recipe whose estimate (its high end: every encoder at its epoch cap) fits the budget after `spent`
    seconds, and what it gave up: first the epoch cap lowered (no lower than the patience needs to stop once), then
    cross-fitting replaced by a held-out share, then the cap lowered to one epoch. When not one epoch of one encoder
    fits, the linear baseline alone (`linear_only`), or ToolkitError without a linear prior."""
    from toolkit.errors import ToolkitError

    assert recipe.budget is not None
    available = recipe.budget.seconds * BUDGET_SHARE - spent
    first = estimate(recipe, sizes, units, linear_seconds)
    report = {"seconds": recipe.budget.seconds, "estimate_as_written": first["seconds"], "gave_up": []}
    if first["seconds"]["high"] <= available:
        return recipe, {**report, "plan": "as written"}

    def with_epochs(r: SegmentClassificationRecipe, epochs: int) -> SegmentClassificationRecipe:
        train = r.train.model_copy(update={"epochs": epochs})
        return r.model_copy(update={"train": train, "segments": r.segments.model_copy(update={"min_steps": None})})

    def largest_fitting(r: SegmentClassificationRecipe, floor: int) -> SegmentClassificationRecipe | None:
        cap = int(first["epochs"]["high"])
        for epochs in range(cap, floor - 1, -1):
            candidate = with_epochs(r, epochs)
            if estimate(candidate, sizes, units, linear_seconds)["seconds"]["high"] <= available:
                return candidate
        return None

    patience = recipe.train.early_stopping_patience or 0
    held_out = recipe.model_copy(update={"segments": recipe.segments.model_copy(update={"thresholds": "held_out"})})
    tries = [(recipe, patience + 1, "the epoch cap")]
    if choose_strategy(recipe, sizes.documents).name == "cross_fitted":
        tries += [(held_out, patience + 1, "cross-fitting (a held-out share instead) and the epoch cap")]
        tries += [(held_out, 1, "cross-fitting and the epoch cap, below what the patience needs to stop early")]
    else:
        tries += [(recipe, 1, "the epoch cap, below what the patience needs to stop early")]
    for base, floor, what in tries:
        chosen = largest_fitting(base, max(1, floor))
        if chosen is not None:
            after = estimate(chosen, sizes, units, linear_seconds)
            given = f"{what}: {first['epochs']['high']:g} -> {chosen.train.epochs} epochs"
            if chosen.segments.thresholds != recipe.segments.thresholds:
                given += f", segments.thresholds {recipe.segments.thresholds} -> {chosen.segments.thresholds}"
            why = f"the plan as written: up to {first['seconds']['high']} s; the budget leaves {available:.0f} s"
            return chosen, {**report, "plan": after["seconds"], "gave_up": [f"{given} ({why})"]}
    smallest = estimate(with_epochs(held_out, 1), sizes, units, linear_seconds)["seconds"]["high"]
    why = (
        f"not one epoch of one encoder fits (estimated at {smallest} s on this machine, {spent:.0f} s spent preparing)"
    )
    if recipe.segments.linear_prior:  # the linear model the encoder would have been weighed against
        gave_up = f"the encoder: {why}; the run is the linear baseline (toolkit run --linear-baseline)"
        return recipe, {**report, "plan": "linear baseline", "gave_up": [gave_up], "linear_only": True}
    raise ToolkitError(
        f"budget.seconds={recipe.budget.seconds:g}: {why}",
        fix="raise budget.seconds, or fit the linear model alone (toolkit run --linear-baseline)",
    )


def time_units(
    recipe: SegmentClassificationRecipe, p: SegmentPrepared, documents: int, make_trainer: Callable[[Path], object]
) -> tuple[dict[str, float], float | None]:
    """The encoder's unit costs (`time_encoder`) and the linear model's seconds (None without a linear prior)."""
    with tempfile.TemporaryDirectory() as tmp:
        units = time_encoder(make_trainer(Path(tmp)))
    return units, time_linear(recipe, p, documents) if recipe.segments.linear_prior else None


def cost_estimate(
    recipe: SegmentClassificationRecipe, sizes: Sizes, units: dict[str, float], linear: float | None, seconds: float
) -> dict:
    """--dry-run's estimate of the run's wall time on this CPU, with the precision and the CPU it holds for, and the
    `seconds` the timing took."""
    from toolkit.hardware import describe
    from toolkit.tasks.training import precision_flags

    flags = precision_flags(recipe.train.precision)
    machine = describe()
    return {
        **estimate(recipe, sizes, units, linear),
        "precision": "bf16" if flags.get("bf16") else "fp16" if flags.get("fp16") else "fp32",
        "cpu": machine.get("cpu"),
        "cpu_flags": [f for f in machine.get("cpu_flags", []) if f.startswith(("avx", "amx"))],
        "timing_seconds": round(seconds, 1),
    }


Timeable = Callable[[SegmentClassificationRecipe], tuple[SegmentPrepared, Callable[[Path], object]]]


def timed(recipe: SegmentClassificationRecipe, p: SegmentPrepared, make_trainer: Callable[[Path], object]) -> tuple:
    """(unit costs, linear seconds, sizes) of the prepared run."""
    documents = len(p.train_records) + len(set(p.strategy.held) | set(p.strategy.stopping))
    units, linear = time_units(recipe, p, documents, make_trainer)
    return units, linear, sizes_of(recipe, p, documents)


def dry_run_cost(
    recipe: SegmentClassificationRecipe, p: SegmentPrepared, make_trainer: Callable[[Path], object], started: float
) -> dict:
    """What --dry-run adds to the plan: the cost estimate, and with budget.seconds the smaller plan the run would take
    (`started`: time.monotonic() when planning began; the run prepares once more, so preparing counts twice)."""
    timing = time.monotonic()
    units, linear, sizes = timed(recipe, p, make_trainer)
    out = {"cost_estimate": cost_estimate(recipe, sizes, units, linear, time.monotonic() - timing)}
    if recipe.budget is not None:
        chosen, report = plan_to_budget(recipe, sizes, units, linear, 2 * (time.monotonic() - started))
        out["budget_plan"] = {**report, "epochs": chosen.train.epochs, "thresholds": chosen.segments.thresholds}
    return out


def fit_to_budget(recipe: SegmentClassificationRecipe, prepare: Timeable) -> tuple[SegmentClassificationRecipe, dict]:
    """The recipe sized to budget.seconds from a few timed steps (`prepare(recipe)`: the prepared run and how to build
    its Trainer), and the budget's report: what it gave up, the seconds reserved after training (scoring), and the
    training `deadline` (time.monotonic()), at which training stops whatever the estimate said."""
    assert recipe.budget is not None
    started = time.monotonic()
    p, make_trainer = prepare(recipe)
    preparing = time.monotonic() - started  # the run prepares again
    units, linear, sizes = timed(recipe, p, make_trainer)
    spent = time.monotonic() - started + preparing
    chosen, report = plan_to_budget(recipe, sizes, units, linear, spent)
    if report.get("linear_only"):
        return chosen, {**report, "spent_before_training": round(spent, 1), "deadline": None}
    stages = estimate(chosen, sizes, units, linear)["stages"]
    reserved = {k: stages[k]["high"] for k in ("dev_scoring", "scoring_held_out") if k in stages}
    deadline = started + recipe.budget.seconds * BUDGET_SHARE - sum(reserved.values())
    report |= {"reserved_seconds": reserved, "spent_before_training": round(spent, 1), "stopped_at_deadline": []}
    return chosen, {**report, "deadline": deadline}


def announce_stage(run_dir: Path, refit: bool, deadline: float | None) -> None:
    """One line on stderr as a training stage starts: which (a fold, the refit, the training) and, under
    budget.seconds, the training time the budget has left."""
    stage = run_dir.name if run_dir.parent.name == FOLDS_DIR else "refit" if refit else "training"
    left = (
        ""
        if deadline is None
        else f"; {max(0.0, deadline - time.monotonic()) / 60:.1f} min of the budget's training time left"
    )
    sys.stderr.write(f"segments: {stage}{left}\n")
