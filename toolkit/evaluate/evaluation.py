"""`toolkit eval`: score a trained run or artifact on any span file with the one scorer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from toolkit.data.records import resolve_data_path
from toolkit.evaluate.metrics import score
from toolkit.evaluate.ranking import ranking_metrics, sweep_metrics
from toolkit.evaluate.reporting import write_metrics, write_predictions
from toolkit.evaluate.thresholds import threshold_counts
from toolkit.infer import load_predictor, predict_with_report
from toolkit.infer.segmenter import SegmentDecisions
from toolkit.rundir import PREDICTIONS_FILE, open_run, records_for


def evaluate_run(path: Path, data: str, out: Path | None = None, bootstrap: int = 1000, tolerances: list[int] | None = None) -> tuple[dict, Path]:
    """Score a trained run on any span file; writes metrics.json, report.md, predictions.jsonl."""
    run = open_run(path)
    predictor = load_predictor(run)
    other: Counter = Counter()
    records = records_for(run, data, other=other)
    predictions, unlocated, timing = predict_with_report(predictor, [r.text for r in records])
    texts, golds = [r.text for r in records], [r.spans for r in records]
    metrics = score(texts, golds, predictions, tolerances or [1, 3], 0.5, bootstrap, 0, unlocated)
    if isinstance(predictor, SegmentDecisions):
        # A segment model's curve: its decisions at every threshold of the grid.
        counts = threshold_counts(texts, golds, predictor.last_segments, predictor.last_probabilities, run.labels)
        metrics["ranking"] = sweep_metrics(counts, run.labels, bootstrap, 0)
    else:
        metrics["ranking"] = ranking_metrics(texts, golds, predictions, run.labels, 0.5, bootstrap, 0)
    out = out or Path(path) / "eval" / resolve_data_path(data).stem
    extra = {
        "data": str(data),
        "seconds": round(timing["seconds"], 2),
        "windows": timing["windows"],
        "label_map_applied": run.label_map,
        "spans_of_other_labels_ignored": dict(other),
        "hallucinated": timing.get("hallucinated", []),
    }
    write_predictions(out / PREDICTIONS_FILE, records, predictions)
    write_metrics(out, metrics, f"{Path(path).name} on {data}", extra)
    return metrics, out


def summary_line(metrics: dict) -> str:
    s = metrics["summary"]
    return json.dumps({k: s[k] for k in ("span_precision", "span_recall", "span_f1", "jaccard_recall", "boundary_both_recall") if k in s})
