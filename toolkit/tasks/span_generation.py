"""task: span_generation. A causal LM (LoRA by default) reads each window of a document and
generates its spans, one `label: text` line each; generated text is mapped back to character
offsets, and what cannot be located is a counted hallucination.

Reads top to bottom: `SpanGeneration` prepares prompt + completion examples from the same windows
as token_classification, trains with the loss on the completion only, saves the merged model
with its generation settings, and scores the saved model with the `SpanGenerator` that
`toolkit eval` and the service use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from toolkit.config import Recipe
from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.evaluate.metrics import score
from toolkit.evaluate.reporting import write_predictions
from toolkit.infer.generator import SpanGenerator
from toolkit.rundir import PREDICTIONS_FILE, save_model_dir, write_hallucinations
from toolkit.tasks.features import FeatureReport, generation_examples, labels_to_learn
from toolkit.tasks.flow import Flow, Prepared
from toolkit.tasks.models import build_causal_model
from toolkit.tasks.training import pad_collator, parameter_counts, steps_per_epoch, training_arguments


@dataclass
class GenerationPrepared(Prepared):
    labels: list[str]
    dev_records: list[SpanRecord]
    train_examples: list[dict]
    dev_examples: list[dict]
    train_report: FeatureReport
    dev_report: FeatureReport


class SpanGeneration(Flow):
    def prepare(self, recipe: Recipe) -> GenerationPrepared:
        train_records, dev_records = load_splits(recipe)
        labels = labels_to_learn(recipe, train_records)
        other: Counter = Counter()
        train_records = filter_labels(train_records, labels, other)
        dev_records = filter_labels(dev_records, labels, other)
        model, tokenizer = build_causal_model(recipe.model)
        m, g = recipe.model, recipe.generation
        train_examples, train_report = generation_examples(
            tokenizer, train_records, labels, m.max_length, m.stride, g.chat_template, recipe.windows.negative_ratio, recipe.seed
        )
        dev_examples, dev_report = generation_examples(tokenizer, dev_records, labels, m.max_length, m.stride, g.chat_template)
        plan = {
            "labels": labels,
            "train": train_report.to_dict(),
            "dev": dev_report.to_dict(),
            "spans_other_labels": dict(other),
            "steps_per_epoch": steps_per_epoch(len(train_examples), recipe),
            **parameter_counts(model),
        }
        return GenerationPrepared(model, tokenizer, plan, train_report.tokens, labels, dev_records, train_examples, dev_examples, train_report, dev_report)

    def trainer(self, recipe: Recipe, run_dir: Path, p: GenerationPrepared):
        from datasets import Dataset
        from transformers import EarlyStoppingCallback, Trainer

        t = recipe.train
        # Generating on the dev set every epoch would dominate the training time; the checkpoint is
        # chosen by dev loss on the completions, and the final model is scored by generation.
        return Trainer(
            model=p.model,
            args=training_arguments(recipe, run_dir, metric="eval_loss", greater_is_better=False),
            train_dataset=Dataset.from_list(p.train_examples),
            eval_dataset=Dataset.from_list(p.dev_examples),
            data_collator=pad_collator(p.tokenizer.pad_token_id),
            callbacks=[EarlyStoppingCallback(t.early_stopping_patience)] if t.early_stopping_patience else [],
        )

    def save(self, recipe: Recipe, p: GenerationPrepared, model, directory: Path) -> None:
        g = recipe.generation
        meta = {
            "task": "span_generation",
            "labels": p.labels,
            "max_length": recipe.model.max_length,
            "stride": recipe.model.stride,
            "max_new_tokens": g.max_new_tokens,
            "batch_size": g.batch_size,
            "constrained": g.constrained,
            "min_similarity": g.min_similarity,
            "chat_template": g.chat_template,
        }
        save_model_dir(model, p.tokenizer, directory, meta)

    def evaluate(self, recipe: Recipe, run_dir: Path, p: GenerationPrepared, trainer) -> tuple[dict, dict]:
        generator = SpanGenerator.load(run_dir)  # score exactly what was saved
        records = p.dev_records
        predictions = generator.predict([r.text for r in records])
        gen = generator.last_report
        unlocated = [[h["label"] for h in gen["hallucinated"] if h["doc"] == i] for i in range(len(records))]
        metrics = score(
            [r.text for r in records],
            [r.spans for r in records],
            predictions,
            recipe.eval.boundary_tolerance,
            recipe.eval.jaccard_threshold,
            recipe.eval.bootstrap,
            recipe.seed,
            unlocated,
        )
        write_predictions(run_dir / PREDICTIONS_FILE, records, predictions)
        write_hallucinations(run_dir, [{**h, "id": records[h["doc"]].id} for h in gen["hallucinated"]])
        return metrics, {
            "eval_seconds": gen["seconds"],
            "generated_tokens_per_second": gen["generated_tokens_per_second"],
            "constrained_decoding": gen["constrained"],
            "recovered_by": gen["recovered_by"],
            "hallucinated_spans": gen["hallucinated_spans"],
            "unknown_label_lines": gen["unknown_label_lines"],
            "malformed_lines": gen["malformed_lines"],
            "truncated_outputs": gen["truncated_outputs"],
            "best_checkpoint_dev_loss": trainer.state.best_metric,
            "spans_not_representable_train": p.train_report.spans_not_representable,
            "spans_not_representable_dev": p.dev_report.spans_not_representable,
        }
