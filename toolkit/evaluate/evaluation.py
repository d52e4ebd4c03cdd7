"""`toolkit eval`: score a trained run or artifact on any span file with the one scorer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from toolkit.data.records import resolve_data_path
from toolkit.evaluate.ranking import ranking_metrics, sweep_metrics
from toolkit.evaluate.reporting import write_metrics, write_predictions
from toolkit.evaluate.scorer import score
from toolkit.evaluate.thresholds import threshold_counts
from toolkit.infer import load_predictor, predict_with_report
from toolkit.infer.decisions import SegmentDecisions
from toolkit.rundir import PREDICTIONS_FILE, open_run, records_for
from toolkit.scoring_defaults import SCORING


def evaluate_run(
    path: Path,
    data: str,
    out: Path | None = None,
    bootstrap: int = SCORING.bootstrap,
    tolerances: list[int] | None = None,
    jaccard_threshold: float | None = None,
) -> tuple[dict, Path]:
    """Score a trained run on any span file; writes metrics.json, report.md, predictions.jsonl. The Jaccard
    threshold is the one the run was scored with (its eval.jaccard_threshold) unless given."""
    run = open_run(path)
    predictor = load_predictor(run)
    jaccard = jaccard_threshold or run.jaccard_threshold
    tolerances = tolerances or list(SCORING.boundary_tolerance)
    other: Counter = Counter()
    records = records_for(run, data, other=other)
    texts, golds = [r.text for r in records], [r.spans for r in records]
    if isinstance(predictor, SegmentDecisions):
        # A segment model's curve: its decisions at every threshold of the grid, from one scoring pass.
        scores = predictor.score(texts)
        predictions, unlocated, timing = predictor.spans_at(scores), [[] for _ in texts], predictor.last_report
        counts = threshold_counts(
            texts,
            golds,
            scores.segments,
            scores.probabilities,
            run.labels,
            jaccard_threshold=jaccard,
            starts=scores.starts,
        )
        ranking = sweep_metrics(counts, run.labels, bootstrap, 0, jaccard)
    else:
        predictions, unlocated, timing = predict_with_report(predictor, texts)
        ranking = ranking_metrics(texts, golds, predictions, run.labels, jaccard, bootstrap, 0)
    metrics = score(texts, golds, predictions, tolerances, jaccard, bootstrap, 0, unlocated)  # counts the contentless
    metrics["ranking"] = ranking
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
    return json.dumps(
        {
            k: s[k]
            for k in ("span_precision", "span_recall", "span_f1", "jaccard_recall", "boundary_both_recall")
            if k in s
        }
    )
