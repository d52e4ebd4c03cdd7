"""Run directories and the commands that fill them: one run, or a sweep of trials."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from toolkit.config import Recipe
from toolkit.errors import ToolkitError


def run_dir_for(recipe: Recipe) -> Path:
    return Path(recipe.output_dir) / recipe.name


def prepare_run_dir(run_dir: Path, overwrite: bool) -> None:
    """A finished run is never overwritten by accident; an unfinished one resumes from its checkpoints."""
    if (run_dir / "metrics.json").is_file():
        if not overwrite:
            raise ToolkitError(f"{run_dir} holds a finished run", fix="pass --overwrite, or choose another name: name=NEW_NAME")
        shutil.rmtree(run_dir)


def execute(recipe: Recipe, run_dir: Path, dry_run: bool = False) -> dict | None:
    """Dispatch one run by task."""
    if recipe.task == "token_classification":
        from toolkit.train_token import run_token_classification

        return run_token_classification(recipe, run_dir, dry_run)
    if recipe.task == "span_generation":
        from toolkit.train_clm import run_span_generation

        return run_span_generation(recipe, run_dir, dry_run)
    if recipe.task in ("pretrain_mlm", "pretrain_clm"):
        from toolkit.pretrain import run_pretraining

        return run_pretraining(recipe, run_dir, dry_run)
    raise ToolkitError(f"task {recipe.task!r} is not implemented", fix="use task: token_classification or span_generation")


def run_label_map(path: Path) -> dict[str, str] | None:
    """The data.label_map a run was trained with (from its config.yaml), so it is scored on the same labels."""
    from toolkit.config import load_recipe

    for directory in (Path(path), Path(path).parent):
        if (directory / "config.yaml").is_file():
            return load_recipe(directory / "config.yaml").data.label_map
    return None


def load_system(path: Path):
    """A trained run as a predictor: Tagger (token_classification) or Generator (span_generation)."""
    from toolkit.modeling import load_meta
    from toolkit.predict import Tagger, model_dir_of

    meta = load_meta(model_dir_of(path))
    if meta.get("task", "").startswith("pretrain"):
        raise ToolkitError(f"{path} is a domain-adapted base model ({meta['task']}): it extracts nothing by itself",
                           fix=f"fine-tune it: set model.name: {model_dir_of(path)} in a token_classification or span_generation recipe")
    if meta.get("task") == "span_generation":
        from toolkit.generate import Generator

        return Generator.load(path)
    return Tagger.load(path)


def predict_with_report(system, texts: list[str]) -> tuple[list, list[list[str]], dict]:
    """Predictions, labels of unlocated (hallucinated) predictions per document, and timing."""
    predictions = system.predict(texts)
    report = system.last_report
    unlocated = [[h["label"] for h in report.get("hallucinated", []) if h["doc"] == i] for i in range(len(texts))]
    return predictions, unlocated, report


def evaluate_run(run: Path, data: str, out: Path | None = None, bootstrap: int = 1000, tolerances: list[int] | None = None) -> tuple[dict, Path]:
    """Score a trained run on any span file; writes metrics.json, report.md, predictions.jsonl."""
    from toolkit.data import load_records, resolve_data_path
    from toolkit.features import FeatureReport, filter_labels
    from toolkit.metrics import score
    from toolkit.reporting import write_metrics, write_predictions

    from toolkit.data import map_record_labels

    system = load_system(run)
    records = load_records(data)
    label_map = run_label_map(run)
    if label_map:
        records = [map_record_labels(r, label_map)[0] for r in records]
    report = FeatureReport()
    records = filter_labels(records, list(system.meta["labels"]), report)
    predictions, unlocated, timing = predict_with_report(system, [r.text for r in records])
    metrics = score([r.text for r in records], [r.spans for r in records], predictions, tolerances or [1, 3], 0.5, bootstrap, 0, unlocated)
    out = out or Path(run) / "eval" / resolve_data_path(data).stem
    extra = {
        "data": str(data),
        "seconds": round(timing["seconds"], 2),
        "windows": timing["windows"],
        "label_map_applied": label_map,
        "spans_of_other_labels_ignored": dict(report.spans_other_labels),
        "hallucinated": timing.get("hallucinated", []),
    }
    write_predictions(out / "predictions.jsonl", records, predictions)
    write_metrics(out, metrics, f"{Path(run).name} on {data}", extra)
    return metrics, out


def summary_line(metrics: dict) -> str:
    s = metrics["summary"]
    return json.dumps({k: s[k] for k in ("span_precision", "span_recall", "span_f1", "jaccard_recall", "boundary_both_recall") if k in s})
