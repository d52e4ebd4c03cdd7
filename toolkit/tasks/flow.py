"""The one training skeleton every task follows: prepare -> plan -> train -> save -> evaluate.

A task (`token_classification.py`, `span_generation.py`, `pretrain.py`) is a `Flow`: it says how
to prepare its data and model, how to build its Trainer, how to save the model and how to score
it. `run_flow` does the rest the same way for all of them: seeds, the run directory, resuming
from checkpoints, the training log, and the run information every task reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.evaluate.reporting import score_table, write_metrics
from toolkit.registry import RecipeBase
from toolkit.rundir import MODEL_DIR, code_commit, start_run_dir, write_train_log
from toolkit.tasks.training import is_main_process, peak_cuda_mib, peak_rss_mib, train_resuming, world_size


@dataclass
class Prepared:
    """Everything built before training; `plan` is what --dry-run prints and data_report.json holds."""

    model: Any
    tokenizer: Any
    plan: dict
    train_tokens: int  # tokens in one epoch of training data, for tokens/s


@dataclass(frozen=True)
class Trained:
    """What training leaves for saving and scoring: the Trainer (its model and state), the span of training
    it ran, the run's clock, and what the task noted on the way for the run record (checkpoints averaged,
    hard negatives mined, held-out scores before and after)."""

    trainer: Any
    span: Any  # training.TrainingSpan
    clock: Any  # learning_curve.TrainingClock
    notes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    """A finished run: its directory and what its metrics.json holds."""

    run_dir: Path
    metrics: dict

    @property
    def summary(self) -> dict:
        return self.metrics["summary"]

    @property
    def run(self) -> dict:
        return self.metrics["run"]


class Flow:
    """One task's steps. Subclasses implement prepare, trainer, save and evaluate."""

    # The curve score (a key of the scorer's summary) that stands for the Trainer's selection metric when the
    # curve scores every dev document: the Trainer's own dev evaluation is then skipped
    # (learning_curve.evaluate_by_curve).
    # None: the Trainer always evaluates (its metric has no curve counterpart, e.g. a dev loss).
    curve_selection_key: str | None = None

    def prepare(self, recipe: RecipeBase) -> Prepared:
        raise NotImplementedError

    def trainer(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared):
        """A transformers Trainer (checkpoints in run_dir/checkpoints)."""
        raise NotImplementedError

    def predictor(self, recipe: RecipeBase, prepared: Prepared, model):
        """The task's predictor (Tagger, SegmentClassifier, SpanGenerator) over a model in training, for the
        learning curve (eval.curve_docs)."""
        raise NotImplementedError(f"{type(self).__name__} has no predictor")

    def curve_predictions(
        self, recipe: RecipeBase, prepared: Prepared, model, records
    ) -> tuple[list, list[list[str]], dict]:
        """(predictions, unlocated labels per document, the predictor's report: seconds, autocast) of the model in
        training on `records`."""
        from toolkit.infer import predict_with_report

        return predict_with_report(self.predictor(recipe, prepared, model), [r.text for r in records])

    def instrument(
        self, trainer, recipe: RecipeBase, run_dir: Path, prepared: Prepared, clock, stage: str | None = None
    ) -> None:
        """The run's training clock (and budget, train.max_seconds) and the learning curve (eval.curve_docs)
        on a Trainer; a later training stage is given the first stage's clock."""
        from toolkit.rundir import CURVE_FILE
        from toolkit.tasks.learning_curve import CurveCallback, DoublingEvaluation, PlateauStop, evaluate_by_curve

        t = recipe.train
        trainer.add_callback(clock)
        if t.schedule_by == "seconds":
            clock.schedule_learning_rate(trainer, t.warmup_ratio)
        if t.eval_every == "doubling":
            trainer.add_callback(DoublingEvaluation(clock))
        if recipe.curve_documents():
            dev = prepared.dev_records  # type: ignore[attr-defined]
            records = dev[: recipe.curve_documents()]
            predict = lambda model: self.curve_predictions(recipe, prepared, model, records)  # noqa: E731
            curve = CurveCallback(clock, predict, records, recipe, run_dir / CURVE_FILE, stage)
            if self.curve_selects(recipe, prepared):
                trainer.evaluate = evaluate_by_curve(trainer, curve, self.curve_selection_key)
            elif t.plateau is not None:
                # The run keeps the model at its plateau (no best checkpoint is chosen), so the Trainer's own dev
                # pass would only cost time: the curve point is the evaluation.
                trainer.evaluate = evaluate_by_curve(trainer, curve, self.curve_selection_key or t.plateau.metric)
            else:
                trainer.add_callback(curve)
            if t.plateau is not None:
                self.resume_plateau(trainer, run_dir, curve, clock, t.plateau)
                trainer.add_callback(PlateauStop(curve, clock, t.plateau.metric, t.plateau.min_epochs))

    def resume_plateau(self, trainer, run_dir: Path, curve, clock, plateau) -> None:
        """A resumed run's curve starts with its earlier points; one resumed after the plateau rule held trains no
        further step (its latest checkpoint is the model at the plateau) and goes on to save and score it."""
        from toolkit.evaluate.plateau import doubling_points, plateau_reached
        from toolkit.tasks.learning_curve import resumed_points

        curve.points = resumed_points(run_dir, Path(trainer.args.output_dir))
        if curve.points and plateau_reached(doubling_points(curve.points), plateau.metric, plateau.min_epochs):
            trainer.args.max_steps = curve.points[-1]["step"]
            clock.stopped_at_plateau = True

    def curve_selects(self, recipe: RecipeBase, prepared: Prepared) -> bool:
        """Whether the curve's score replaces the Trainer's dev evaluation: the curve scores every dev document,
        the task names its counterpart of the selection metric, and one process trains (the Trainer's
        evaluation is collective across processes; the curve runs on rank 0 only)."""
        wanted = recipe.curve_documents()
        return (
            self.curve_selection_key is not None
            and wanted is not None
            and wanted >= len(prepared.dev_records)  # type: ignore[attr-defined]
            and world_size() == 1
        )

    def before_training(self, trainer, prepared: Prepared) -> dict:
        """Runs on every process before training (collective work, e.g. a held-out score); returns notes."""
        return {}

    def after_training(self, trainer, prepared: Prepared) -> dict:
        """Runs on every process after training, before rank 0 saves and scores; returns notes."""
        return {}

    def train(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared) -> Trained:
        """Build the Trainer and train it, resuming from its checkpoints. A task that trains in stages
        (the segment method's folds and hard negatives) or changes the weights after (checkpoint averaging)
        extends this, calling `train_stage` for each stage."""
        return self.train_stage(recipe, run_dir, prepared)

    def train_stage(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared, **trainer_options) -> Trained:
        """One Trainer (`trainer(recipe, run_dir, prepared, **trainer_options)`) on its own clock, instrumented,
        trained from its latest checkpoint in run_dir."""
        from toolkit.tasks.learning_curve import TrainingClock

        clock = TrainingClock(recipe.train.max_seconds, recipe.train.eval_every_seconds)
        trainer = self.trainer(recipe, run_dir, prepared, **trainer_options)
        self.instrument(trainer, recipe, run_dir, prepared, clock)
        notes = self.before_training(trainer, prepared)
        span = train_resuming(trainer, prepared.train_tokens)
        return Trained(trainer, span, clock, {**notes, **self.after_training(trainer, prepared)})

    def save(self, recipe: RecipeBase, prepared: Prepared, model, directory: Path) -> None:
        raise NotImplementedError

    def evaluate(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared, trained: Trained) -> tuple[dict, dict]:
        """(metrics, task-specific run information), scoring what `save` wrote; rank 0 only."""
        raise NotImplementedError

    def write(self, recipe: RecipeBase, result: RunResult) -> None:
        """metrics.json and report.md; the run record carries the commit the code ran at (kept where the record
        has one already: `toolkit choose-thresholds` keeps the training's)."""
        metrics = {k: v for k, v in result.metrics.items() if k != "run"}
        write_metrics(result.run_dir, metrics, f"{recipe.name}: dev", {**code_commit(), **result.run})

    def run(self, recipe: RecipeBase, run_dir: Path) -> RunResult | None:
        """Train, save and score one run (None on processes other than rank 0)."""
        return run_flow(self, recipe, run_dir)

    # Whether `plan(recipe, estimate_cost=True)` times a few steps and estimates the run's wall time.
    estimates_cost = False
    # Seconds the flow spent before run_flow sizing the run to a budget: part of the run's wall time.
    sizing_seconds = 0.0

    def plan(self, recipe: RecipeBase) -> dict:
        """--dry-run: the data and model prepared, nothing trained."""
        return plan_flow(self, recipe)

    def summary(self, recipe: RecipeBase, result: RunResult):
        """What `toolkit run` prints: the headline dev metrics with their CIs."""
        return score_table(f"{recipe.name} (run directory: {result.run_dir})", result.metrics)


def plan_flow(flow: Flow, recipe: RecipeBase) -> dict:
    """--dry-run: prepare and plan, train nothing."""
    from transformers import set_seed

    set_seed(recipe.seed)
    return flow.prepare(recipe).plan


def run_flow(flow: Flow, recipe: RecipeBase, run_dir: Path) -> RunResult | None:
    """Train, save and score one run. Returns the result on rank 0 (None on other ranks)."""
    from transformers import set_seed

    set_seed(recipe.seed)
    clock = [time.perf_counter()]
    # The code that runs is the checkout's as the run starts: HEAD may move while it trains.
    commit = code_commit()
    prepared = flow.prepare(recipe)
    if is_main_process():
        start_run_dir(recipe, run_dir, prepared.plan)
    clock.append(time.perf_counter())
    trained = flow.train(recipe, run_dir, prepared)
    if not trained.trainer.is_world_process_zero():
        return None

    clock.append(time.perf_counter())
    span = trained.span
    flow.save(recipe, prepared, trained.trainer.model, run_dir / MODEL_DIR)
    write_train_log(run_dir, span.log)
    metrics, extra = flow.evaluate(recipe, run_dir, prepared, trained)
    clock.append(time.perf_counter())
    run = {
        **commit,
        "model": recipe.model.name,
        # The whole run, every stage (train_seconds counts the served model's training alone).
        "wall_seconds": round(clock[-1] - clock[0] + flow.sizing_seconds, 1),
        "stage_seconds": {
            **({"budget_sizing": round(flow.sizing_seconds, 1)} if flow.sizing_seconds else {}),
            **{s: round(b - a, 1) for s, a, b in zip(("prepare", "train", "save_and_evaluate"), clock, clock[1:])},
        },
        "train_seconds": round(span.seconds, 1),
        # What the training ran in (train.precision resolved on this machine: prefer_bf16 is fp32 without bf16 units).
        "train_precision": "bf16" if trained.trainer.args.bf16 else "fp16" if trained.trainer.args.fp16 else "fp32",
        # Seconds of training steps alone (no evaluations, no curve): what train.max_seconds budgets.
        "train_step_seconds": round(trained.clock.seconds, 1),
        "stopped_by_time_budget": trained.clock.stopped_by_budget,
        # train.plateau: the learning curve's last doubling added less than half its CI width.
        "stopped_at_plateau": trained.clock.stopped_at_plateau,
        "epochs_completed": round(span.epochs_completed, 2),
        "epochs_trained_this_process": round(span.epochs_trained, 4),
        "optimizer_steps": span.optimizer_steps,
        # Tokens this process trained on (after a resume, the resumed part only) over its own seconds.
        "train_tokens_per_second": round(span.tokens / span.seconds, 1) if span.seconds else None,
        # The same without the dev evaluations run during training: the cost of the training steps alone.
        "evaluation_seconds_during_training": round(span.evaluation_seconds, 3),
        "train_step_tokens_per_second": (
            round(span.tokens / (span.seconds - span.evaluation_seconds), 1)
            if span.seconds > span.evaluation_seconds
            else None
        ),
        "peak_rss_mib": peak_rss_mib(),
        "peak_cuda_mib": peak_cuda_mib(),
        "world_size": world_size(),
        "resumed_from_checkpoint": span.resumed_from,
        # What scored dev during training and chose the best checkpoint: the learning curve (eval.curve_docs
        # covering the dev set) or the Trainer's evaluation.
        "dev_evaluation_during_training": "curve" if flow.curve_selects(recipe, prepared) else "trainer",
        **extra,
    }
    result = RunResult(run_dir, {**metrics, "run": run})
    flow.write(recipe, result)
    return result
