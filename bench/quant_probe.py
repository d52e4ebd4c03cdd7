"""int8 schemes for a tagger, side by side (issue 12): span F1 on the parity documents, whether a
document's answer depends on its batch, and speed, all in one run on one machine.

    .venv/bin/python bench/quant_probe.py artifacts/ncbi-fp32 --docs 64

Schemes: onnxruntime dynamic quantization (per-channel weights, activation scale over the whole
tensor), static quantization calibrated on training windows (MinMax; all weight matmuls, or all but the
FFN output projections), and blockwise 8-bit weights (MatMulNBits, activations quantized per row block;
what `toolkit export --quantize int8` uses).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.deploy.export import parity_documents  # noqa: E402
from toolkit.evaluate.metrics import score  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer import load_predictor  # noqa: E402
from toolkit.rundir import ONNX_FILE, open_run, records_for  # noqa: E402


class WindowReader:
    """Calibration inputs for static quantization: one training window at a time."""

    def __init__(self, windows, names):
        self.windows, self.names, self.i = windows, names, 0

    def get_next(self):
        import numpy as np

        if self.i >= len(self.windows):
            return None
        ids = np.asarray([self.windows[self.i].input_ids], dtype=np.int64)
        self.i += 1
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        return {n: feeds[n] for n in self.names}


def dynamic(src: Path, dst: Path, **_) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), per_channel=True, weight_type=QuantType.QInt8)


def static(src: Path, dst: Path, windows=None, exclude=(), **_) -> None:
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    names = [i.name for i in onnx.load(str(src), load_external_data=False).graph.input]
    quantize_static(
        str(src),
        str(dst),
        WindowReader(windows, names),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        weight_type=QuantType.QInt8,
        activation_type=QuantType.QUInt8,
        calibrate_method=CalibrationMethod.MinMax,
        op_types_to_quantize=["MatMul", "Gemm"],
        nodes_to_exclude=list(exclude),
        extra_options={"MatMulConstBOnly": True},
    )


def blockwise(src: Path, dst: Path, block=32, **_) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(onnx.load(str(src)), bits=8, block_size=block, is_symmetric=True, accuracy_level=4)
    q.process()
    q.model.save_model_to_file(str(dst), use_external_data_format=False)


def timed(predictor, texts):
    predictor.predict(texts[:1])
    started = time.perf_counter()
    out = predictor.predict(texts)
    return out, time.perf_counter() - started


def batch_invariant(predictor, texts) -> bool:
    same = True
    for k in (0, 3, 7):
        alone = predictor.predict([texts[k]])[0]
        mixed = predictor.predict([texts[k + 1], texts[k], texts[k + 2] * 2])[1]
        same &= [(s.start, s.end, s.label, s.score) for s in alone] == [
            (s.start, s.end, s.label, s.score) for s in mixed
        ]
    return same


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("artifact", type=Path, help="an fp32 artifact made by `toolkit export`")
    parser.add_argument("--docs", type=int, default=64)
    args = parser.parse_args()
    import onnx

    benchmark_header()
    run = open_run(args.artifact)
    records, _ = parity_documents(run, None, args.docs)
    texts, golds = [r.text for r in records], [r.spans for r in records]
    fp32 = load_predictor(run)
    fp32_pred, fp32_s = timed(fp32, texts)
    base = score(texts, golds, fp32_pred, bootstrap=0)["summary"]["span_f1"]
    print(
        json.dumps(
            {
                "scheme": "onnx fp32",
                "span_f1": base,
                "seconds": round(fp32_s, 2),
                "batch_invariant": batch_invariant(fp32, texts),
            }
        ),
        flush=True,
    )
    train = [r.text for r in records_for(run, run.recipe.data.train, 64)]
    windows = fp32.windows(train)
    matmuls = [
        n.name
        for n in onnx.load(str(args.artifact / ONNX_FILE), load_external_data=False).graph.node
        if n.op_type in ("MatMul", "Gemm")
    ]
    ffn_out = [n for n in matmuls if "output/dense" in n and "attention" not in n]
    schemes = [
        ("dynamic, whole-tensor activations", dynamic, {}),
        ("static MinMax, all weight matmuls", static, {"windows": windows}),
        ("static MinMax, FFN output in fp32", static, {"windows": windows, "exclude": ffn_out}),
        ("blockwise int8 weights, block 32", blockwise, {"block": 32}),
        ("blockwise int8 weights, block 128", blockwise, {"block": 128}),
    ]
    for name, quantize, options in schemes:
        with tempfile.TemporaryDirectory() as tmp:
            dst = Path(tmp) / "a"
            shutil.copytree(args.artifact, dst)
            quantize(args.artifact / ONNX_FILE, dst / "q.onnx", **options)
            (dst / "q.onnx").replace(dst / ONNX_FILE)
            for extra in dst.glob("model.onnx_data"):
                extra.unlink()
            q = load_predictor(dst)
            pred, seconds = timed(q, texts)
            f1 = score(texts, golds, pred, bootstrap=0)["summary"]["span_f1"]
            print(
                json.dumps(
                    {
                        "scheme": name,
                        "span_f1": f1,
                        "drop_points": round(100 * (base - f1), 2),
                        "seconds": round(seconds, 2),
                        "speedup_vs_onnx_fp32": round(fp32_s / seconds, 2),
                        "batch_invariant": batch_invariant(q, texts),
                        "model_mb": round((dst / ONNX_FILE).stat().st_size / 2**20, 1),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
