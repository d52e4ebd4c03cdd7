"""Where one window's time goes in an exported OpenVINO tagger, against what the runtime's own matmuls reach here.

    .venv/bin/python bench/model_ceiling.py ARTIFACT [--width 256] [--rounds 3]

The share of the matmul peak that `bench/predict_peak.py` reports is lost in three places: outside the model
(tokenizing, decoding: its "streams, model only" mode), in the streams, and inside the model. This bench takes
the model apart on one thread, as one stream runs a window (a model compiled for [1, width], the artifact's
precision). Per round, alternating:

- the window's wall time and its work (the count `bench/predict_peak.py` uses: dense layers plus the
  attention products), and the time per window when two streams of one thread each run windows side by side,
  as `toolkit predict` runs them (compiled once with two streams, which OpenVINO places on both cores);
- OpenVINO's per-operator counters, grouped: the dense layers (FullyConnected), the fused attention subgraph
  (the one holding Softmax: QK^T, scaling, mask, softmax, AV), and everything else (LayerNorm, GELU, adds,
  quantize and transpose steps);
- an int8 FullyConnected alone at each of the model's dense shapes and at 2048^3, built as NNCF's graph has
  it (FakeQuantize on the input, int8 weights with a scale) and compiled like the artifact: the rate these
  shapes can reach here, one thread.

Prints medians: each group's share of the window's time and its rate, and the window's rate as a share of
the square FullyConnected. Run it alone: a busy core changes the figures several-fold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from predict_peak import _parameters_outside_embeddings, window_flops  # noqa: E402

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer.openvino_model import OPENVINO_FILE, PRECISION_HINTS  # noqa: E402
from toolkit.rundir import open_run  # noqa: E402

SQUARE = (2048, 2048, 2048)


def one_thread(core, model, precision: str, counters: bool = False):
    properties = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "NUM_STREAMS": 1}
    return core.compile_model(model, "CPU", {**properties, "INFERENCE_NUM_THREADS": 1, "PERF_COUNT": counters})


def int8_dense(m: int, k: int, n: int):
    """[m, k] x [k, n] as NNCF leaves a quantized dense layer: FakeQuantize (256 levels) on the input, int8
    weights converted and scaled per output channel; the CPU plugin runs it as an int8 FullyConnected."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([m, k], np.float32, name="x")
    limit = np.float32(4)
    quantized = ops.fake_quantize(x, -limit, limit, -limit, limit, 256)
    weights = ops.constant(np.random.default_rng(0).integers(-127, 127, (n, k), dtype=np.int8))
    scaled = ops.multiply(ops.convert(weights, np.float32), np.full((n, 1), 0.01, np.float32))
    return ov.Model([ops.matmul(quantized, scaled, False, True)], [x])


def two_streams_seconds(core, graph, precision: str, feeds, calls: int = 40) -> float:
    """Median over 5 timings of the seconds per window when `calls` windows run on two streams."""
    import openvino as ov

    properties = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "NUM_STREAMS": 2}
    queue = ov.AsyncInferQueue(core.compile_model(graph, "CPU", {**properties, "INFERENCE_NUM_THREADS": 2}), 2)
    times = []
    for _ in range(6):
        started = time.perf_counter()
        for _ in range(calls):
            queue.start_async(feeds)
        queue.wait_all()
        times.append((time.perf_counter() - started) / calls)
    return statistics.median(times[1:])  # the first timing warms the second stream


def median_seconds(request, feeds, work: float) -> float:
    """Median of 5 timings of back-to-back calls, each timing about 2 G of work."""
    request.infer(feeds)
    reps = max(3, int(2e9 / work))
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(reps):
            request.infer(feeds)
        times.append((time.perf_counter() - started) / reps)
    return statistics.median(times)


def fused_layers(compiled) -> dict[str, str]:
    """Each executed node's name -> the names of the original layers fused into it."""
    fused = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "originalLayersNames" in info:
            fused[op.get_friendly_name()] = info["originalLayersNames"].astype(str)
    return fused


def grouped_counters(request, fused: dict[str, str]) -> dict[str, float]:
    """Seconds per group in the request's last call: dense, attention, other."""
    groups = {"dense layers": 0.0, "attention subgraph": 0.0, "other": 0.0}
    for counter in request.profiling_info:
        if counter.status != counter.Status.EXECUTED:
            continue
        if counter.node_type.startswith("FullyConnected"):
            group = "dense layers"
        elif "Softmax" in fused.get(counter.node_name, ""):
            group = "attention subgraph"
        else:
            group = "other"
        groups[group] += counter.real_time.total_seconds()
    return groups


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    machine = benchmark_header()

    import numpy as np
    import openvino as ov
    from transformers import AutoConfig

    run = open_run(args.artifact)
    if run.runtime != "openvino":
        raise SystemExit(f"{args.artifact}: runtime {run.runtime!r}; this bench takes an OpenVINO artifact apart")
    precision = run.meta.export.precision
    config = AutoConfig.from_pretrained(args.artifact)
    width, hidden, inner = args.width, config.hidden_size, config.intermediate_size
    layers = config.num_hidden_layers
    dense_work, attention_work = window_flops(config, _parameters_outside_embeddings(args.artifact, config), width)
    work = {"dense layers": dense_work, "attention subgraph": attention_work, "other": 0.0}

    core = ov.Core()
    graph = core.read_model(str(args.artifact / OPENVINO_FILE))
    names = {port.get_any_name() for port in graph.inputs}
    graph.reshape({name: [1, width] for name in names})
    ids = np.random.default_rng(0).integers(1000, config.vocab_size, (1, width), dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feeds = {k: v for k, v in feeds.items() if k in names}
    window = one_thread(core, graph, precision)
    counted = one_thread(core, graph, precision, counters=True)
    window_request, counted_request = window.create_infer_request(), counted.create_infer_request()
    fused = fused_layers(counted)
    shapes = {"square": SQUARE, "q/k/v/output": (width, hidden, hidden)}
    shapes |= {"feed-forward in": (width, hidden, inner), "feed-forward out": (width, inner, hidden)}
    alone = {}
    for name, (m, k, n) in shapes.items():
        request = one_thread(core, int8_dense(m, k, n), precision).create_infer_request()
        alone[name] = (request, {0: np.random.default_rng(1).standard_normal((m, k), dtype=np.float32)}, 2 * m * k * n)

    window_seconds: list[float] = []
    streams_seconds: list[float] = []
    group_seconds: dict[str, list[float]] = {g: [] for g in work}
    rates: dict[str, list[float]] = {name: [] for name in shapes}
    for _ in range(args.rounds):
        window_seconds.append(median_seconds(window_request, feeds, dense_work + attention_work))
        streams_seconds.append(two_streams_seconds(core, graph, precision, feeds))
        per_call = []
        for _ in range(6):
            counted_request.infer(feeds)
            per_call.append(grouped_counters(counted_request, fused))
        per_call = per_call[1:]  # the first call after the others' runs warms the caches again
        for group in work:
            group_seconds[group].append(statistics.median(call[group] for call in per_call))
        for name, (request, inputs, flops) in alone.items():
            rates[name].append(flops / median_seconds(request, inputs, flops) / 1e9)

    square = statistics.median(rates["square"])
    seconds = statistics.median(window_seconds)
    total_work = dense_work + attention_work
    print(f"\nartifact: {args.artifact} ({run.meta.export.path}), one window of {width} tokens, one thread")
    print(f"model: {layers} layers, hidden {hidden}, feed-forward {inner}, {config.num_attention_heads} heads")
    print(f"window: {seconds * 1e3:.1f} ms, {total_work / 1e9:.2f} GOP, {total_work / seconds / 1e9:.0f} GOP/s")
    pair = statistics.median(streams_seconds)
    print(f"two streams side by side: {pair * 1e3:.1f} ms a window, {seconds / pair:.2f}x one thread's rate")
    print(f"int8 FullyConnected alone at {SQUARE[0]}^3: {square:.0f} GOP/s (one thread)\n")
    print("| part of the window | ms (counters) | share of the counted time | GOP | GOP/s |")
    print("|---|---|---|---|---|")
    counted_total = sum(statistics.median(v) for v in group_seconds.values())
    for group, flops in work.items():
        ms = statistics.median(group_seconds[group])
        rate = f"{flops / ms / 1e9:.0f}" if flops else "-"
        print(f"| {group} | {ms * 1e3:.1f} | {ms / counted_total:.0%} | {flops / 1e9:.2f} | {rate} |")
    print("\n| int8 FullyConnected alone | [m, k] x [k, n] | GOP/s | share of the square |")
    print("|---|---|---|---|")
    for name, (m, k, n) in shapes.items():
        rate = statistics.median(rates[name])
        print(f"| {name} | [{m}, {k}] x [{k}, {n}] | {rate:.0f} | {rate / square:.0%} |")
    print(f"\nthe window's rate as a share of the square FullyConnected: {total_work / seconds / 1e9 / square:.0%}")
    print(f"rounds: {args.rounds}; window ms per round: {', '.join(f'{s * 1e3:.1f}' for s in window_seconds)}")
    print(f"CPU: {machine['cpu']}; flags: {' '.join(machine['cpu_flags'])}")


if __name__ == "__main__":
    main()
