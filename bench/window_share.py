"""Each export path's share of its precision's matmul peak in its own runtime, on 256-token windows.

    .venv/bin/python bench/window_share.py ARTIFACT [ARTIFACT ...] [--rounds 3] [--out bench/out/window_share.json]

Per artifact (one export path each, `toolkit export --precision PATH`): the model call alone (`Tagger.logits`,
no tokenizing or decoding) on one 256-token window (what one short request costs) and on 16 of them (what a
batch of `toolkit predict` or the service's batcher sends), the median of 15 calls after 3 warm-up calls, per
round. Work per window: 2 x parameters outside the embeddings per token plus the attention products
(`predict_peak.window_flops`). The peak is the path's runtime and precision in `cpu_peaks.py`, measured in the
same run, each round (`PEAK_SIZES`). Reports each path's median GFLOP/s over rounds and its share of the
best round's peak. Run it alone: a busy core changes the figures several-fold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cpu_peaks import RUNTIMES, THREADS, rate  # noqa: E402
from predict_peak import _parameters_outside_embeddings, window_flops  # noqa: E402

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer import load_predictor  # noqa: E402
from toolkit.spans.streaming import stream_windows  # noqa: E402

TOKENS = 256
# Square matmul sizes whose best rate is the peak: 512 is cache-resident as a window's own products are.
PEAK_SIZES = (512, 1024, 2048)
BATCH = 16
# export path -> (cpu_peaks runtime, precision)
PEAK_OF = {
    "onnx_fp32": ("onnxruntime", "fp32"),
    "onnx_fused": ("onnxruntime", "fp32"),
    "onnx_int8": ("onnxruntime", "int8"),
    "openvino_fp32": ("openvino", "fp32"),
    "openvino_int8": ("openvino", "int8"),
    "pytorch_fp32": ("pytorch", "fp32"),
}
TEXT = "Either party may terminate this Agreement on thirty days written notice to the other party. "


def median_seconds(call, calls: int = 15, warm: int = 3) -> float:
    for _ in range(warm):
        call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def peak(runtime: str, precision: str) -> float:
    return max(rate(RUNTIMES[runtime](n, (precision,))[precision], n) for n in PEAK_SIZES)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("artifacts", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "window_share.json")
    args = parser.parse_args()
    machine = benchmark_header()
    import torch
    from transformers import AutoConfig

    torch.set_num_threads(THREADS)  # the peaks' threads, for the PyTorch path and its peak alike

    paths = {}
    for artifact in args.artifacts:
        predictor = load_predictor(artifact)
        path = predictor.meta.export.path
        if path not in PEAK_OF:
            raise SystemExit(f"{artifact}: path {path} has no peak here; paths: {', '.join(PEAK_OF)}")
        config = AutoConfig.from_pretrained(artifact)
        # A 256-token window whatever the run's max_length: the unit of work (the model has 512 positions).
        window = next(stream_windows(predictor.tokenizer, TEXT * 40, TOKENS, 0))
        flops = sum(window_flops(config, _parameters_outside_embeddings(artifact, config), TOKENS))
        paths[path] = {"artifact": str(artifact), "predictor": predictor, "window": window, "gflop": flops / 1e9}
    rounds = []
    for k in range(args.rounds):
        row, peaks = {}, {}
        for path, p in paths.items():
            logits, window = p["predictor"].logits, p["window"]
            one = median_seconds(lambda: logits([window]))  # noqa: B023 - called before the loop moves on
            batch = median_seconds(lambda: logits([window] * BATCH, BATCH))  # noqa: B023
            if PEAK_OF[path] not in peaks:  # onnx_fp32 and onnx_fused share one
                peaks[PEAK_OF[path]] = peak(*PEAK_OF[path])
            top = peaks[PEAK_OF[path]]
            row[path] = {
                "one_window_ms": round(one * 1000, 2),
                "batch_ms": round(batch * 1000, 2),
                "gflops_one": round(p["gflop"] / one, 1),
                "gflops_batch": round(p["gflop"] * BATCH / batch, 1),
                "peak_gflops": round(top, 1),
            }
            print(json.dumps({"round": k, "path": path, **row[path]}), flush=True)
        rounds.append(row)
    summary = {}
    for path, p in paths.items():
        rows = [r[path] for r in rounds]
        summary[path] = {
            "artifact": p["artifact"],
            "gflop_per_window": round(p["gflop"], 3),
            "runtime": PEAK_OF[path][0],
            "precision": PEAK_OF[path][1],
            "one_window_ms": statistics.median(r["one_window_ms"] for r in rows),
            "batch_ms": statistics.median(r["batch_ms"] for r in rows),
            "gflops_one": statistics.median(r["gflops_one"] for r in rows),
            "gflops_batch": statistics.median(r["gflops_batch"] for r in rows),
            # A peak is a best case: each path's median rate over the best round's peak (a round's peak alone
            # moved by a fifth between rounds on a VM's cores).
            "peak_gflops": (best := max(r["peak_gflops"] for r in rows)),
            "share_one": round(statistics.median(r["gflops_one"] for r in rows) / best, 3),
            "share_batch": round(statistics.median(r["gflops_batch"] for r in rows) / best, 3),
            "peak_per_round": [r["peak_gflops"] for r in rows],
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {**machine, "tokens": TOKENS, "batch": BATCH, "rounds": args.rounds, "paths": summary}
    args.out.write_text(json.dumps(result, indent=1))
    for path, s in summary.items():
        print(f"{path}: {s['share_batch']:.0%} of its peak in batches of {BATCH}, {s['share_one']:.0%} alone")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
