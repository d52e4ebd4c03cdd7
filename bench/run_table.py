"""Markdown table of finished runs' dev figures, read from their metrics.json (nothing is re-scored), for
docs/benchmarks.md. With --curve, each run's dev evaluations during training (train_log.jsonl).

    .venv/bin/python bench/run_table.py runs/cuad80_segments_mlm runs/cuad80_segments_linear [--curve]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolkit.rundir import read_metrics

COLUMNS = [
    ("Jaccard P", lambda m: m["summary"]["jaccard_precision"]),
    ("Jaccard R", lambda m: m["summary"]["jaccard_recall"]),
    ("Jaccard F1", lambda m: m["summary"]["jaccard_f1"]),
    ("exact both-ends R", lambda m: m["summary"]["boundary_both_recall"]),
    ("+/-3 words", lambda m: m["summary"].get("boundary_both_within_3_recall")),
    ("macro AUPR", lambda m: m.get("ranking", {}).get("macro", {}).get("aupr")),
    ("AUPR 95% CI", lambda m: m.get("ranking", {}).get("ci95", {}).get("macro_aupr")),
    ("P@80R", lambda m: m.get("ranking", {}).get("macro", {}).get("precision_at_80_recall")),
    ("P@90R", lambda m: m.get("ranking", {}).get("macro", {}).get("precision_at_90_recall")),
    ("F1 at 0.5", lambda m: m.get("at_default_threshold", {}).get("jaccard_f1")),
    ("train s", lambda m: m["run"].get("train_seconds")),
    ("of which eval s", lambda m: m["run"].get("evaluation_seconds_during_training")),
]
CURVE = [
    "jaccard_f1",
    "jaccard_precision",
    "jaccard_recall",
    "macro_aupr",
    "tuned_jaccard_f1",
    "tuned_jaccard_precision",
    "tuned_jaccard_recall",
]


def _cell(value, seconds: bool = False) -> str:
    if value is None:
        return ""
    if seconds:
        return f"{value:,.1f}"
    if isinstance(value, list):
        return "-".join(f"{v:.3f}" for v in value)
    return (
        f"{value:.3f}"
        if isinstance(value, float) and value < 10
        else f"{value:,.0f}"
        if isinstance(value, (int, float))
        else str(value)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--curve", action="store_true", help="also print each run's dev evaluations during training")
    args = parser.parse_args()
    print("| run | " + " | ".join(name for name, _ in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for run in args.runs:
        saved = read_metrics(run)
        if saved is None:
            raise SystemExit(f"{run}: no metrics.json (not a finished run)")
        metrics = saved.model_dump(exclude_unset=True)
        print(f"| {run.name} | " + " | ".join(_cell(get(metrics), name.endswith(" s")) for name, get in COLUMNS) + " |")
    if args.curve:
        for run in args.runs:
            log = run / "train_log.jsonl"
            evals = (
                [e for e in map(json.loads, log.read_text(encoding="utf-8").splitlines()) if "eval_loss" in e]
                if log.is_file()
                else []
            )
            if not evals:
                continue
            keys = [k for k in CURVE if any(f"eval_{k}" in e for e in evals)]  # later stages may log more
            print(f"\n{run.name}\n\n| step | epoch | stage | " + " | ".join(keys) + " |")
            print("|---" * (len(keys) + 3) + "|")
            for e in evals:
                print(
                    f"| {e['step']} | {e['epoch']:.2f} | {e.get('stage', '')} | "
                    + " | ".join(_cell(e.get(f"eval_{k}")) for k in keys)
                    + " |"
                )


if __name__ == "__main__":
    main()
