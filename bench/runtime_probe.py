"""Raw forward-pass speed of the candidate runtimes on one encoder, against the matmul work it does.

    .venv/bin/python bench/runtime_probe.py [--model minilm] [--repeat 30] [--shapes 1x128,1x256,1x512,16x256]

The model's token-classification graph (a fresh head: speed does not depend on the weights) is run by
PyTorch fp32, PyTorch under bf16 autocast, PyTorch with bf16 weights, ONNX Runtime fp32, and OpenVINO
fp32 and bf16, one shape at a time, each after a warm-up. For each: median milliseconds and the achieved
GFLOP/s, counting 2 x (parameters outside the embeddings) FLOPs per token plus the attention products
(4 x layers x hidden x tokens^2 per sequence). Runs alone (check the load first): a busy core changes the
figures several-fold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.hardware import benchmark_header  # noqa: E402


def flops(config, params_outside_embeddings: int, batch: int, tokens: int) -> float:
    dense = 2 * params_outside_embeddings * batch * tokens
    attention = 4 * config.num_hidden_layers * config.hidden_size * tokens * tokens * batch
    return dense + attention


def median_ms(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--shapes", default="1x128,1x256,1x512,16x256")
    args = parser.parse_args()
    machine = benchmark_header()
    import numpy as np
    import torch
    from optimum.exporters.onnx import main_export
    from transformers import AutoModelForTokenClassification

    from toolkit.infer.openvino_model import OpenVINOTokenClassifier, convert_onnx
    from toolkit.pretrained import resolve_model_name

    name = resolve_model_name(args.model)
    model = AutoModelForTokenClassification.from_pretrained(name, num_labels=3).eval()
    embeddings = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
    outside = sum(p.numel() for p in model.parameters()) - embeddings
    work = Path(tempfile.mkdtemp(prefix="runtime_probe."))
    model.save_pretrained(work / "pt")
    main_export(str(work / "pt"), output=work / "onnx", task="token-classification", no_post_process=True)
    import onnxruntime

    from toolkit.infer.backend import _session_options

    ort = onnxruntime.InferenceSession(str(work / "onnx" / "model.onnx"), _session_options())
    ort_inputs = {i.name for i in ort.get_inputs()}
    (work / "ov").mkdir()
    model.config.save_pretrained(work / "ov")
    convert_onnx(work / "onnx" / "model.onnx", work / "ov")
    ov = {p: OpenVINOTokenClassifier(work / "ov", p, torch.get_num_threads()) for p in ("fp32", "bf16")}
    bf16_model = AutoModelForTokenClassification.from_pretrained(work / "pt", torch_dtype=torch.bfloat16).eval()

    rows = []
    for shape in args.shapes.split(","):
        batch, tokens = map(int, shape.split("x"))
        ids = torch.randint(1000, 20000, (batch, tokens))
        mask = torch.ones_like(ids)
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": np.zeros_like(ids.numpy())}
        feeds = {k: v for k, v in feeds.items() if k in ort_inputs}

        def torch_call(m, autocast: bool, ids=ids, mask=mask):
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                return m(input_ids=ids, attention_mask=mask).logits

        paths = {
            "pytorch_fp32": lambda: torch_call(model, False),
            "pytorch_bf16_autocast": lambda: torch_call(model, True),
            "pytorch_bf16_weights": lambda: torch_call(bf16_model, False),
            "onnxruntime_fp32": lambda feeds=feeds: ort.run(None, feeds),
            "openvino_fp32": lambda ids=ids, mask=mask: ov["fp32"](ids, mask),
            "openvino_bf16": lambda ids=ids, mask=mask: ov["bf16"](ids, mask),
        }
        gflop = flops(model.config, outside, batch, tokens) / 1e9
        for path, call in paths.items():
            ms = median_ms(call, args.repeat)
            row = {"shape": shape, "path": path, "median_ms": round(ms, 2), "gflop_per_s": round(gflop / ms * 1e3)}
            rows.append(row)
            print(json.dumps(rows[-1]), flush=True)
    base = {r["shape"]: r["median_ms"] for r in rows if r["path"] == "pytorch_fp32"}
    print(
        f"\n{machine['cpu']}; torch threads {torch.get_num_threads()}; {args.model}: {outside / 1e6:.1f}M parameters "
        "outside the embeddings"
    )
    print("| shape | path | median ms | GFLOP/s | speed-up vs PyTorch fp32 |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['shape']} | {r['path']} | {r['median_ms']} | {r['gflop_per_s']} | "
            f"{base[r['shape']] / r['median_ms']:.2f}x |"
        )


if __name__ == "__main__":
    main()
