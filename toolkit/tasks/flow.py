"""The one training skeleton every task follows: prepare -> plan -> train -> save -> evaluate.

A task (`token_classification.py`, `span_generation.py`, `pretrain.py`) is a `Flow`: it says how
to prepare its data and model, how to build its Trainer, how to save the model and how to score
it. `run_flow` does the rest the same way for all of them: seeds, the run directory, resuming
from checkpoints, the training log, and the run information every task reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.evaluate.reporting import score_table, write_metrics
from toolkit.registry import RecipeBase
from toolkit.rundir import MODEL_DIR, start_run_dir, write_train_log
from toolkit.tasks.training import is_main_process, peak_cuda_mib, peak_rss_mib, train_resuming, world_size


@dataclass
class Prepared:
    """Everything built before training; `plan` is what --dry-run prints and data_report.json holds."""

    model: Any
    tokenizer: Any
    plan: dict
    train_tokens: int  # tokens in one epoch of training data, for tokens/s


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

    clock = None  # the run's TrainingClock (curves.py), set by `instrument`

    def prepare(self, recipe: RecipeBase) -> Prepared:
        raise NotImplementedError

    def trainer(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared):
        """A transformers Trainer (checkpoints in run_dir/checkpoints)."""
        raise NotImplementedError

    def predictor(self, recipe: RecipeBase, prepared: Prepared, model):
        """The task's predictor (Tagger, SegmentClassifier, SpanGenerator) over a model in training, for the
        learning curve (eval.curve_docs)."""
        raise NotImplementedError(f"{type(self).__name__} has no predictor")

    def curve_predictions(self, recipe: RecipeBase, prepared: Prepared, model, records) -> tuple[list, list[list[str]], float]:
        """(predictions, unlocated labels per document, seconds) of the model in training on `records`."""
        from toolkit.infer import predict_with_report

        predictions, unlocated, report = predict_with_report(self.predictor(recipe, prepared, model), [r.text for r in records])
        return predictions, unlocated, report["seconds"]

    def instrument(self, trainer, recipe: RecipeBase, run_dir: Path, prepared: Prepared, stage: str | None = None) -> None:
        """The training clock (and budget, train.max_seconds) and the learning curve (eval.curve_docs) on a
        Trainer; a later training stage shares the first stage's clock."""
        from toolkit.rundir import CURVE_FILE
        from toolkit.tasks.curves import CurveCallback, TrainingClock

        if getattr(self, "clock", None) is None:
            self.clock = TrainingClock(recipe.train.max_seconds)
        trainer.add_callback(self.clock)
        if recipe.curve_documents():
            records = prepared.dev_records[: recipe.curve_documents()]  # type: ignore[attr-defined]
            predict = lambda model: self.curve_predictions(recipe, prepared, model, records)  # noqa: E731
            trainer.add_callback(CurveCallback(self.clock, predict, records, recipe, run_dir / CURVE_FILE, stage))

    def before_training(self, trainer, prepared: Prepared) -> None:
        """Runs on every process before training (collective work, e.g. a held-out score)."""

    def after_training(self, trainer, prepared: Prepared) -> None:
        """Runs on every process after training, before rank 0 saves and scores."""

    def train(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared):
        """(trainer, TrainingSpan): build the Trainer and train it, resuming from its checkpoints. A task
        that trains in stages (segment_classification's hard negatives) extends this."""
        trainer = self.trainer(recipe, run_dir, prepared)
        self.instrument(trainer, recipe, run_dir, prepared)
        self.before_training(trainer, prepared)
        span = train_resuming(trainer, prepared.train_tokens)
        self.after_training(trainer, prepared)
        return trainer, span

    def save(self, recipe: RecipeBase, prepared: Prepared, model, directory: Path) -> None:
        raise NotImplementedError

    def evaluate(self, recipe: RecipeBase, run_dir: Path, prepared: Prepared, trainer) -> tuple[dict, dict]:
        """(metrics, task-specific run information), scoring what `save` wrote; rank 0 only."""
        raise NotImplementedError

    def write(self, recipe: RecipeBase, result: RunResult) -> None:
        """metrics.json and report.md."""
        metrics = {k: v for k, v in result.metrics.items() if k != "run"}
        write_metrics(result.run_dir, metrics, f"{recipe.name}: dev", result.run)

    def run(self, recipe: RecipeBase, run_dir: Path) -> RunResult | None:
        """Train, save and score one run (None on processes other than rank 0)."""
        return run_flow(self, recipe, run_dir)

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
    flow.clock = None  # a fresh clock per run (a sweep may reuse the flow)
    prepared = flow.prepare(recipe)
    if is_main_process():
        start_run_dir(recipe, run_dir, prepared.plan)
    trainer, span = flow.train(recipe, run_dir, prepared)
    if not trainer.is_world_process_zero():
        return None

    flow.save(recipe, prepared, trainer.model, run_dir / MODEL_DIR)
    write_train_log(run_dir, span.log)
    metrics, extra = flow.evaluate(recipe, run_dir, prepared, trainer)
    run = {
        "model": recipe.model.name,
        "train_seconds": round(span.seconds, 1),
        # Seconds of training steps alone (no evaluations, no curve): what train.max_seconds budgets.
        "train_step_seconds": round(flow.clock.seconds, 1),
        "stopped_by_time_budget": flow.clock.stopped_by_budget,
        "epochs_completed": round(span.epochs_completed, 2),
        "epochs_trained_this_process": round(span.epochs_trained, 4),
        "optimizer_steps": span.optimizer_steps,
        # Tokens this process trained on (after a resume, the resumed part only) over its own seconds.
        "train_tokens_per_second": round(span.tokens / span.seconds, 1) if span.seconds else None,
        # The same without the dev evaluations run during training: the cost of the training steps alone.
        "evaluation_seconds_during_training": round(span.evaluation_seconds, 3),
        "train_step_tokens_per_second": (round(span.tokens / (span.seconds - span.evaluation_seconds), 1) if span.seconds > span.evaluation_seconds else None),
        "peak_rss_mib": peak_rss_mib(),
        "peak_cuda_mib": peak_cuda_mib(),
        "world_size": world_size(),
        "resumed_from_checkpoint": span.resumed_from,
        **extra,
    }
    result = RunResult(run_dir, {**metrics, "run": run})
    flow.write(recipe, result)
    return result
