"""`toolkit predict` throughput: the local path against Ray Data on this machine, and the driver's ceiling.

    .venv/bin/python bench/predict_bench.py MODEL --data ../shared/data/ncbi_disease/dev.jsonl \
        [--engines local ray:1 ray:2 ray:1x2] [--repeat 3] [--out FILE.json]

Each engine predicts every document of --data into a fresh file (--repeat times; medians reported).
The first run of each engine includes starting Ray (`ray.init`); later runs reuse the instance, but each
run still starts its actors and loads the model in each (as every `toolkit predict` command does). Every engine's output
must equal the local path's, byte for byte.

The driver ceiling: on a cluster every row comes back to one driver, which writes OUT. Its rate
(prediction rows written per second, no model) bounds what N machines can reach.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer.collection import PredictionSink, predict_collection  # noqa: E402


def lscpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    keep = ("Model name", "CPU(s):", "Thread(s) per core", "Flags")
    return "\n".join(line for line in out.splitlines() if line.startswith(keep))


def driver_ceiling(sample_row: str, rows: int = 20_000) -> float:
    """Rows per second the driver writes through PredictionSink (JSON parse + dump + flush per row)."""
    with tempfile.TemporaryDirectory() as tmp:
        obj = json.loads(sample_row)
        sink = PredictionSink(Path(tmp) / "out.jsonl")
        started = time.perf_counter()
        for i in range(rows):
            sink.write(json.dumps({"kind": "prediction", **obj, "id": str(i)}))
        sink.close()
        return rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--engines", nargs="+", default=["local", "ray:1", "ray:2", "ray:1x2"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    print(lscpu())
    hardware = benchmark_header()
    documents = sum(1 for line in args.data.read_text().splitlines() if line.strip())
    results, reference = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines:
            # ray:A runs A actors of one CPU; ray:AxC runs A actors of C CPUs (and threads) each.
            kind, _, shape = engine.partition(":")
            actors, _, cpus = shape.partition("x")
            walls, cold = [], None
            for k in range(args.repeat):
                out = Path(tmp) / f"{engine.replace(':', '_')}_{k}.jsonl"
                started = time.perf_counter()
                if kind == "ray":
                    import ray

                    if ray.is_initialized() and k == 0:
                        ray.shutdown()  # each Ray engine starts its own instance: its cold start is measured
                    summary = predict_collection(
                        args.model,
                        [args.data],
                        out,
                        batch_size=args.batch_size,
                        ray_address="local",
                        ray_actors=int(actors),
                        ray_cpus_per_actor=int(cpus or 1),
                    )
                else:
                    summary = predict_collection(args.model, [args.data], out, batch_size=args.batch_size)
                wall = time.perf_counter() - started
                if k == 0:
                    cold = wall
                walls.append(wall)
                assert summary["predicted"] == documents and summary["failed"] == 0, summary
                text = out.read_text()
                reference = reference or text
                same = text == reference
                print(
                    f"{engine} run {k + 1}: {wall:.1f} s, {documents / wall:.2f} docs/s, output equal to local: {same}",
                    flush=True,
                )
                assert same, f"{engine}: output differs from the first engine's"
            warm = walls[1:] or walls
            results[engine] = {
                "documents": documents,
                "first_run_seconds": round(cold, 2),
                "median_seconds_after_first": round(statistics.median(warm), 2),
                "docs_per_second_after_first": round(documents / statistics.median(warm), 2),
                "runs_seconds": [round(w, 2) for w in walls],
            }
        ceiling = driver_ceiling(reference.splitlines()[0])
    print(f"\ndriver ceiling: {ceiling:,.0f} prediction rows written per second")
    print("\n| engine | first run s (incl. start) | median s after | docs/s after | vs local |")
    print("|---|---|---|---|---|")
    base = results.get("local", next(iter(results.values())))["docs_per_second_after_first"]
    for engine, r in results.items():
        print(
            f"| {engine} | {r['first_run_seconds']} | {r['median_seconds_after_first']} | "
            f"{r['docs_per_second_after_first']} | {r['docs_per_second_after_first'] / base:.2f}x |"
        )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "hardware": hardware,
                    "data": str(args.data),
                    "results": results,
                    "driver_rows_per_second": round(ceiling),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
