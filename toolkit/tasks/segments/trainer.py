"""The segment encoder's training parts: its Trainer (a segment's mean token logit under binary cross-entropy,
evaluated by macro AUPR and cross-fitted Jaccard on a fixed sample), collator and dataset, positive weights, hard
negatives, the epoch sampler and frozen-layer cache, the epoch budget, and the record of how training ended."""

from __future__ import annotations

import random

import numpy as np

from toolkit.evaluate.scorer import score
from toolkit.infer.decisions import SegmentScores
from toolkit.registry.segment_classification import HardNegativesConfig, SegmentClassificationRecipe
from toolkit.spans.segment_decoding import sigmoid
from toolkit.tasks.flow import Trained
from toolkit.tasks.segments.features import SegmentEpochSampler, SegmentWindows, choose_hard_negatives
from toolkit.tasks.segments.prepared import EvaluationSet, SegmentPrepared
from toolkit.tasks.segments.thresholding import cross_fitted_summary
from toolkit.tasks.training import steps_per_epoch

# segments.encoder_input=segments: the evaluation key that chooses the checkpoint and stops training.
ENCODER_SELECTION = "encoder_segment_aupr"


def segment_macro_aupr(targets: np.ndarray, logits: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean over labels with a positive segment of the average precision of the segments ranked by logit, each
    segment weighted by how many it stands for (`evaluation_sample`)."""
    from sklearn.metrics import average_precision_score

    values = [
        average_precision_score(targets[:, j], logits[:, j], sample_weight=weights)
        for j in range(targets.shape[1])
        if targets[:, j].any()
    ]
    return float(np.mean(values)) if values else 0.0


def evaluation_sample(
    evaluated: SegmentWindows, negatives: int | None, seed: int
) -> tuple[SegmentWindows, np.ndarray | None]:
    """segments.evaluation_negatives: every positive input and at most `negatives` clause-free ones drawn once,
    in order, with weights (1 for a positive, all negatives over drawn ones for a drawn negative) under which
    the sample's AUPR estimates the AUPR over every input; (every input, None) when nothing needs drawing."""
    positive = [any(rows[0]) for rows in evaluated.segment_labels]
    pool = [i for i, p in enumerate(positive) if not p]
    if negatives is None or len(pool) <= negatives:
        return evaluated, None
    drawn = set(random.Random(seed).sample(pool, negatives))
    keep = [i for i, p in enumerate(positive) if p or i in drawn]
    weights = np.asarray([1.0 if positive[i] else len(pool) / negatives for i in keep])
    return evaluated.subset(keep), weights


def positive_weights(choice: str, labels: list[str], segment_labels: list[list[list[int]]]) -> list[float] | None:
    """'balanced': per label, negatives over positives among the training segments (capped at 100), so
    a rare clause type weighs as much as the text around it; 'none': plain BCE."""
    if choice != "balanced":
        return None
    pos = [0] * len(labels)
    total = 0
    for rows in segment_labels:
        for row in rows:
            total += 1
            for j, v in enumerate(row):
                pos[j] += v
    return [min(100.0, (total - p) / p) if p else 1.0 for p in pos]


def segment_collator(tokenizer):
    import torch

    # Per-window segment tables have different sizes; the transformers collators pad 1-D labels only.
    def collate(features):
        local = [f.pop("segment_ids") for f in features]
        rows = [f.pop("segment_labels") for f in features]
        priors = [f.pop("segment_priors") for f in features] if "segment_priors" in features[0] else None
        batch = tokenizer.pad(features, return_tensors="pt", pad_to_multiple_of=8)
        width = batch["input_ids"].shape[1]
        n_labels = len(next((r[0] for r in rows if r), [0]))
        most = max(1, max(len(r) for r in rows))
        ids = torch.full((len(local), width), -100, dtype=torch.long)
        labels = torch.full((len(rows), most, n_labels), -100, dtype=torch.long)
        for i, (tok, seg) in enumerate(zip(local, rows)):
            ids[i, : len(tok)] = torch.tensor(tok, dtype=torch.long)
            if seg:
                labels[i, : len(seg)] = torch.tensor(seg, dtype=torch.long)
        batch["segment_ids"], batch["labels"] = ids, labels
        if priors is not None:
            batch["segment_priors"] = torch.zeros((len(rows), most, n_labels))
            for i, prior in enumerate(priors):
                if prior:
                    batch["segment_priors"][i, : len(prior)] = torch.tensor(prior, dtype=torch.float)
        return batch

    return collate


def segment_trainer_class():
    import torch
    from transformers import Trainer

    class SegmentTrainer(Trainer):
        """Binary cross-entropy (or focal loss) on each segment's mean token logit, per label."""

        def __init__(
            self, *args, pos_weight=None, focal_gamma: float = 0.0, epoch_sampler=None, frozen_cache=None, **kwargs
        ):
            super().__init__(*args, **kwargs)
            self.pos_weight = torch.tensor(pos_weight, dtype=torch.float) if pos_weight else None
            self.focal_gamma = focal_gamma
            self.epoch_sampler = epoch_sampler
            self.frozen_cache = frozen_cache  # segments.cache_frozen_layers: the frozen part replayed
            self.model_accepts_loss_kwargs = False  # a per-batch mean: the Trainer scales it for accumulation

        def _get_train_sampler(self, *args, **kwargs):
            # segments.encoder_input=segments: fresh negatives each epoch, batched by length (SegmentEpochSampler).
            return self.epoch_sampler if self.epoch_sampler is not None else super()._get_train_sampler(*args, **kwargs)

        def _get_eval_sampler(self, eval_dataset):
            # Predictions map back to documents by position: evaluation stays in order (see token_classification).
            return torch.utils.data.SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels, local = inputs.pop("labels"), inputs.pop("segment_ids")
            priors = inputs.pop("segment_priors", None)
            outputs = model(**inputs) if self.frozen_cache is None else self.frozen_cache.forward(model, inputs)
            logits = outputs.logits.float()
            batch, width, n_labels = logits.shape
            most = labels.shape[1]
            valid = local >= 0
            # Scatter-mean of token logits into segment slots (slot `most` collects non-segment tokens).
            slot = torch.where(valid, local, torch.full_like(local, most)) + torch.arange(batch, device=local.device)[
                :, None
            ] * (most + 1)
            sums = torch.zeros(batch * (most + 1), n_labels, device=logits.device).index_add(
                0, slot.view(-1), logits.view(-1, n_labels)
            )
            counts = torch.zeros(batch * (most + 1), device=logits.device).index_add(
                0, slot.view(-1), valid.view(-1).float()
            )
            seg_logits = (sums / counts.clamp_min(1)[:, None]).view(batch, most + 1, n_labels)[:, :most]
            if priors is not None:  # segments.linear_prior: the model learns a correction to the linear logit
                seg_logits = seg_logits + priors.to(seg_logits.device)
            keep = (labels >= 0) & (counts.view(batch, most + 1)[:, :most] > 0)[..., None]
            target = labels.clamp_min(0).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(seg_logits, target, reduction="none")
            if self.focal_gamma:
                p_true = torch.exp(-loss)
                loss = loss * (1 - p_true) ** self.focal_gamma
            if self.pos_weight is not None:
                loss = loss * torch.where(target > 0, self.pos_weight.to(loss.device), torch.ones_like(target))
            loss = (loss * keep).sum() / keep.sum().clamp_min(1)
            return (loss, outputs) if return_outputs else loss

    return SegmentTrainer


def mine_hard_negatives(
    trainer, p: SegmentPrepared, hard: HardNegativesConfig, seed: int
) -> tuple[SegmentWindows, dict]:
    """Score a sample of the left-out clause-free training windows with the trained model; return those
    where a segment reaches hard.min_score (highest first, capped) and what was scored and added."""
    from toolkit.spans.segment_decoding import best_segment_probability

    chosen_pool = sorted(
        random.Random(seed).sample(range(len(p.left_out.windows)), min(hard.pool, len(p.left_out.windows)))
    )
    pool = p.left_out.subset(chosen_pool)
    scores: list[float] = []
    if pool.windows:
        compute_metrics, trainer.compute_metrics = (
            trainer.compute_metrics,
            None,
        )  # dev decoding does not apply to the pool
        try:
            logits = trainer.predict(segment_dataset(pool)).predictions
        finally:
            trainer.compute_metrics = compute_metrics
        logits = logits[0] if isinstance(logits, tuple) else logits
        scores = [
            best_segment_probability(ids, logits[i, : len(ids)], pool.priors[i] if pool.priors else None)
            for i, ids in enumerate(pool.local_ids)
        ]
    limit = hard.max_windows or p.train_report.negative_windows_kept or len(pool.windows)
    chosen = choose_hard_negatives(scores, hard.min_score, limit, hard.choose, seed)
    info = {
        "pool_available": len(p.left_out.windows),
        "pool_scored": len(pool.windows),
        "fired": sum(v >= hard.min_score for v in scores),
        "added": len(chosen),
        "choose": hard.choose,
        "min_score": hard.min_score,
        "epochs": hard.epochs,
    }
    return pool.subset(chosen), info


def epoch_sampler(recipe: SegmentClassificationRecipe, train: SegmentWindows) -> SegmentEpochSampler | None:
    """segments.encoder_input=segments: each epoch's positives and fresh negatives, batched by length."""
    if recipe.segments.encoder_input != "segments":
        return None
    return SegmentEpochSampler(
        [any(rows[0]) for rows in train.segment_labels],
        [len(w.input_ids) for w in train.windows],
        recipe.segments.negatives_per_positive,
        recipe.train.batch_size,
        recipe.seed,
    )


def frozen_cache(recipe: SegmentClassificationRecipe, model, shared=None):
    """segments.cache_frozen_layers with model.train_layers: the frozen part's states, computed once per input;
    `shared`, the run's cache so far, bound to this model (every fold, the refit and later stages share one)."""
    top = recipe.model.train_layers
    # At or above the model's layer count every weight trains (model.train_layers): nothing frozen to cache.
    if top is None or top >= int(model.config.num_hidden_layers) or not recipe.segments.cache_frozen_layers:
        return None
    if shared is not None:
        return shared.bind(model)
    from toolkit.tasks.segments.frozen_layers import FrozenLayerCache

    mb = recipe.segments.frozen_cache_mb
    return FrozenLayerCache(model, int(model.config.num_hidden_layers) - top, None if mb is None else int(mb * 2**20))


def examples_per_epoch(recipe: SegmentClassificationRecipe, train: SegmentWindows) -> int:
    sampler = epoch_sampler(recipe, train)
    return len(train.windows) if sampler is None else len(sampler)


def stop_at_deadline(deadline: float, stopped: list):
    """A callback that ends training once `time.monotonic()` passes `deadline` (budget.seconds: the run's deadline
    for training, whatever its estimate said), and notes the global step it stopped at in `stopped`."""
    import time

    from transformers import TrainerCallback

    class StopAtDeadline(TrainerCallback):
        cut = False  # this Trainer was stopped by the deadline

        def on_step_end(self, args, state, control, **kwargs):
            if time.monotonic() >= deadline and not control.should_training_stop:
                control.should_training_stop = self.cut = True
                stopped.append(state.global_step)
            return control

        def on_epoch_end(self, args, state, control, **kwargs):
            # A stop at the deadline does not evaluate the epoch it cut (an evaluation of the stopping share
            # costs minutes on a CPU, past the deadline): the best epoch evaluated before it is kept.
            if self.cut:
                control.should_evaluate = control.should_save = False
            return control

    return StopAtDeadline()


def stop_after_epochs(epochs: float):
    """A callback that ends training after `epochs` epochs, whatever the schedule's horizon (the refit after
    cross-fitting: the folds' schedule, stopped where they stopped)."""
    from transformers import TrainerCallback

    class StopAfterEpochs(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            if state.epoch is not None and state.epoch >= epochs - 1e-6:
                control.should_training_stop = True
            return control

    return StopAfterEpochs()


def planned_epochs(recipe: SegmentClassificationRecipe, windows: int) -> float:
    """train.epochs, raised on a small set to reach segments.min_steps optimizer steps (at most
    segments.max_epochs): a budget that follows the data rather than one fixed pass."""
    s, epochs = recipe.segments, recipe.train.epochs
    if s.min_steps is None:
        return epochs
    return max(epochs, min(s.max_epochs, s.min_steps / steps_per_epoch(windows, recipe)))


def encoder_training(recipe: SegmentClassificationRecipe, trained: Trained, cross_fitting: dict | None = None) -> dict:
    """segments.encoder_input=segments: the encoder's held-out curve (one point per evaluation), its best
    epoch, and what ended training: the plateau (train.early_stopping_patience evaluations without a better
    held-out AUPR), the epoch cap (train.epochs), the time budget (train.max_seconds) or the run's deadline
    (budget.seconds). A refit after cross-fitting (`cross_fitting`: its report) has no held-out curve: it trains
    for the folds' median best epoch, and each fold's curve is given instead."""
    # Where the budget cut the folds short, the served encoder is a finished fold's, not a refit: its own curve.
    if cross_fitting is not None and "cut_short" not in cross_fitting:
        keys = ("ended_by", "epochs", "best_epoch", "held_out_curve", "last_gain")
        return {
            "ended_by": f"refit on every training document for the folds' median best epoch "
            f"({cross_fitting['refit_epochs']:g}), on their schedule ({cross_fitting.get('refit_horizon') or '-'} "
            "epochs' horizon)",
            "epochs": round(trained.span.epochs_completed, 2),
            "best_epoch": None,
            "held_out_curve": [],
            "last_gain": None,
            "seconds": round(trained.span.seconds, 1),
            "folds": [{k: fold[k] for k in keys} for fold in cross_fitting["per_fold"]],
            "folds_seconds": cross_fitting["seconds"],
        }
    key = f"eval_{ENCODER_SELECTION}"
    also = {"macro_aupr": "eval_macro_aupr", "tuned_jaccard_f1": "eval_tuned_jaccard_f1"}  # every segment read
    curve = [
        {
            "epoch": round(e["epoch"], 2),
            "segment_aupr": round(e[key], 4),
            **{name: round(e[logged], 4) for name, logged in also.items() if logged in e},
        }
        for e in trained.span.log
        if key in e
    ]
    best = max(curve, key=lambda c: c["segment_aupr"], default=None)
    if trained.clock.stopped_by_budget:
        ended = "time budget (train.max_seconds)"
    elif any(getattr(callback, "cut", False) for callback in trained.trainer.callback_handler.callbacks):
        ended = "the run's deadline (budget.seconds)"
    elif trained.span.epochs_completed < recipe.train.epochs - 1e-6:
        ended = f"plateau ({recipe.train.early_stopping_patience} evaluations without a better held-out AUPR)"
    else:
        ended = f"epoch cap (train.epochs={recipe.train.epochs:g})"
    last = curve[-2:] if len(curve) >= 2 else []
    return {
        "ended_by": ended,
        "epochs": round(trained.span.epochs_completed, 2),
        "best_epoch": best["epoch"] if best else None,
        "held_out_curve": curve,
        # how steep the curve still was when training ended: the last evaluation's gain over the one before
        "last_gain": round(last[1]["segment_aupr"] - last[0]["segment_aupr"], 4) if last else None,
        "seconds": round(trained.span.seconds, 1),
    }


def encoder_metrics(recipe: SegmentClassificationRecipe, labels: list[str], scorer, records, evaluated, weights):
    """segments.encoder_input=segments: what the encoder alone says about the evaluation documents (the
    held-out training documents): macro AUPR over their segments (ENCODER_SELECTION: what chooses the
    checkpoint and stops training at its plateau; `weights` when negatives were sampled), and where every
    segment was read, over the threshold sweep with Jaccard at thresholds cross-fitted over two halves of
    them, as dev is scored."""
    texts, golds = [r.text for r in records], [r.spans for r in records]
    targets = np.asarray([rows[0] for rows in evaluated.segment_labels], dtype=int).reshape(-1, len(labels))

    def compute_metrics(pred) -> dict:
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        windows = evaluated.windows
        per_window = [logits[i, : len(w.input_ids)] for i, w in enumerate(windows)]
        own = np.asarray(
            [np.asarray(x)[np.asarray(ids) == 0].mean(axis=0) for x, ids in zip(per_window, evaluated.local_ids)]
        ).reshape(-1, len(labels))
        figures = {ENCODER_SELECTION: segment_macro_aupr(targets, own, weights)}
        if weights is None:
            segments, encoder = scorer.encoder_logits(texts, windows, per_window)
            alone = SegmentScores(segments, [sigmoid(x) for x in encoder])
            figures |= cross_fitted_summary(scorer, alone, texts, golds, labels, recipe.eval.jaccard_threshold)
        return figures

    return compute_metrics


def window_metrics(scorer, ev: EvaluationSet, labels: list[str], jaccard: float):
    """compute_metrics over windows: the evaluation documents at 0.5, and what thresholds do not decide: macro AUPR
    over the threshold sweep and Jaccard at thresholds cross-fitted over two halves of them (as the final scoring),
    so a learning curve shows how soon the model ranks clauses, whatever its calibration."""
    texts, golds = [r.text for r in ev.records], [r.spans for r in ev.records]
    keys = ("jaccard_f1", "jaccard_precision", "jaccard_recall", "span_f1", "boundary_both_recall")

    def compute_metrics(pred) -> dict:
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        windows = ev.windows.windows
        scores = scorer.segment_scores(
            texts, windows, [logits[i, : len(w.input_ids)] for i, w in enumerate(windows)], ev.priors
        )
        summary = score(texts, golds, scorer.spans_at(scores), jaccard_threshold=jaccard, bootstrap=0)["summary"]
        return {
            **{k: summary[k] for k in keys},
            **cross_fitted_summary(scorer, scores, texts, golds, labels, jaccard),
        }

    return compute_metrics


def segment_dataset(features: SegmentWindows):
    from datasets import Dataset

    columns = {
        "input_ids": [w.input_ids for w in features.windows],
        "attention_mask": [[1] * len(w.input_ids) for w in features.windows],
        "segment_ids": features.local_ids,
        "segment_labels": features.segment_labels,
    }
    if features.priors is not None:
        columns["segment_priors"] = features.priors
    return Dataset.from_dict(columns)
