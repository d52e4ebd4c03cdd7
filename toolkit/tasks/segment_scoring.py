"""The last step of every segment model (the encoder flow's and the linear baseline's): predict dev,
choose per-label thresholds and save them with the model, and score with thresholds cross-fitted over
two halves of dev and CUAD's ranking metrics over the threshold sweep."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from toolkit.config import Recipe
from toolkit.data.schema import SpanRecord
from toolkit.evaluate.metrics import score
from toolkit.evaluate.ranking import sweep_metrics
from toolkit.evaluate.reporting import write_predictions
from toolkit.evaluate.thresholds import choose_from_counts, cross_fitted_from_counts, threshold_counts
from toolkit.infer.segmenter import DEFAULT_THRESHOLD
from toolkit.rundir import META_FILE, MODEL_DIR, PREDICTIONS_FILE
from toolkit.spans.decoding import PredictedSpan


def sweep_and_cross_fit(classifier, texts: list[str], golds: list, labels: list[str]) -> tuple[np.ndarray, list[list[PredictedSpan]]]:
    """For the documents `classifier` last predicted: their threshold counts (the sweep the ranking metrics
    and threshold choice read) and their spans at thresholds cross-fitted over two halves of them."""
    counts = threshold_counts(texts, golds, classifier.last_segments, classifier.last_probabilities, labels)
    return counts, classifier.spans_at(texts, cross_fitted_from_counts(counts, DEFAULT_THRESHOLD))


def score_segment_model(recipe: Recipe, run_dir: Path, classifier, dev_records: list[SpanRecord], labels: list[str]) -> tuple[dict, dict]:
    """Every segment model's last step (the encoder's and the linear baseline's): predict dev, choose
    per-label thresholds on it and save them with the model, and score predictions made at thresholds
    cross-fitted over two halves of dev, with CUAD's ranking metrics over the threshold sweep."""
    texts, golds = [r.text for r in dev_records], [r.spans for r in dev_records]
    fixed = classifier.predict(texts, recipe.train.eval_batch_size)
    counts, crossed = sweep_and_cross_fit(classifier, texts, golds, labels)
    if recipe.segments.thresholds == "tuned":
        thresholds = choose_from_counts(counts, DEFAULT_THRESHOLD)
    else:
        thresholds, crossed = [DEFAULT_THRESHOLD] * len(labels), fixed
    # The thresholds travel with the model: eval, export and the service apply them.
    meta_path = run_dir / MODEL_DIR / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["thresholds"] = thresholds
    meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    e = recipe.eval
    metrics = score(texts, golds, crossed, e.boundary_tolerance, e.jaccard_threshold, e.bootstrap, recipe.seed)
    metrics["ranking"] = sweep_metrics(counts, labels, e.bootstrap, recipe.seed, e.jaccard_threshold)
    metrics["at_default_threshold"] = score(texts, golds, fixed, e.boundary_tolerance, e.jaccard_threshold, 0, recipe.seed)["summary"]
    metrics["thresholds"] = dict(zip(labels, thresholds))
    write_predictions(run_dir / PREDICTIONS_FILE, dev_records, crossed)
    return metrics, {
        "eval_seconds": round(classifier.last_report["seconds"], 1),
        "dev_thresholds": "cross-fitted over two halves of dev" if recipe.segments.thresholds == "tuned" else f"fixed at {DEFAULT_THRESHOLD}",
    }
