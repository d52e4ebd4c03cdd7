"""OpenVINO tagger artifacts on static shapes against one dynamic model, and the padding multiple, on this machine.

    .venv/bin/python bench/openvino_shapes.py ARTIFACT --data ../shared/data/ncbi_disease/dev.jsonl [--rounds 3]

Loads the artifact once per variant: `dynamic` (every shape on one model, as artifacts exported before
static shapes ran), `static` (a model compiled per padded width, as exported now), each at padding multiples
32 and 64. For each: load and warm-up seconds (every width a trained window can take compiled on one stream
and on the streams), the process's unique memory after the warm-up and after traffic, span F1 on the data,
and single-document latency. Documents go one per call, each document through every variant in turn, so a
drifting host moves all variants alike; the figure is the median of the per-document ratios against the
first variant. Run it alone: a busy core changes the figures several-fold.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.evaluate.metrics import score  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer import load_predictor  # noqa: E402
from toolkit.rundir import open_run, records_for  # noqa: E402

VARIANTS = {  # name -> (static_max_width, pad_multiple)
    "dynamic, pad 32": (0, 32),
    "dynamic, pad 64": (0, 64),
    "static, pad 32": (512, 32),
    "static, pad 64": (512, 64),
}


def unique_mib() -> float:
    import psutil

    return psutil.Process().memory_full_info().uss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--data", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    machine = benchmark_header()
    records = records_for(open_run(args.artifact), args.data, None)
    texts = [r.text for r in records]
    load_predictor(args.artifact)  # imports and the tokenizer paid once, outside every variant's memory
    taggers, rows = {}, {}
    for name, (static_max_width, pad_multiple) in VARIANTS.items():
        gc.collect()
        before = unique_mib()
        started = time.perf_counter()
        tagger = load_predictor(args.artifact)
        tagger.model.static_max_width, tagger.model.pad_multiple = static_max_width, pad_multiple
        loaded = time.perf_counter()
        tagger.warm_up()
        warm = time.perf_counter()
        spans = [tagger.predict([text])[0] for text in texts]  # a pass that also compiles any shape left
        f1 = score(texts, [r.spans for r in records], spans, bootstrap=0)["summary"]["span_f1"]
        rows[name] = {
            "load_s": round(loaded - started, 2),
            "warm_up_s": round(warm - loaded, 2),
            "compiled_shapes": len(tagger.model._requests),
            "mib_after_warm_up_and_traffic": round(unique_mib() - before),
            "span_f1": round(f1, 4),
        }
        taggers[name] = tagger
        print(name, rows[name], flush=True)
    seconds: dict[str, list[float]] = {name: [] for name in taggers}
    for _ in range(args.rounds):
        for text in texts:
            for name, tagger in taggers.items():
                started = time.perf_counter()
                tagger.predict([text])
                seconds[name].append(time.perf_counter() - started)
    first = next(iter(seconds))
    print(f"\nCPU: {machine['cpu']}; flags: {' '.join(machine['cpu_flags'])}")
    print(f"artifact: {args.artifact}, {len(texts)} documents x {args.rounds} rounds, one per call\n")
    print("| variant | p50 ms | docs/s | speed vs first (median per document) | shapes | load + warm-up s | MiB | F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, times in seconds.items():
        ratio = statistics.median(a / b for a, b in zip(seconds[first], times))
        row = rows[name]
        print(
            f"| {name} | {1000 * statistics.median(times):.1f} | {len(times) / sum(times):.1f} | {ratio:.3f} | "
            f"{row['compiled_shapes']} | {row['load_s']} + {row['warm_up_s']} | {row['mib_after_warm_up_and_traffic']}"
            f" | {row['span_f1']:.4f} |"
        )


if __name__ == "__main__":
    main()
