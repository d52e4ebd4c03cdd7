"""Decoding modes of a span-generation run: constrained or free, fp32 or bf16 weights, the prompts' shared
prefix read once (its KV cache reused) or with every prompt (`-whole`), prompts per batch as the run's recipe
sets them or N (`-bN`, e.g. constrained-bf16-b32).

    .venv/bin/python bench/decode_bench.py RUN [--data sample:contracts_dev] [--max-docs N] [--repeat 3]
        [--modes constrained-fp32,constrained-bf16,free-fp32,free-bf16,constrained-bf16-whole]

Runs the run's SpanGenerator (its selector and completion format included) over the same documents,
alternating modes, and prints per mode: median seconds per document and generated tokens/s, the scores
(one scorer: recall, precision, boundary recall within +/-3 words), hallucinated spans and malformed
lines, and whether its spans are identical to the first mode's (parity). bf16 modes are skipped on a
machine without bf16 units.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.evaluate.scorer import score  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer.generator import SpanGenerator  # noqa: E402
from toolkit.rundir import open_run, records_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--data", default="sample:contracts_dev")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-docs", type=int, default=None)
    parser.add_argument("--modes", default="constrained-fp32,constrained-bf16,free-fp32,free-bf16")
    args = parser.parse_args()
    machine = benchmark_header()
    run = open_run(args.run)
    generators = {p: SpanGenerator.load(run, precision=p) for p in ("fp32", "prefer_bf16")}
    records = records_for(run, args.data, args.max_docs)
    texts, golds = [r.text for r in records], [r.spans for r in records]
    modes = [m for m in args.modes.split(",") if "bf16" not in m or machine["bf16"]]
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    speeds: dict[str, list[float]] = {m: [] for m in modes}
    results: dict[str, dict] = {}
    reference = None
    for _ in range(args.repeat):
        for mode in modes:
            decoding, precision, *options = mode.split("-")
            gen = generators["prefer_bf16" if precision == "bf16" else "fp32"]
            gen.reuse_prefix = "whole" not in options
            batch = next((int(o[1:]) for o in options if o.startswith("b")), None)
            started = time.perf_counter()
            preds = gen.predict(texts, constrained=decoding == "constrained", batch_size=batch)
            seconds[mode].append((time.perf_counter() - started) / max(1, len(texts)))
            rep = gen.last_report
            speeds[mode].append(rep["generated_tokens_per_second"])
            keys = [[(s.start, s.end, s.label) for s in doc] for doc in preds]
            reference = keys if reference is None else reference
            unlocated = [[h["label"] for h in rep["hallucinated"] if h["doc"] == i] for i in range(len(texts))]
            s = score(texts, golds, preds, [3], bootstrap=0, unlocated=unlocated)["summary"]
            results[mode] = {
                "span_recall": s["span_recall"],
                "span_precision": s["span_precision"],
                "boundary_both_within_3_recall": s["boundary_both_within_3_recall"],
                "jaccard_recall": s["jaccard_recall"],
                "predicted_spans": sum(len(d) for d in preds),
                "hallucinated_spans": rep["hallucinated_spans"],
                "malformed_lines": rep["malformed_lines"],
                "truncated_outputs": rep["truncated_outputs"],
                "generated_tokens": rep["generated_tokens"],
                "windows_read": rep["windows_read"],
                "windows": rep["windows"],
                "documents_with_spans_equal_to_first_mode": sum(a == b for a, b in zip(keys, reference)),
            }
    print(
        json.dumps(
            {
                "cpu": f"{machine['cpu']}; {' '.join(machine['cpu_flags'])}",
                "run": str(args.run),
                "target": generators["fp32"].spec.target,
                "data": args.data,
                "documents": len(texts),
                "repeat": args.repeat,
                "seconds_per_document_median": {m: round(statistics.median(v), 2) for m, v in seconds.items()},
                "generated_tokens_per_second_median": {m: statistics.median(v) for m, v in speeds.items()},
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
