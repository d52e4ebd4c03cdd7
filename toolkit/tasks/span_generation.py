"""task: span_generation. A causal LM (LoRA by default) reads windows of a document and writes their
spans in the recipe's completion format (`generation.target`: text, anchors or segments;
toolkit/infer/completions.py); what it writes is mapped back to character offsets, and what cannot be
located is a counted hallucination.

Reads top to bottom: `SpanGeneration` builds the windows, fits the candidate-window selector when the
recipe has one, prepares prompt + completion examples, trains with the loss on the completion only,
saves the merged model (with its selector and generation settings), and scores the saved model with the
`SpanGenerator` that `toolkit eval` and the service use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.evaluate.reporting import write_predictions
from toolkit.evaluate.scorer import score
from toolkit.infer.completions import CompletionSpec
from toolkit.infer.generator import SpanGenerator
from toolkit.infer.selector import SelectorFit, fit_window_selector, spans_reachable
from toolkit.models.building import build_causal_model
from toolkit.registry.saved import ModelMeta
from toolkit.registry.span_generation import SpanGenerationRecipe
from toolkit.rundir import PREDICTIONS_FILE, model_meta, save_model_dir, write_hallucinations
from toolkit.tasks.features import (
    FeatureReport,
    GenerationWindows,
    generation_examples,
    generation_windows,
    labels_to_learn,
    sample_negatives,
)
from toolkit.tasks.flow import Flow, Prepared, Trained
from toolkit.tasks.training import (
    completion_trainer_class,
    pad_collator,
    parameter_counts,
    steps_per_epoch,
    training_arguments,
)


def completion_spec(recipe: SpanGenerationRecipe) -> CompletionSpec:
    return CompletionSpec.of(recipe.generation)


@dataclass
class GenerationPrepared(Prepared):
    labels: list[str]
    dev_records: list[SpanRecord]
    train_examples: list[dict]
    dev_examples: list[dict]
    train_report: FeatureReport
    dev_report: FeatureReport
    selector: SelectorFit | None


def choose_training_windows(
    recipe: SpanGenerationRecipe, windows: GenerationWindows, report: FeatureReport
) -> tuple[list[int], SelectorFit | None]:
    """Every window with a span, plus negatives sampled by windows.negative_ratio. With a selector, the
    negatives come only from windows it flags (cross-validated), as the decoder will only read those."""
    fit = None
    eligible = list(range(len(windows.views)))
    if recipe.generation.selector.kind == "linear":
        s = recipe.generation.selector
        fit = fit_window_selector([v.text for v in windows.views], windows.positive, s.recall, recipe.seed)
        eligible = [i for i, (p, f) in enumerate(zip(windows.positive, fit.cross_validated_flags)) if p or f]
    keep, report.negative_windows_kept, dropped = sample_negatives(
        [windows.positive[i] for i in eligible], recipe.windows.negative_ratio, recipe.seed
    )
    report.negative_windows_dropped = dropped + len(windows.views) - len(eligible)
    return [eligible[k] for k in keep], fit


class SpanGeneration(Flow):
    def prepare(self, recipe: SpanGenerationRecipe) -> GenerationPrepared:
        train_records, dev_records = load_splits(recipe.data, recipe.seed)
        labels = labels_to_learn(recipe, train_records)
        other: Counter = Counter()
        train_records = filter_labels(train_records, labels, other)
        dev_records = filter_labels(dev_records, labels, other)
        model, tokenizer = build_causal_model(recipe.model, recipe.model.quantization)
        m, g, spec = recipe.model, recipe.generation, completion_spec(recipe)
        train_windows, train_report = generation_windows(tokenizer, train_records, spec, m.max_length, m.stride)
        keep, fit = choose_training_windows(recipe, train_windows, train_report)
        train_examples, train_report.tokens = generation_examples(
            tokenizer, train_records, labels, spec, train_windows, keep, g.chat_template
        )
        # The dev loss (which picks the best checkpoint) is taken over the windows the decoder will read.
        dev_windows, dev_report = generation_windows(tokenizer, dev_records, spec, m.max_length, m.stride)
        dev_keep = list(range(len(dev_windows.views)))
        if fit is not None and fit.selector is not None:
            flags = fit.selector.flags([v.text for v in dev_windows.views])
            dev_keep = [i for i, f in enumerate(flags) if f] or dev_keep[:1]
        dev_examples, dev_report.tokens = generation_examples(
            tokenizer, dev_records, labels, spec, dev_windows, dev_keep, g.chat_template
        )
        plan = {
            "labels": labels,
            "target": spec.target,
            "train": train_report.to_dict(),
            "dev": dev_report.to_dict(),
            "dev_windows_for_loss": len(dev_keep),
            "selector": fit.report if fit is not None else {"kind": "none"},
            "spans_other_labels": dict(other),
            "steps_per_epoch": steps_per_epoch(len(train_examples), recipe),
            **parameter_counts(model),
        }
        return GenerationPrepared(
            model,
            tokenizer,
            plan,
            train_report.tokens,
            labels,
            dev_records,
            train_examples,
            dev_examples,
            train_report,
            dev_report,
            fit,
        )

    def trainer(self, recipe: SpanGenerationRecipe, run_dir: Path, p: GenerationPrepared):
        from datasets import Dataset
        from transformers import EarlyStoppingCallback

        t = recipe.train
        # Generating on the dev set every epoch would dominate the training time; the checkpoint is
        # chosen by dev loss on the completions, and the final model is scored by generation
        # (eval.curve_docs adds generation on a few dev documents at every checkpoint).
        return completion_trainer_class()(
            model=p.model,
            args=training_arguments(recipe, run_dir, metric="eval_loss", greater_is_better=False),
            train_dataset=Dataset.from_list(p.train_examples),
            eval_dataset=Dataset.from_list(p.dev_examples),
            data_collator=pad_collator(p.tokenizer.pad_token_id),
            callbacks=[EarlyStoppingCallback(t.early_stopping_patience)] if t.early_stopping_patience else [],
        )

    def meta(self, recipe: SpanGenerationRecipe, p: GenerationPrepared) -> ModelMeta:
        return model_meta(
            task=recipe.task,
            labels=p.labels,
            max_length=recipe.model.max_length,
            stride=recipe.model.stride,
            generation=recipe.generation,
            selector=p.selector.report if p.selector is not None else None,
        )

    def predictor(self, recipe: SpanGenerationRecipe, p: GenerationPrepared, model) -> SpanGenerator:
        selector = p.selector.selector if p.selector is not None else None
        return SpanGenerator(model, p.tokenizer, self.meta(recipe, p), str(next(model.parameters()).device), selector)

    def save(self, recipe: SpanGenerationRecipe, p: GenerationPrepared, model, directory: Path) -> None:
        save_model_dir(model, p.tokenizer, directory, self.meta(recipe, p))
        if p.selector is not None and p.selector.selector is not None:
            p.selector.selector.save(directory)

    def evaluate(
        self, recipe: SpanGenerationRecipe, run_dir: Path, p: GenerationPrepared, trained: Trained
    ) -> tuple[dict, dict]:
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
        metrics["selector"] = selector_figures(generator, records, p.selector)
        write_predictions(run_dir / PREDICTIONS_FILE, records, predictions)
        write_hallucinations(run_dir, [{**h, "id": records[h["doc"]].id} for h in gen["hallucinated"]])
        return metrics, {
            "eval_seconds": gen["seconds"],
            "generation_seconds_per_document": round(gen["seconds"] / max(1, len(records)), 2),
            "target": gen["target"],
            "windows_read": gen["windows_read"],
            "windows": gen["windows"],
            "generated_tokens": gen["generated_tokens"],
            "generated_tokens_per_second": gen["generated_tokens_per_second"],
            "constrained_decoding": gen["constrained"],
            "generation_autocast": gen["autocast"],
            "recovered_by": gen["recovered_by"],
            "hallucinated_spans": gen["hallucinated_spans"],
            "unknown_label_lines": gen["unknown_label_lines"],
            "malformed_lines": gen["malformed_lines"],
            "truncated_outputs": gen["truncated_outputs"],
            "best_checkpoint_dev_loss": trained.trainer.state.best_metric,
            "spans_not_representable_train": p.train_report.spans_not_representable,
            "spans_not_representable_dev": p.dev_report.spans_not_representable,
        }


def selector_figures(generator: SpanGenerator, records: list[SpanRecord], fit: SelectorFit | None) -> dict:
    """What the candidate-window selector cost on the documents `generator` last predicted: the spans
    no window it kept can produce bound the CLM's recall from above."""
    views, read = generator.last_selection
    whole = generator.spec.target != "segments"
    reach, total = spans_reachable(views, read, [r.spans for r in records], whole)
    return {
        **(fit.report if fit is not None else {"kind": "none"}),
        "dev_windows": len(views),
        "dev_windows_read": int(sum(read)),
        "dev_spans": total,
        "dev_spans_reachable": reach,
        # 1.0 without a selector, less where spans cross windows (text, anchors): the recall ceiling.
        "dev_recall_ceiling": round(reach / total, 4) if total else None,
        "ceiling_rule": "a read window holds the span whole" if whole else "a read window holds part of the span",
    }
