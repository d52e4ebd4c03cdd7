"""Constrained copy decoding vs free decoding: generated tokens/s and what each lets through.

    .venv/bin/python bench/decode_bench.py RUN [--data sample:contracts_dev] [--repeat 3]

Runs the run's SpanGenerator over the same documents, alternating modes, and prints the median
tokens/s of each, their ratio, and the scores (one scorer) of each mode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.evaluate.metrics import score  # noqa: E402
from toolkit.infer.generator import SpanGenerator  # noqa: E402
from toolkit.rundir import open_run, records_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--data", default="sample:contracts_dev")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-docs", type=int, default=None)
    args = parser.parse_args()
    run = open_run(args.run)
    gen = SpanGenerator.load(run)
    records = records_for(run, args.data, args.max_docs)
    texts = [r.text for r in records]
    speeds: dict[str, list[float]] = {"free": [], "constrained": []}
    results = {}
    for _ in range(args.repeat):
        for mode in ("free", "constrained"):
            preds = gen.predict(texts, constrained=mode == "constrained")
            rep = gen.last_report
            speeds[mode].append(rep["generated_tokens_per_second"])
            unlocated = [[h["label"] for h in rep["hallucinated"] if h["doc"] == i] for i in range(len(texts))]
            s = score(texts, [r.spans for r in records], preds, bootstrap=0, unlocated=unlocated)["summary"]
            results[mode] = {
                "span_f1": s["span_f1"],
                "span_recall": s["span_recall"],
                "span_precision": s["span_precision"],
                "hallucinated_spans": rep["hallucinated_spans"],
                "recovered_by": rep["recovered_by"],
                "generated_tokens": rep["generated_tokens"],
            }
    med = {m: statistics.median(v) for m, v in speeds.items()}
    print(
        json.dumps(
            {
                "data": args.data,
                "documents": len(texts),
                "repeat": args.repeat,
                "tokens_per_second_median": med,
                "constrained_over_free": round(med["constrained"] / med["free"], 3),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
