"""A run's training budget and its learning curve, the same way for every task.

- `TrainingClock` sums the seconds of training steps only (the Trainer's evaluations and the curve's own
  predictions are left out), so two runs can be given the same budget (`train.max_seconds`) and compared
  at equal training time. The clock is saved with each checkpoint, so a resumed run keeps its count.
  It can also ask for an evaluation every N seconds (`train.eval_every_seconds`) and drive the learning rate
  by the share of the budget spent (`train.schedule_by: seconds`): runs whose steps cost different times
  are then scored at the same budgets and each ends its budget with its schedule finished.
- `CurveCallback` (with `eval.curve_docs: N`): at every checkpoint, the model as it stands predicts the
  first N dev documents with the task's own predictor (the one `toolkit eval` and the service use) and
  the scores go to `curve.jsonl` with the training seconds, steps and inference seconds per document.
  `toolkit compare --curves` puts several runs' curves side by side.

These are transformers TrainerCallbacks: the Trainer owns the loop; the callbacks only watch and stop it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from toolkit.data.schema import SpanRecord
from toolkit.evaluate.plateau import doubling_points, is_doubling_epoch, plateau_reached
from toolkit.evaluate.scorer import score
from toolkit.registry.extraction import ExtractionRecipe
from toolkit.scoring_defaults import curve_keys

CLOCK_FILE = "toolkit_clock.json"


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


def budget_lr_factor(fraction: float, warmup_ratio: float) -> float:
    """Pure: the learning-rate multiplier after `fraction` of the time budget, linear warmup then linear decay
    to 0 (transformers' linear schedule, over seconds instead of steps)."""
    if fraction < warmup_ratio:
        return fraction / warmup_ratio
    return max(0.0, (1.0 - fraction) / (1.0 - warmup_ratio))


class TrainingClock(_callback_base()):
    """Seconds of training steps; stops training once they reach `max_seconds` (with a final checkpoint) and,
    with `eval_every_seconds`, asks for an evaluation and checkpoint each time the seconds pass a multiple."""

    def __init__(self, max_seconds: float | None = None, eval_every_seconds: float | None = None):
        self.max_seconds = max_seconds
        self.eval_every_seconds = eval_every_seconds
        self.seconds = 0.0
        self._step_started: float | None = None
        self.stopped_by_budget = False
        self.stopped_at_plateau = False  # set by PlateauStop
        self.evaluated_at: int | None = None  # the step of the last evaluation

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run: the Trainer has restored its step from the checkpoint; the clock restores its seconds.
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}" / CLOCK_FILE
        if state.global_step > 0 and self.seconds == 0.0 and saved.is_file():
            self.seconds = float(json.loads(saved.read_text(encoding="utf-8"))["train_seconds"])

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        before = self.seconds
        if self._step_started is not None:
            self.seconds += time.perf_counter() - self._step_started
            self._step_started = None
        every = self.eval_every_seconds
        if every is not None and int(self.seconds // every) > int(before // every):
            control.should_evaluate = True
            control.should_save = True
        if self.max_seconds is not None and self.seconds >= self.max_seconds and not control.should_training_stop:
            self.stopped_by_budget = True
            control.should_training_stop = True
            control.should_evaluate = True
            control.should_save = True

    def on_evaluate(self, args, state, control, **kwargs):
        self.evaluated_at = state.global_step

    def on_epoch_end(self, args, state, control, **kwargs):
        # Stopped by the budget mid-epoch: the step's evaluation above already scored and saved this step, and the
        # Trainer's end-of-epoch evaluation (eval_strategy=epoch) would log the same point a second time.
        if self.stopped_by_budget and self.evaluated_at == state.global_step:
            control.should_evaluate = False
            control.should_save = False

    def schedule_learning_rate(self, trainer, warmup_ratio: float) -> None:
        """Give `trainer` a learning rate that follows the share of `max_seconds` spent (train.schedule_by:
        seconds). transformers schedules by steps only, and a step's cost differs between models, so a budget
        given in seconds would otherwise stop mid-schedule."""
        from torch.optim.lr_scheduler import LambdaLR

        budget = self.max_seconds  # set: the recipe's validation requires max_seconds with schedule_by=seconds
        # The Trainer keeps an optimizer and scheduler that are already set (create_optimizer honours the
        # task's parameter groups).
        trainer.create_optimizer()
        trainer.lr_scheduler = LambdaLR(
            trainer.optimizer, lambda _step: budget_lr_factor(min(1.0, self.seconds / budget), warmup_ratio)
        )

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir() and state.is_world_process_zero:
            (folder / CLOCK_FILE).write_text(
                json.dumps({"train_seconds": round(self.seconds, 2), "step": state.global_step}), encoding="utf-8"
            )


class CurveCallback(_callback_base()):
    """At every evaluation (checkpoint), score the model on the curve documents and append a line to curve.jsonl."""

    def __init__(
        self,
        clock: TrainingClock,
        predict: Callable,
        records: list[SpanRecord],
        recipe: ExtractionRecipe,
        path: Path,
        stage: str | None = None,
    ):
        self.clock = clock
        self.predict = predict  # model -> (predictions, unlocated labels per document, predictor's report)
        self.records = records
        self.recipe = recipe
        self.path = path
        self.stage = stage
        self.points: list[dict] = []  # this process's points, in order (train.plateau reads them)

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero or model is None:
            return
        self.record(model, state)

    def record(self, model, state) -> dict:
        """Score `model` on the curve documents, append the point to curve.jsonl and return the scorer's summary."""
        was_training = model.training
        predictions, unlocated, report = self.predict(model)
        if was_training:
            model.train()  # the predictors put the model in eval mode
        e = self.recipe.eval
        texts, golds = [r.text for r in self.records], [r.spans for r in self.records]
        m = score(
            texts,
            golds,
            predictions,
            e.boundary_tolerance,
            e.jaccard_threshold,
            e.bootstrap,
            self.recipe.seed,
            unlocated,
        )
        keys = curve_keys(e.boundary_tolerance)
        point = {
            "step": state.global_step,
            "epoch": round(float(state.epoch or 0), 4),
            "train_seconds": round(self.clock.seconds, 2),
            **({"stage": self.stage} if self.stage else {}),
            "documents": len(texts),
            "gold_spans": m["counts"]["gold_spans"],
            "inference_seconds_per_document": round(report["seconds"] / max(1, len(texts)), 3),
            # The precision the inference seconds were measured at (None: fp32; eval.precision, generation.precision).
            "inference_autocast": report.get("autocast"),
            "metrics": {k: m["summary"][k] for k in keys if k in m["summary"]},
            "ci95": {k: m["ci95"][k] for k in keys if k in m.get("ci95", {})},
        }
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(point) + "\n")
        self.points.append(point)
        return m["summary"]


class DoublingEvaluation(_callback_base()):
    """train.eval_every=doubling: an evaluation and checkpoint after epochs 1, 2, 4, 8, ... and at the end of
    training, so a learning curve is read at doubling budgets in one run (with lr_schedule=constant, the model
    after N epochs is what an N-epoch run would give)."""

    def __init__(self, clock: TrainingClock):
        self.clock = clock

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.clock.evaluated_at == state.global_step:  # a time budget's stop scored this step already
            return
        last = state.max_steps > 0 and state.global_step >= state.max_steps
        if is_doubling_epoch(float(state.epoch or 0)) or last:
            control.should_evaluate = True
            control.should_save = True


def resumed_points(run_dir: Path, checkpoints: Path) -> list[dict]:
    """The curve points a resumed run already has: those up to its latest checkpoint (none on a fresh run), so the
    plateau rule reads the whole curve, not this process's points alone."""
    from toolkit.rundir import read_curve

    steps = [int(p.name.split("-")[-1]) for p in checkpoints.glob("checkpoint-*")] if checkpoints.is_dir() else []
    return [p for p in read_curve(run_dir) if steps and p["step"] <= max(steps)]


class PlateauStop(_callback_base()):
    """train.plateau: stop once the curve's last doubling added less than half its newer point's CI width
    (toolkit/evaluate/plateau.py). Runs after the curve's own on_evaluate, so it reads the newest point."""

    def __init__(self, curve: CurveCallback, clock: TrainingClock, metric: str, min_epochs: float):
        self.curve, self.clock, self.metric, self.min_epochs = curve, clock, metric, min_epochs

    def on_evaluate(self, args, state, control, **kwargs):
        # Doubling points only: the point a time budget scores between two doublings is not a doubling.
        if plateau_reached(doubling_points(self.curve.points), self.metric, self.min_epochs):
            self.clock.stopped_at_plateau = True
            control.should_training_stop = True


def evaluate_by_curve(trainer, curve: CurveCallback, selection_key: str):
    """A replacement for `trainer.evaluate` when the curve scores the whole dev set: the curve's point is the
    evaluation, and its `selection_key` stands for the Trainer's selection metric (metric_for_best_model).

    The Trainer's own evaluation would run the dev windows a second time through its loop to compute the
    same kind of score (for a decoder on CUAD, minutes per point); the curve scores them with the task's
    predictor, as the final scoring and the service do. Logging and callbacks (early stopping, best
    checkpoint) see the metrics as from `Trainer.evaluate`."""

    def evaluate(eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict:
        summary = curve.record(trainer.model, trainer.state)
        metric = trainer.args.metric_for_best_model.removeprefix(f"{metric_key_prefix}_")
        metrics = {
            **{f"{metric_key_prefix}_{k}": v for k, v in summary.items() if isinstance(v, int | float)},
            f"{metric_key_prefix}_{metric}": summary[selection_key],
        }
        trainer.log(metrics)
        trainer.control = trainer.callback_handler.on_evaluate(trainer.args, trainer.state, trainer.control, metrics)
        return metrics

    return evaluate
