"""An exported tagger run by OpenVINO, Intel's CPU runtime, which picks AMX and AVX-512 bf16 kernels where the
CPU has them (and runs on AMD CPUs too).

Our own thin wrapper rather than optimum-intel's OVModelForTokenClassification: optimum-intel 2.2 needs
optimum 2.3 and torchvision, while the pinned optimum-onnx needs optimum 2.1. OpenVINO reads the ONNX graph
that optimum-onnx exported, so the graph is the one ONNX Runtime runs; only the kernels differ. The wrapper
answers the transformers call (`model(input_ids=..., attention_mask=...).logits`), so the Tagger runs it
unchanged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

OPENVINO_FILE = "openvino_model.xml"  # with openvino_model.bin beside it
# export precision -> OpenVINO's inference precision hint. An int8 graph runs its quantized matmuls in int8
# (VNNI / AMX int8 units) whatever the hint; the hint sets the precision of everything else.
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}
PAD_MULTIPLE = 64


def openvino_available() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def convert_onnx(onnx_file: Path, out_dir: Path) -> None:
    """The ONNX graph as OpenVINO IR (weights kept in fp32; the precision is chosen when it is compiled)."""
    import openvino as ov

    ov.save_model(ov.convert_model(str(onnx_file)), str(out_dir / OPENVINO_FILE), compress_to_fp16=False)


def nncf_available() -> bool:
    try:
        import nncf  # noqa: F401
    except ImportError:
        return False
    return True


def quantize_int8(onnx_file: Path, windows: list[dict], out_dir: Path) -> dict:
    """The ONNX graph as an OpenVINO model with int8 weights and activations in its matmuls, by NNCF's
    post-training quantization: activation ranges are calibrated on `windows` (model inputs, one window
    each), with SmoothQuant and the ops a transformer keeps in float (model_type TRANSFORMER). Static
    scales: a window's answer does not depend on the windows batched with it. Returns what was done."""
    import logging

    import nncf
    import openvino as ov

    logging.getLogger("nncf").setLevel(logging.WARNING)  # a progress line per statistic otherwise
    model = ov.convert_model(str(onnx_file))  # in memory: no fp32 IR file written and read back
    names = {port.get_any_name() for port in model.inputs}
    dataset = nncf.Dataset(windows, lambda w: {k: v for k, v in w.items() if k in names})
    quantized = nncf.quantize(model, dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(windows))
    ov.save_model(quantized, str(out_dir / OPENVINO_FILE), compress_to_fp16=False)
    return {"scheme": f"NNCF static int8 (weights and activations), calibrated on {len(windows)} training windows"}


@dataclass
class _Output:
    logits: object  # torch.Tensor


class OpenVINOTokenClassifier:
    """A compiled OpenVINO model with the transformers token-classification call."""

    def __init__(self, directory: Path, precision: str, threads: int | None = None):
        import openvino as ov
        from transformers import AutoConfig

        self.config = AutoConfig.from_pretrained(directory)
        self.pad_id = self.config.pad_token_id or 0
        properties = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            properties["INFERENCE_NUM_THREADS"] = threads
        core = ov.Core()
        self.compiled = core.compile_model(core.read_model(str(directory / OPENVINO_FILE)), "CPU", properties)
        self.input_names = {port.get_any_name() for port in self.compiled.inputs}
        self._request = self.compiled.create_infer_request()
        # One infer request is not safe to share between threads; the service may call from more than one.
        self._lock = threading.Lock()

    def eval(self) -> OpenVINOTokenClassifier:
        return self

    def __call__(self, input_ids, attention_mask, **_) -> _Output:
        import numpy as np
        import torch

        width = input_ids.shape[1]
        # OpenVINO's CPU plugin prepares kernels for each new input shape; rounding the width up to a multiple
        # of PAD_MULTIPLE lets shapes repeat (padding is masked; the logits of real tokens are kept).
        padded = -(-width // PAD_MULTIPLE) * PAD_MULTIPLE
        if padded != width:
            input_ids = torch.nn.functional.pad(input_ids, (0, padded - width), value=self.pad_id)
            attention_mask = torch.nn.functional.pad(attention_mask, (0, padded - width), value=0)
        feeds = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        with self._lock:
            logits = self._request.infer({k: v for k, v in feeds.items() if k in self.input_names})
            out = torch.from_numpy(np.array(logits[self.compiled.output(0)][:, :width], dtype=np.float32))
        return _Output(out)
