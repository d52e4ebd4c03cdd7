"""The matmul peaks of this CPU on 2 threads, fp32 and int8, in each runtime an export path runs on.

    .venv/bin/python bench/cpu_peaks.py [--sizes 512 1024 2048] [--out bench/out/cpu_peaks.json]

What an export path's speed is judged against: its precision's peak in its own runtime, on this CPU kind.
- PyTorch: `torch.mm` (fp32) and `torch._int_mm` (int8 x int8 -> int32);
- ONNX Runtime: one `MatMul` (fp32) and one `MatMulInteger` (uint8 activations x int8 weights -> int32, what
  `onnx_int8`'s dynamic quantization runs), the weights a constant initializer;
- OpenVINO: one `MatMul` (fp32) and the same behind `FakeQuantize` on both inputs (uint8 activations, int8
  weights), which OpenVINO's low-precision transformations run as an int8 matmul (what `openvino_int8` runs).
Square matrices of each size; each rate is the best size's median of 7 calls after 2 warm-up calls, in
GFLOP/s (int8: GOP/s, 2 operations a multiply-add). Prints and writes the CPU's model and flags and the
instruction-set caps in force (`ONEDNN_MAX_CPU_ISA`, `MKL_ENABLE_INSTRUCTIONS`: PyTorch honours them; OpenVINO
does not compile a model under ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU, and ONNX Runtime has no such cap, so
a capped run measures PyTorch only). Run it alone: a busy core changes the figures several-fold.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.hardware import benchmark_header  # noqa: E402

THREADS = 2
CAPS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def rate(call: Callable[[], object], n: int) -> float:
    """GFLOP/s (GOP/s) of an n x n x n matmul: the median of 7 timed calls after 2 warm-up calls."""
    for _ in range(2):
        call()
    times = []
    for _ in range(7):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return 2 * n**3 / statistics.median(times) / 1e9


# The precisions this script reports. Each runtime's builder makes only the calls it is asked for (a caller that
# wants one peak does not allocate or compile the others); PyTorch also builds bf16, predict_peak's bf16 peak.
PRECISIONS = ("fp32", "int8")


def torch_calls(n: int, precisions: tuple[str, ...] = PRECISIONS) -> dict[str, Callable[[], object]]:
    import torch

    def build(precision: str) -> Callable[[], object]:
        if precision == "int8":
            qa, qb = (torch.randint(-100, 100, (n, n), dtype=torch.int8) for _ in range(2))
            return lambda: torch._int_mm(qa, qb)
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        return lambda: torch.mm(a, b)

    return {p: build(p) for p in precisions}


def onnxruntime_calls(n: int, precisions: tuple[str, ...] = PRECISIONS) -> dict[str, Callable[[], object]]:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def session(node: str, a_type: int, weights: np.ndarray, extra: list) -> ort.InferenceSession:
        graph = helper.make_graph(
            [helper.make_node(node, ["a", "w", *[e.name for e in extra]], ["y"])],
            node,
            [helper.make_tensor_value_info("a", a_type, [n, n])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT if node == "MatMul" else TensorProto.INT32, [n, n])],
            initializer=[numpy_helper.from_array(weights, "w"), *extra],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def build(precision: str) -> Callable[[], object]:
        if precision == "fp32":
            fp32 = session("MatMul", TensorProto.FLOAT, rng.standard_normal((n, n), dtype=np.float32), [])
            a = {"a": rng.standard_normal((n, n), dtype=np.float32)}
            return lambda: fp32.run(None, a)
        zero_points = [
            numpy_helper.from_array(np.array(128, np.uint8), "az"),
            numpy_helper.from_array(np.array(0, np.int8), "wz"),
        ]
        weights = rng.integers(-100, 100, (n, n), dtype=np.int8)
        int8 = session("MatMulInteger", TensorProto.UINT8, weights, zero_points)
        qa = {"a": rng.integers(0, 255, (n, n), dtype=np.uint8)}
        return lambda: int8.run(None, qa)

    return {p: build(p) for p in precisions}


def openvino_calls(n: int, precisions: tuple[str, ...] = PRECISIONS) -> dict[str, Callable[[], object]]:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}

    def compiled(quantized: bool):
        a = ops.parameter([n, n], np.float32, name="a")
        w = ops.constant(rng.standard_normal((n, n)).astype(np.float32))
        x, y = a, w
        if quantized:  # uint8 activations, int8 weights: the pattern NNCF writes for openvino_int8
            lo, hi = ops.constant(np.float32(-4.0)), ops.constant(np.float32(4.0))
            x = ops.fake_quantize(a, lo, hi, lo, hi, 256)
            wlo, whi = ops.constant(np.float32(-4.0)), ops.constant(np.float32(4.0))
            y = ops.fake_quantize(w, wlo, whi, wlo, whi, 255)
        model = ov.Model([ops.matmul(x, y, False, False)], [a])
        return core.compile_model(model, "CPU", config).create_infer_request()

    feed = {"a": rng.standard_normal((n, n)).astype(np.float32)}
    requests = {p: compiled(p == "int8") for p in precisions}
    return {p: (lambda r=r: r.infer(feed)) for p, r in requests.items()}


RUNTIMES = {"pytorch": torch_calls, "onnxruntime": onnxruntime_calls, "openvino": openvino_calls}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048])
    parser.add_argument("--runtimes", nargs="*", default=list(RUNTIMES), choices=list(RUNTIMES))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "cpu_peaks.json")
    args = parser.parse_args()
    machine = benchmark_header()
    caps = {k: os.environ[k] for k in CAPS if k in os.environ}
    print(f"instruction-set caps: {caps or 'none'}", flush=True)
    if caps and set(args.runtimes) - {"pytorch"}:
        # A figure labelled capped that ran uncapped would be worse than none.
        print("capped: measuring PyTorch only (OpenVINO and ONNX Runtime do not honour the caps)", flush=True)
        args.runtimes = ["pytorch"]
    import torch

    torch.set_num_threads(THREADS)  # as the other runtimes are given
    peaks: dict[str, dict] = {}
    for runtime in args.runtimes:
        for n in args.sizes:
            for precision, call in RUNTIMES[runtime](n).items():
                gflops = rate(call, n)
                key = f"{runtime} {precision}"
                if gflops > peaks.get(key, {}).get("gflops", 0.0):
                    peaks[key] = {"runtime": runtime, "precision": precision, "gflops": round(gflops, 1), "size": n}
                print(json.dumps({"runtime": runtime, "precision": precision, "size": n, "gflops": round(gflops, 1)}))
    for runtime in args.runtimes:
        fp32, int8 = peaks.get(f"{runtime} fp32"), peaks.get(f"{runtime} int8")
        if fp32 and int8:
            int8["over_fp32"] = round(int8["gflops"] / fp32["gflops"], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {**machine, "caps": caps, "threads": THREADS, "sizes": args.sizes, "peaks": peaks}
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
