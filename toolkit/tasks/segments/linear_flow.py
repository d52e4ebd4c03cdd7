"""task: segment_classification with `model.kind: linear`: the bag-of-words baseline.

TF-IDF over each segment (with its neighbours' words) and one logistic regression per label with
balanced class weights (scikit-learn, `bag_of_words.py`), fitted in seconds. It has no Trainer, so its flow
replaces `run` and `plan` rather than going through `flow.run_flow`; it writes the same run directory
(config.yaml, data_report.json, model/ with toolkit.json, predictions, metrics with the same thresholds and
ranking metrics as the encoder), so `toolkit eval` and `toolkit compare` treat it like any run.
"""

from __future__ import annotations

import time
from pathlib import Path

from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.infer.linear_model import LINEAR_FILE, LinearModel
from toolkit.registry.linear_model import LinearModelRecipe
from toolkit.rundir import MODEL_DIR, code_commit, model_meta, start_run_dir, write_meta
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.segments import segment_text
from toolkit.tasks.features import labels_to_learn
from toolkit.tasks.flow import Flow, RunResult
from toolkit.tasks.segments.linear_model import (
    SegmentedDocument,
    fit_classifier,
    out_of_fold_scores,
    segment_documents,
    stacked,
)
from toolkit.tasks.segments.thresholding import best_thresholds, score_segment_model, tuning_note

LINEAR = "linear"


class LinearModelFlow(Flow):
    """The baseline's flow: fit in one step, then the same scoring and files as the encoder's."""

    def plan(self, recipe: LinearModelRecipe) -> dict:
        return plan_linear(recipe)

    notes: dict | None = None  # what the run record adds (a segment run that fell back here: its budget)

    def run(self, recipe: LinearModelRecipe, run_dir: Path) -> RunResult:
        return run_linear(self, recipe, run_dir, self.notes)


def out_of_fold_thresholds(
    recipe: LinearModelRecipe, records: list[SpanRecord], documents: list[SegmentedDocument], labels: list[str]
) -> tuple[list[float], str]:
    """Per-label thresholds chosen on the training documents' out-of-fold scores: each fold scored by a model
    fitted on the others, the sweep over all of them, the best Jaccard F1 per label (as `tuned` does on dev).
    Dev then only reports, and the choice rests on every training document rather than a few dev ones.
    `documents` are `records` already segmented (once, for the full fit and every fold)."""
    meta = model_meta(task=recipe.task, classifier=recipe.model.kind, labels=labels, multi_label=True)
    s = recipe.segments
    scores, k = out_of_fold_scores(documents, meta, s.folds, recipe.seed, s.clause_starts)
    how = f"chosen on out-of-fold scores of the {len(records)} training documents ({k} folds)"
    return best_thresholds(scores, records, labels, recipe.eval.jaccard_threshold), how


def evidence_strategy(recipe: LinearModelRecipe) -> dict[str, str]:
    """Where the linear model's thresholds are chosen, and why (the plan's counterpart of the encoder's strategy)."""
    how = recipe.segments.thresholds
    why = {
        "out_of_fold": f"chosen on out-of-fold scores of every training document ({recipe.segments.folds} folds)",
        "tuned": "chosen on dev, dev figures cross-fitted over its two halves",
        "fixed": "every label at the default threshold",
    }[how]
    return {"name": how, "why": f"segments.thresholds={how}: {why}"}


def plan_linear(recipe: LinearModelRecipe) -> dict:
    train, dev = load_splits(recipe.data, recipe.seed)
    labels = labels_to_learn(recipe, train)
    segments = sum(len(segment_text(r.text)) for r in train)
    return {
        "evidence_strategy": evidence_strategy(recipe),
        "labels": labels,
        "classifier": LINEAR,
        "train": {"documents": len(train), "segments": segments},
        "dev": {"documents": len(dev)},
        **tuning_note(recipe, filter_labels(dev, labels), labels),
    }


def run_linear(flow: Flow, recipe: LinearModelRecipe, run_dir: Path, notes: dict | None = None) -> RunResult:
    """Fit, save and score the linear baseline; the same run directory as every other run (`notes`: what the run
    record adds, such as the budget of a segment run that fell back to it)."""
    began = time.perf_counter()
    commit = code_commit()  # the code that runs: the checkout as the run starts
    train_records, dev_records = load_splits(recipe.data, recipe.seed)
    labels = labels_to_learn(recipe, train_records)
    train_records, dev_records = filter_labels(train_records, labels), filter_labels(dev_records, labels)
    started = time.perf_counter()
    documents = segment_documents(train_records, labels, recipe.segments.min_overlap)
    inputs, y = stacked(documents, len(labels))
    if not inputs:
        raise ToolkitError(f"{recipe.data.train}: no text to learn from", fix="check data.train")
    positives = dict(zip(labels, y.sum(axis=0).tolist()))
    # A label no segment carries (its spans are phrases inside sentences) gets a constant classifier
    # that never fires; it is listed in the plan and the run information, and scores 0 recall.
    absent = [lb for lb, n in positives.items() if not n]
    plan = {
        "evidence_strategy": evidence_strategy(recipe),
        "labels": labels,
        "classifier": LINEAR,
        "train": {"documents": len(train_records), "segments": len(inputs), "positive_segments": positives},
        "labels_without_positive_segments": absent,
    }
    start_run_dir(recipe, run_dir, plan)
    space = LabelSpace(tuple(labels), multi_label=True).to_meta()
    meta = model_meta(task=recipe.task, classifier=recipe.model.kind, **space, min_overlap=recipe.segments.min_overlap)
    fitted = fit_classifier(documents, meta, recipe.seed, recipe.segments.clause_starts)
    fit_seconds = time.perf_counter() - started
    chosen = None
    if recipe.segments.thresholds == "out_of_fold":
        chosen = out_of_fold_thresholds(recipe, train_records, documents, labels)
    threshold_seconds = time.perf_counter() - started - fit_seconds
    model_dir = run_dir / MODEL_DIR
    model_dir.mkdir(parents=True, exist_ok=True)
    starts_file = fitted.save_files(model_dir, LINEAR_FILE)
    write_meta(model_dir, meta.model_copy(update={"clause_starts": starts_file}))
    classifier = LinearModel.load(run_dir)
    metrics, info = score_segment_model(recipe, run_dir, classifier, dev_records, labels, chosen=chosen)
    run = {
        **commit,
        "model": LINEAR,
        # the whole run, as every flow records it (with a segment run's budget sizing, where it fell back here)
        "wall_seconds": round(time.perf_counter() - began + flow.sizing_seconds, 1),
        "train_seconds": round(fit_seconds, 1),
        **({"out_of_fold_seconds": round(threshold_seconds, 1)} if chosen else {}),
        "train_segments": len(inputs),
        "labels_without_positive_segments": absent,
        **info,
        **(notes or {}),
    }
    result = RunResult(run_dir, {**metrics, "run": run})
    flow.write(recipe, result)  # metrics.json and report.md, as every flow writes them
    return result
