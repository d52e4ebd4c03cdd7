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
# Input widths are rounded up to a multiple of this, so shapes repeat (OpenVINO's CPU plugin prepares kernels
# per shape). 32 was faster than 64, 16 and 8 for MiniLM windows at bf16 and int8 (docs/benchmarks.md).
PAD_MULTIPLE = 32


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

    def __init__(self, directory: Path, precision: str, threads: int | None = None, pad_multiple: int = PAD_MULTIPLE):
        import openvino as ov
        from transformers import AutoConfig

        from toolkit.hardware import available_cores

        self.config = AutoConfig.from_pretrained(directory)
        self.pad_id = self.config.pad_token_id or 0
        self.pad_multiple = pad_multiple
        self.properties = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision]}
        self.threads = threads or available_cores()
        self.core = ov.Core()
        self.graph = self.core.read_model(str(directory / OPENVINO_FILE))
        latency = {**self.properties, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": self.threads}
        self.compiled = self.core.compile_model(self.graph, "CPU", latency)
        self.input_names = {port.get_any_name() for port in self.compiled.inputs}
        self._request = self.compiled.create_infer_request()
        self._streams = None  # compiled on the first call with many windows (`logits_each`), with its queue
        self._queue = None
        # One infer request is not safe to share between threads; the service may call from more than one.
        self._lock = threading.Lock()

    def eval(self) -> OpenVINOTokenClassifier:
        return self

    def _feeds(self, input_ids, attention_mask) -> tuple[dict, int]:
        """numpy inputs with the width rounded up to a multiple of `pad_multiple`: OpenVINO's CPU plugin prepares
        kernels for each new input shape, and rounded widths repeat (padding is masked). Returns the true width."""
        import numpy as np

        input_ids, attention_mask = np.asarray(input_ids), np.asarray(attention_mask)
        width = input_ids.shape[1]
        padded = -(-width // self.pad_multiple) * self.pad_multiple
        if padded != width:
            extra = ((0, 0), (0, padded - width))
            input_ids = np.pad(input_ids, extra, constant_values=self.pad_id)
            attention_mask = np.pad(attention_mask, extra, constant_values=0)
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}
        return {k: v for k, v in feeds.items() if k in self.input_names}, width

    def _infer(self, input_ids, attention_mask):
        """Logits [batch, width, outputs] of one call on the all-thread stream (the padding cut off)."""
        import numpy as np

        feeds, width = self._feeds(input_ids, attention_mask)
        with self._lock:
            logits = self._request.infer(feeds)[self.compiled.output(0)]
            return np.array(logits[:, :width], dtype=np.float32)

    def __call__(self, input_ids, attention_mask, **_) -> _Output:
        import torch

        return _Output(torch.from_numpy(self._infer(input_ids.numpy(), attention_mask.numpy())))

    def logits_each(self, windows: list[list[int]]) -> list:
        """Each window's logits [tokens, outputs] from a call of its own; more windows than threads are spread
        over one stream per thread (one thread each), which a single stream of all threads does not fill on
        windows this small (docs/benchmarks.md). A window's answer is the one it gets alone, bit for bit: the
        streams only change how many run at once (tests/test_batch_invariance.py)."""
        import numpy as np
        import openvino as ov

        # A few windows (one abstract's two) finish sooner one after another on the two-thread stream.
        if self.threads < 2 or len(windows) <= self.threads:
            return [self._infer(*_alone(w))[0] for w in windows]
        with self._lock:
            if self._streams is None:
                streams = {**self.properties, "NUM_STREAMS": self.threads, "INFERENCE_NUM_THREADS": self.threads}
                self._streams = self.core.compile_model(self.graph, "CPU", streams)
                # Kept: its infer requests hold their buffers from one call to the next.
                self._queue = ov.AsyncInferQueue(self._streams, self.threads)
            queue = self._queue
            out: list = [None] * len(windows)

            def done(request, i):
                out[i] = np.array(request.get_output_tensor(0).data[0, : len(windows[i])], dtype=np.float32)

            queue.set_callback(done)
            for i, w in enumerate(windows):
                feeds, _ = self._feeds(*_alone(w))
                queue.start_async(feeds, userdata=i)
            queue.wait_all()
        return out


def _alone(window: list[int]) -> tuple:
    """(input_ids, attention_mask) of one window as a batch of one."""
    import numpy as np

    ids = np.array([window], dtype=np.int64)
    return ids, np.ones_like(ids)
