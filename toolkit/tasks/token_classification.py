"""task: token_classification. An encoder (or a decoder used as a tagger) tags every token of
windowed documents; tags are decoded back to character spans.

Reads top to bottom: `TokenClassification` prepares windows with per-token targets and the model,
trains with class-weighted cross-entropy, saves the model with its label space, and scores the
saved model on the dev documents with the same `Tagger` that `toolkit eval` and the service use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.evaluate.ranking import ranking_metrics
from toolkit.evaluate.reporting import write_predictions
from toolkit.evaluate.scorer import score
from toolkit.infer.tagger import Tagger
from toolkit.models.building import build_token_model
from toolkit.models.runtimes import preferred_autocast
from toolkit.registry.saved import ModelMeta
from toolkit.registry.token_classification import TokenClassificationRecipe
from toolkit.rundir import PREDICTIONS_FILE, model_meta, save_model_dir
from toolkit.spans.decoding import decode_documents
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.windows import Window
from toolkit.tasks.distillation import (
    TEACHER_OUTPUTS_FILE,
    Distillation,
    label_documents,
    plan_distillation,
    soft_collator,
    soft_dataset,
)
from toolkit.tasks.features import FeatureReport, labels_to_learn, token_features
from toolkit.tasks.flow import Flow, Prepared, Trained
from toolkit.tasks.training import parameter_counts, steps_per_epoch, training_arguments


def class_weights(choice, space: LabelSpace, targets: list[list]) -> list[float] | None:
    """Loss weights, one per model output (`space.output_names()` order).

    'balanced': inverse frequency of each tag in the training targets (in multi-label
    mode, of O/B/I within each label's layer). A dict gives B-/I- tags of a label a fixed
    weight (O: the weight of 'O', default 1).
    """
    if choice == "none":
        return None
    names = space.output_names()
    if choice == "balanced":
        if space.multi_label:
            counts = Counter((layer, t) for row in targets for token in row for layer, t in enumerate(token) if t >= 0)
            weights = []
            for layer in range(len(space.labels)):
                total = sum(counts[(layer, t)] for t in range(3))
                weights += [total / (3 * counts[(layer, t)]) if counts[(layer, t)] else 1.0 for t in range(3)]
            return weights
        counts = Counter(t for row in targets for t in row if t >= 0)
        total = sum(counts.values())
        return [total / (len(names) * counts[i]) if counts[i] else 1.0 for i in range(len(names))]
    unknown = set(choice) - set(space.labels) - {"O"}
    if unknown:
        raise ToolkitError(
            f"train.class_weights names unknown labels {sorted(unknown)}", fix=f"use labels among {space.labels} (or O)"
        )
    return [choice.get("O", 1.0) if n.startswith("O") else choice.get(n.split("-", 1)[1], 1.0) for n in names]


def _collator(tokenizer, multi_label: bool):
    from transformers import DataCollatorForTokenClassification

    if not multi_label:
        return DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=8)

    import torch

    # DataCollatorForTokenClassification pads 1-D label lists only; multi-label
    # targets are [tokens, labels], padded here with rows of -100.
    def collate(features):
        labels = [f.pop("labels") for f in features]
        batch = tokenizer.pad(features, return_tensors="pt", pad_to_multiple_of=8)
        width, layers = batch["input_ids"].shape[1], len(labels[0][0])
        padded = torch.full((len(labels), width, layers), -100, dtype=torch.long)
        for i, rows in enumerate(labels):
            padded[i, : len(rows)] = torch.tensor(rows, dtype=torch.long)
        batch["labels"] = padded
        return batch

    return collate


def _trainer_class():
    import torch
    from transformers import Trainer

    class SpanTrainer(Trainer):
        """Trainer with class-weighted cross-entropy over tags (flat), or over O/B/I in every label's layer
        (multi-label)."""

        def __init__(
            self,
            *args,
            loss_weights=None,
            multi_label=False,
            layer_decay=None,
            head_learning_rate=None,
            distill=None,
            **kwargs,
        ):
            super().__init__(*args, **kwargs)
            self.distill = distill  # (temperature, gold_weight): the teacher's logits come with each training batch
            self.loss_weights = torch.tensor(loss_weights, dtype=torch.float) if loss_weights else None
            self.multi_label = multi_label
            self.layer_decay, self.head_learning_rate = layer_decay, head_learning_rate
            # Our loss is a per-batch mean, so the Trainer must scale it for gradient accumulation.
            self.model_accepts_loss_kwargs = False

        def _get_eval_sampler(self, eval_dataset):
            # transformers 4.57 also length-groups the *eval* set when group_by_length is
            # on, which reorders predictions; decoding maps them back to documents by
            # position, so evaluation must stay in order.
            return torch.utils.data.SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

        def create_optimizer(self):
            """The Trainer's optimizer class over per-parameter learning rates (train.layer_lr_decay,
            train.head_learning_rate); the Trainer's scheduler then scales every group alike."""
            if self.optimizer is not None or not (self.layer_decay or self.head_learning_rate):
                return super().create_optimizer()
            from toolkit.tasks.optimization import parameter_groups

            groups = parameter_groups(
                self.model,
                self.args.learning_rate,
                self.args.weight_decay,
                set(self.get_decay_parameter_names(self.model)),
                self.layer_decay,
                self.head_learning_rate,
            )
            optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(self.args, self.model)
            kwargs.pop("lr", None)
            self.optimizer = optimizer_cls(groups, **kwargs)
            return self.optimizer

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs.pop("labels")
            teacher, teacher_mask = inputs.pop("teacher_logits", None), inputs.pop("teacher_mask", None)
            outputs = model(**inputs)
            logits = outputs.logits.float()
            if teacher is not None and self.distill is not None:
                from toolkit.tasks.distillation import distillation_loss

                weight = self.loss_weights.to(logits.device) if self.loss_weights is not None else None
                loss = distillation_loss(logits, labels, teacher, teacher_mask, *self.distill, weight=weight)
            elif self.multi_label:
                loss = self._multi_label_loss(logits, labels)
            else:
                weight = self.loss_weights.to(logits.device) if self.loss_weights is not None else None
                loss = torch.nn.functional.cross_entropy(
                    logits.view(-1, logits.shape[-1]), labels.view(-1), weight=weight, ignore_index=-100
                )
            return (loss, outputs) if return_outputs else loss

        def _multi_label_loss(self, logits, labels):
            """Cross-entropy over O/B/I in every label's layer; weighted like torch's `weight=` (sum w*ce / sum w)."""
            flat_logits, flat_labels = logits.reshape(-1, 3), labels.reshape(-1)
            if self.loss_weights is None:
                return torch.nn.functional.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
            layers = labels.shape[-1]
            keep = flat_labels >= 0
            layer = torch.arange(layers, device=labels.device).repeat(flat_labels.numel() // layers)[keep]
            target = flat_labels[keep]
            ce = torch.nn.functional.cross_entropy(flat_logits[keep], target, reduction="none")
            w = self.loss_weights.to(logits.device).view(layers, 3)[layer, target]
            return (w * ce).sum() / w.sum().clamp_min(1e-12)

    return SpanTrainer


def average_last_checkpoints(trainer, k: int) -> list[str]:
    """train.average_checkpoints: load the mean of the last k checkpoints' weights into the trained model
    (in place of the best checkpoint). Returns the checkpoints' names."""
    from toolkit.tasks.optimization import average_checkpoints, last_checkpoints

    chosen = last_checkpoints(Path(trainer.args.output_dir), k)
    if len(chosen) < k or not all((c / "model.safetensors").is_file() for c in chosen):
        raise ToolkitError(
            f"train.average_checkpoints={k} needs {k} full-model checkpoints in {trainer.args.output_dir}; found "
            f"{[c.name for c in chosen]}",
            fix=(
                "train for more evaluations (train.eval_every), keep them (train.save_total_limit), or drop "
                "average_checkpoints (LoRA checkpoints hold adapters only)"
            ),
        )
    missing, unexpected = trainer.model.load_state_dict(average_checkpoints(chosen), strict=False)
    if unexpected or missing:
        raise ToolkitError(
            f"averaged checkpoints do not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})",
            fix="drop train.average_checkpoints",
        )
    return [c.name for c in chosen]


def _dataset(windows, targets):
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "input_ids": [w.input_ids for w in windows],
            "attention_mask": [[1] * len(w.input_ids) for w in windows],
            "labels": targets,
        }
    )


@dataclass
class TokenPrepared(Prepared):
    space: LabelSpace
    dev_records: list[SpanRecord]
    train_windows: list[Window]
    train_targets: list[list]
    dev_windows: list[Window]
    dev_targets: list[list]
    train_report: FeatureReport
    dev_report: FeatureReport
    distill: Distillation | None = None  # distill: the teacher and the unlabelled text


class TokenClassification(Flow):
    curve_selection_key = "span_f1"  # the Trainer's metric, scored by the Tagger

    def prepare(self, recipe: TokenClassificationRecipe) -> TokenPrepared:
        """Data, label space, model and features: everything before training."""
        sources: list[dict] = []
        train_records, dev_records = load_splits(recipe.data, recipe.seed, sources)
        labels = labels_to_learn(recipe, train_records)
        # Score only the labels being learned; spans of other labels are counted in the feature report.
        dev_records = filter_labels(dev_records, labels)
        m = recipe.model
        space = LabelSpace(tuple(labels), m.multi_label, m.label_all_subtokens, m.decoding)
        # The teacher and the unlabelled text are checked before any model loads.
        distill = plan_distillation(recipe, train_records, dev_records, space) if recipe.distill else None
        model, tokenizer = build_token_model(m, space)
        train_windows, train_targets, train_report = token_features(
            tokenizer, train_records, space, m.max_length, m.stride, recipe.windows.negative_ratio, recipe.seed
        )
        dev_windows, dev_targets, dev_report = token_features(tokenizer, dev_records, space, m.max_length, m.stride)
        plan = {
            "labels": list(space.labels),
            "train": train_report.to_dict(),
            "dev": dev_report.to_dict(),
            "steps_per_epoch": steps_per_epoch(len(train_windows), recipe),
            **({"train_corpora": sources} if sources else {}),
            **({"distillation": distill.report} if distill else {}),
            **parameter_counts(model),
        }
        return TokenPrepared(
            model,
            tokenizer,
            plan,
            train_report.tokens,
            space,
            dev_records,
            train_windows,
            train_targets,
            dev_windows,
            dev_targets,
            train_report,
            dev_report,
            distill,
        )

    def trainer(self, recipe: TokenClassificationRecipe, run_dir: Path, p: TokenPrepared):
        from transformers import EarlyStoppingCallback

        texts, golds = [r.text for r in p.dev_records], [r.spans for r in p.dev_records]
        docs, offsets, word_ids = (
            [w.doc for w in p.dev_windows],
            [w.offsets for w in p.dev_windows],
            [w.word_ids for w in p.dev_windows],
        )

        def compute_metrics(pred) -> dict:
            logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
            spans = decode_documents(texts, docs, offsets, word_ids, list(logits), p.space)
            s = score(texts, golds, spans, bootstrap=0)["summary"]
            return {
                "span_f1": s["span_f1"],
                "span_precision": s["span_precision"],
                "span_recall": s["span_recall"],
                "boundary_both_recall": s["boundary_both_recall"],
            }

        t = recipe.train
        train_dataset, collator = (
            _dataset(p.train_windows, p.train_targets),
            _collator(p.tokenizer, p.space.multi_label),
        )
        if p.distill is not None:
            train_dataset, collator = self.soft_training_set(recipe, run_dir, p), soft_collator(collator)
        return _trainer_class()(
            model=p.model,
            # The teacher's columns reach the collator (the Trainer would drop what the model does not take).
            args=training_arguments(recipe, run_dir, metric="span_f1", remove_unused_columns=p.distill is None),
            train_dataset=train_dataset,
            eval_dataset=_dataset(p.dev_windows, p.dev_targets),
            data_collator=collator,
            compute_metrics=compute_metrics,
            callbacks=[EarlyStoppingCallback(t.early_stopping_patience)] if t.early_stopping_patience else [],
            loss_weights=class_weights(t.class_weights, p.space, p.train_targets),
            multi_label=p.space.multi_label,
            layer_decay=t.layer_lr_decay,
            head_learning_rate=t.head_learning_rate,
            distill=(recipe.distill.temperature, recipe.distill.gold_weight) if recipe.distill else None,
        )

    def soft_training_set(self, recipe: TokenClassificationRecipe, run_dir: Path, p: TokenPrepared):
        """The teacher labels the labelled and unlabelled documents (cached in the run directory); the student's
        windows carry its logits. What it cost goes to the run's record."""
        d = p.distill
        assert d is not None
        run_dir.mkdir(parents=True, exist_ok=True)
        teacher, labelling = label_documents(
            d, d.labelled + d.unlabelled, run_dir / TEACHER_OUTPUTS_FILE, recipe.eval.precision
        )
        m = recipe.model
        dataset, counts, unlabelled_tokens = soft_dataset(
            d, p.tokenizer, p.space, p.train_windows, p.train_targets, m.max_length, m.stride, teacher
        )
        p.train_tokens += unlabelled_tokens  # an epoch reads the unlabelled windows too (tokens/s)
        self.distill_notes = {**d.report, **labelling, **counts}
        return dataset

    def train(self, recipe: TokenClassificationRecipe, run_dir: Path, p: TokenPrepared) -> Trained:
        trained = super().train(recipe, run_dir, p)
        if p.distill is not None:
            trained.notes["distillation"] = self.distill_notes
        if recipe.train.average_checkpoints:
            trained.notes["averaged_checkpoints"] = average_last_checkpoints(
                trained.trainer, recipe.train.average_checkpoints
            )
        return trained

    def save(self, recipe: TokenClassificationRecipe, p: TokenPrepared, model, directory: Path) -> None:
        """A model directory loadable by `Tagger.load` and exportable."""
        save_model_dir(model, p.tokenizer, directory, self.meta(recipe, p))

    def meta(self, recipe: TokenClassificationRecipe, p: TokenPrepared) -> ModelMeta:
        return model_meta(
            task=recipe.task,
            **p.space.to_meta(),
            max_length=recipe.model.max_length,
            stride=recipe.model.stride,
            **({"distilled_from": p.distill.teacher_info()} if p.distill else {}),
        )

    def predictor(self, recipe: TokenClassificationRecipe, p: TokenPrepared, model) -> Tagger:
        tagger = Tagger(model, p.tokenizer, self.meta(recipe, p), str(next(model.parameters()).device))
        tagger.autocast = preferred_autocast(recipe.eval.precision, tagger.device)
        return tagger

    def evaluate(
        self, recipe: TokenClassificationRecipe, run_dir: Path, p: TokenPrepared, trained: Trained
    ) -> tuple[dict, dict]:
        tagger = Tagger.load(run_dir)  # score exactly what was saved
        tagger.autocast = preferred_autocast(recipe.eval.precision, tagger.device)
        predictions = tagger.predict([r.text for r in p.dev_records], recipe.train.eval_batch_size)
        metrics = score(
            [r.text for r in p.dev_records],
            [r.spans for r in p.dev_records],
            predictions,
            recipe.eval.boundary_tolerance,
            recipe.eval.jaccard_threshold,
            recipe.eval.bootstrap,
            recipe.seed,
        )
        metrics["ranking"] = ranking_metrics(
            [r.text for r in p.dev_records],
            [r.spans for r in p.dev_records],
            predictions,
            list(p.space.labels),
            recipe.eval.jaccard_threshold,
            recipe.eval.bootstrap,
            recipe.seed,
        )
        write_predictions(run_dir / PREDICTIONS_FILE, p.dev_records, predictions)
        return metrics, {
            "eval_seconds": round(tagger.last_report["seconds"], 1),
            "eval_autocast": tagger.autocast,
            "best_checkpoint_dev_span_f1": trained.trainer.state.best_metric,
            **trained.notes,  # averaged_checkpoints
            "spans_not_representable_train": p.train_report.spans_not_representable,
            "spans_not_representable_dev": p.dev_report.spans_not_representable,
        }
