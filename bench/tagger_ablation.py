"""Inference-side ablations of a trained tagger on dev: decoding (argmax vs viterbi) and checkpoint averaging.

    .venv/bin/python bench/tagger_ablation.py RUN --data ../shared/data/ncbi_disease/dev.jsonl \
        [--average-last K] [--repeat 3] [--out FILE.json]

Each system runs the toolkit's own Tagger (windows, stitching, decoding) and scorer. Logits are computed
once per model; decoding is timed apart (median of --repeat). Rows: the saved model with argmax and with
viterbi decoding; with --average-last K also the mean of the run's last K checkpoints (what
`train.average_checkpoints: K` saves), both decodings. Every row carries span P/R/F1 with bootstrap 95%
CIs over documents, and its paired-bootstrap F1 difference from the first row on the same resamples.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.evaluate.metrics import document_counts, paired_bootstrap, score  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer.tagger import Tagger  # noqa: E402
from toolkit.rundir import open_run, records_for  # noqa: E402
from toolkit.tasks.optimization import average_checkpoints, last_checkpoints  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--data", required=True)
    parser.add_argument("--average-last", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    machine = benchmark_header()
    run = open_run(args.run)
    records = records_for(run, args.data)
    texts, golds = [r.text for r in records], [r.spans for r in records]

    tagger = Tagger.load(run)
    models = [("saved model", tagger)]
    if args.average_last:
        chosen = last_checkpoints(run.path / "checkpoints", args.average_last)
        averaged = Tagger.load(run)
        averaged.model.load_state_dict(average_checkpoints(chosen), strict=True)
        models.append((f"mean of {', '.join(c.name for c in chosen)}", averaged))

    rows, first_counts = [], None
    for name, model in models:
        windows = model.windows(texts)
        started = time.perf_counter()
        logits = model.logits(windows, 32)
        forward = time.perf_counter() - started
        for decoding in ("argmax", "viterbi"):
            model.space = replace(model.space, decoding=decoding)
            seconds = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                preds = model.decode(texts, windows, logits)
                seconds.append(time.perf_counter() - started)
            m = score(texts, golds, preds, bootstrap=args.bootstrap, seed=0)
            counts = document_counts(texts, golds, preds)
            first_counts = first_counts or counts
            diff = paired_bootstrap(counts, first_counts, [1, 3], args.bootstrap, 0)["span_f1"]
            s, ci = m["summary"], m["ci95"]
            rows.append(
                {
                    "system": f"{name}, {decoding}",
                    "span_f1": s["span_f1"],
                    "span_f1_ci95": ci["span_f1"],
                    "span_precision": s["span_precision"],
                    "span_precision_ci95": ci["span_precision"],
                    "span_recall": s["span_recall"],
                    "span_recall_ci95": ci["span_recall"],
                    "f1_minus_first_row": diff,
                    "forward_seconds": round(forward, 2),
                    "decode_seconds_median": round(statistics.median(seconds), 3),
                    "errors": {k: v["count"] for k, v in m["errors"]["kinds"].items()},
                }
            )
    report = {
        "cpu": f"{machine['cpu']}; {' '.join(machine['cpu_flags'])}",
        "run": str(args.run),
        "data": args.data,
        "documents": len(texts),
        "rows": rows,
    }
    print(f"CPU: {report['cpu']}\n{args.run} on {args.data} ({len(texts)} documents)\n")
    print(
        "| system | span F1 (95% CI) | P | R | F1 - first row (95% CI) | forward s | decode s | split / FP / missed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        d, e = r["f1_minus_first_row"], r["errors"]
        print(
            f"| {r['system']} | {r['span_f1']:.4f} ({r['span_f1_ci95'][0]:.3f}-{r['span_f1_ci95'][1]:.3f}) | "
            f"{r['span_precision']:.4f} | "
            f"{r['span_recall']:.4f} | {d['difference']:+.4f} ({d['ci95'][0]:+.3f} to {d['ci95'][1]:+.3f}) | "
            f"{r['forward_seconds']} | "
            f"{r['decode_seconds_median']} | {e['split span']} / {e['false positive']} / {e['missed']} |"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
