"""The token-classification flow: data -> windows -> Trainer -> saved model -> scored dev predictions.

Reads top to bottom: `run_token_classification` is the whole recipe.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


from toolkit.config import Recipe
from toolkit.data import load_splits
from toolkit.decoding import DecodeSettings, decode_documents
from toolkit.errors import ToolkitError
from toolkit.features import FeatureReport, LabelSpace, build_features, filter_labels
from toolkit.metrics import score
from toolkit.modeling import build_token_model, save_token_model
from toolkit.predict import Tagger
from toolkit.reporting import write_metrics, write_predictions
from toolkit.training import parameter_counts, peak_rss_mib, start_run_dir, train_resuming, training_arguments, world_size


def _class_weights(choice, space: LabelSpace, targets: list[list]) -> list[float] | None:
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
        raise ToolkitError(f"train.class_weights names unknown labels {sorted(unknown)}", fix=f"use labels among {space.labels} (or O)")
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
        """Trainer with class-weighted cross-entropy over tags (flat), or over O/B/I in every label's layer (multi-label)."""

        def __init__(self, *args, loss_weights=None, multi_label=False, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_weights = torch.tensor(loss_weights, dtype=torch.float) if loss_weights else None
            self.multi_label = multi_label
            # Our loss is a per-batch mean, so the Trainer must scale it for gradient accumulation.
            self.model_accepts_loss_kwargs = False

        def _get_eval_sampler(self, eval_dataset):
            # transformers 4.57 also length-groups the *eval* set when group_by_length is
            # on, which reorders predictions; decoding maps them back to documents by
            # position, so evaluation must stay in order.
            return torch.utils.data.SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            logits = outputs.logits.float()
            if self.multi_label:
                loss = self._multi_label_loss(logits, labels)
            else:
                weight = self.loss_weights.to(logits.device) if self.loss_weights is not None else None
                loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), weight=weight, ignore_index=-100)
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


def _dataset(windows, targets):
    from datasets import Dataset

    return Dataset.from_dict({
        "input_ids": [w.input_ids for w in windows],
        "attention_mask": [[1] * len(w.input_ids) for w in windows],
        "labels": targets,
    })


def prepare(recipe: Recipe):
    """Data, label space, model and features: everything before training (also what --dry-run shows)."""
    train_records, dev_records = load_splits(recipe)
    labels = recipe.data.labels or sorted({s.label for r in train_records for s in r.spans})
    if not labels:
        raise ToolkitError(f"{recipe.data.train}: no spans to learn from", fix="label some spans, or check data.labels")
    # Score only the labels being learned; spans of other labels are counted in the feature report.
    dev_records = filter_labels(dev_records, list(labels), FeatureReport())
    m = recipe.model
    settings = DecodeSettings(tuple(labels), m.multi_label, m.label_all_subtokens)
    space = LabelSpace(list(labels), m.multi_label)
    model, tokenizer = build_token_model(m, settings, space.num_outputs)
    train = build_features(tokenizer, train_records, space, m.max_length, m.stride, m.label_all_subtokens, recipe.windows.negative_ratio, recipe.seed)
    dev = build_features(tokenizer, dev_records, space, m.max_length, m.stride, m.label_all_subtokens)
    return train_records, dev_records, settings, space, model, tokenizer, train, dev


def run_token_classification(recipe: Recipe, run_dir: Path, dry_run: bool = False) -> dict | None:
    """Train, save and score one run. Returns the dev metrics on rank 0 (None on other ranks)."""
    import torch
    from transformers import EarlyStoppingCallback, set_seed

    set_seed(recipe.seed)
    train_records, dev_records, settings, space, model, tokenizer, train, dev = prepare(recipe)
    (train_windows, train_targets, train_report), (dev_windows, dev_targets, dev_report) = train, dev
    t = recipe.train
    steps_per_epoch = max(1, len(train_windows) // (t.batch_size * t.gradient_accumulation * world_size()))
    plan = {
        "labels": list(settings.labels),
        "train": train_report.to_dict(),
        "dev": dev_report.to_dict(),
        "steps_per_epoch": steps_per_epoch,
        **parameter_counts(model),
    }
    if dry_run:
        return {"plan": plan}
    start_run_dir(recipe, run_dir, plan)

    docs, offsets, word_ids = [w.doc for w in dev_windows], [w.offsets for w in dev_windows], [w.word_ids for w in dev_windows]

    def compute_metrics(pred) -> dict:
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        spans = decode_documents([r.text for r in dev_records], docs, offsets, word_ids, list(logits), settings)
        s = score([r.text for r in dev_records], [r.spans for r in dev_records], spans, bootstrap=0)["summary"]
        return {"span_f1": s["span_f1"], "span_precision": s["span_precision"], "span_recall": s["span_recall"], "boundary_both_recall": s["boundary_both_recall"]}

    args = training_arguments(recipe, run_dir, metric="span_f1")
    callbacks = [EarlyStoppingCallback(t.early_stopping_patience)] if t.early_stopping_patience else []
    trainer = _trainer_class()(
        model=model,
        args=args,
        train_dataset=_dataset(train_windows, train_targets),
        eval_dataset=_dataset(dev_windows, dev_targets),
        data_collator=_collator(tokenizer, settings.multi_label),
        compute_metrics=compute_metrics,
        callbacks=callbacks,
        loss_weights=_class_weights(t.class_weights, space, train_targets),
        multi_label=settings.multi_label,
    )
    train_seconds, resumed_from = train_resuming(trainer, run_dir)
    if not trainer.is_world_process_zero():
        return None

    save_token_model(trainer.model, tokenizer, run_dir / "model", settings, recipe.model.max_length, recipe.model.stride)
    (run_dir / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trainer.state.log_history), encoding="utf-8")
    tagger = Tagger.load(run_dir)  # score exactly what was saved
    predictions = tagger.predict([r.text for r in dev_records], recipe.train.eval_batch_size)
    metrics = score([r.text for r in dev_records], [r.spans for r in dev_records], predictions,
                    recipe.eval.boundary_tolerance, recipe.eval.jaccard_threshold, recipe.eval.bootstrap, recipe.seed)
    epochs = float(trainer.state.epoch or 0)
    extra = {
        "model": recipe.model.name,
        "train_seconds": round(train_seconds, 1),
        "epochs_completed": round(epochs, 2),
        "optimizer_steps": trainer.state.global_step,
        "train_tokens_per_second": round(train_report.tokens * epochs / train_seconds, 1) if train_seconds else None,
        "peak_rss_mib": peak_rss_mib(),
        "peak_cuda_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else None,
        "eval_seconds": round(tagger.last_report["seconds"], 1),
        "world_size": world_size(),
        "resumed_from_checkpoint": resumed_from,
        "best_checkpoint_dev_span_f1": trainer.state.best_metric,
        "spans_not_representable_train": train_report.spans_not_representable,
        "spans_not_representable_dev": dev_report.spans_not_representable,
    }
    write_predictions(run_dir / "predictions.jsonl", dev_records, predictions)
    write_metrics(run_dir, metrics, f"{recipe.name}: dev", extra)
    return {**metrics, "run": extra}
