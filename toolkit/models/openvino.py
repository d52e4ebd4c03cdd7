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
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32", "int8_bf16": "bf16"}
# Input widths are rounded up to a multiple of this, so shapes repeat: every width is a model compiled for it
# (see the class). 64 ran MiniLM abstracts about as fast as 32 with half the compiled shapes, so half the
# memory and load time; on dynamic shapes alone 32 had been faster.
PAD_MULTIPLE = 64
# A single window up to this many tokens runs on a model compiled for its exact shape (see the class).
STATIC_MAX_WIDTH = 512


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
    # The embedding lookup stays fp32: a lookup gains nothing from int8, and an int8 table is expanded to fp32
    # inside every compiled shape (twice the memory per shape), while the fp32 one is read from the mapped file.
    keep_float = nncf.IgnoredScope(types=["Gather"], validate=False)
    quantized = nncf.quantize(
        model, dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(windows), ignored_scope=keep_float
    )
    ov.save_model(quantized, str(out_dir / OPENVINO_FILE), compress_to_fp16=False)
    return {
        "scheme": f"NNCF static int8 (weights and activations) in the matmuls, calibrated on {len(windows)} training "
        "windows; the embedding table fp32"
    }


@dataclass
class _Output:
    logits: object  # torch.Tensor


class OpenVINOTokenClassifier:
    """A compiled OpenVINO model with the transformers token-classification call.

    A single window of up to `static_max_width` tokens (padded) runs on a model compiled for exactly its shape,
    [1, width], compiled on the first window of that width and kept: the CPU plugin fuses more of a static graph
    (its elementwise chains into Subgraph kernels) and ran windows faster. Other
    shapes share one dynamic model. A shape always runs on the same compiled model, so a window's answer never
    depends on the call it came in."""

    def __init__(
        self,
        directory: Path,
        precision: str,
        threads: int | None = None,
        pad_multiple: int = PAD_MULTIPLE,
        static_max_width: int = STATIC_MAX_WIDTH,
    ):
        import openvino as ov
        from transformers import AutoConfig

        from toolkit.hardware import available_cores

        self.config = AutoConfig.from_pretrained(directory)
        self.pad_id = self.config.pad_token_id or 0
        self.pad_multiple = pad_multiple
        self.static_max_width = static_max_width
        self.properties = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision]}
        self.threads = threads or available_cores()
        self.streams = self.threads  # many windows: one stream per thread; 1: one after another on all threads
        self.core = ov.Core()
        self.graph = self.core.read_model(str(directory / OPENVINO_FILE))
        self.input_names = {port.get_any_name() for port in self.graph.inputs}
        # shape key (a width, or None for the dynamic model) -> infer request on all threads / stream queue.
        self._requests: dict = {}
        self._queues: dict = {}
        # One infer request is not safe to share between threads; the service may call from more than one.
        self._lock = threading.Lock()

    def eval(self) -> OpenVINOTokenClassifier:
        return self

    def _key(self, batch: int, width: int) -> int | None:
        return width if batch == 1 and width <= self.static_max_width else None

    def _compile(self, key: int | None, streams: bool):
        """The model of shape `key` compiled on one stream of all threads (the lowest latency for one window), or
        for the streams: one per thread, one thread each."""
        graph = self.graph
        if key is not None:
            graph = self.graph.clone()
            graph.reshape({name: [1, key] for name in self.input_names})
        if streams:
            properties = {"NUM_STREAMS": self.streams, "INFERENCE_NUM_THREADS": self.streams}
        else:
            properties = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": self.threads}
        return self.core.compile_model(graph, "CPU", {**self.properties, **properties})

    def _compile_missing(self, jobs: list[tuple[int | None, bool]]) -> None:
        """Compile the models of the (shape key, streams) jobs not compiled yet, as many at once as there are
        threads: OpenVINO compiles a model mostly on one core, so two threads compile shapes faster. The stream
        queues are kept: their infer requests hold their buffers between calls."""
        from concurrent.futures import ThreadPoolExecutor

        import openvino as ov

        missing = [job for job in jobs if job[0] not in (self._queues if job[1] else self._requests)]
        if not missing:
            return
        with ThreadPoolExecutor(min(self.threads, len(missing))) as pool:
            compiled = list(pool.map(lambda job: self._compile(*job), missing))
        for (key, streams), model in zip(missing, compiled):
            if streams:
                self._queues[key] = ov.AsyncInferQueue(model, self.streams)
            else:
                self._requests[key] = model.create_infer_request()

    def prepare(self, max_width: int) -> int:
        """Compile every static shape a window of up to `max_width` tokens can take, for one window and for the
        streams, so that no request waits for a compilation (about a second a shape); returns the shape count."""
        widths = range(self.pad_multiple, min(max_width, self.static_max_width) + self.pad_multiple, self.pad_multiple)
        with self._lock:
            kinds = (False, True) if self.streams > 1 else (False,)
            self._compile_missing([(width, streams) for width in widths for streams in kinds])
        return len(widths)

    def _feeds(self, input_ids, attention_mask) -> tuple[dict, int, int | None]:
        """numpy inputs with the width rounded up to a multiple of `pad_multiple`, so shapes repeat and each has its
        compiled model (padding is masked). Returns the feeds, the true width and the shape's key."""
        import numpy as np

        input_ids, attention_mask = np.asarray(input_ids), np.asarray(attention_mask)
        width = input_ids.shape[1]
        padded = -(-width // self.pad_multiple) * self.pad_multiple
        if padded != width:
            extra = ((0, 0), (0, padded - width))
            input_ids = np.pad(input_ids, extra, constant_values=self.pad_id)
            attention_mask = np.pad(attention_mask, extra, constant_values=0)
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}
        return {k: v for k, v in feeds.items() if k in self.input_names}, width, self._key(*input_ids.shape)

    def _infer(self, input_ids, attention_mask):
        """Logits [batch, width, outputs] of one call on all threads (the padding cut off)."""
        import numpy as np

        feeds, width, key = self._feeds(input_ids, attention_mask)
        with self._lock:
            self._compile_missing([(key, False)])
            logits = self._requests[key].infer(feeds)[0]
            return np.array(logits[:, :width], dtype=np.float32)

    def __call__(self, input_ids, attention_mask, **_) -> _Output:
        import torch

        return _Output(torch.from_numpy(self._infer(input_ids.numpy(), attention_mask.numpy())))

    def logits_each(self, windows: list[list[int]]) -> list:
        """Each window's logits [tokens, outputs] from a call of its own; more windows than threads are spread
        over one stream per thread (one thread each), which a single stream of all threads does not fill on
        windows this small. A window's answer is the one it gets alone, bit for bit: the
        streams only change how many run at once (tests/test_batch_invariance.py)."""
        import numpy as np

        # A few windows (one abstract's two) finish sooner one after another on all threads.
        if self.streams < 2 or len(windows) <= self.streams:
            return [self._infer(*_alone(w))[0] for w in windows]
        out: list = [None] * len(windows)

        def done(request, i):
            out[i] = np.array(request.get_output_tensor(0).data[0, : len(windows[i])], dtype=np.float32)

        with self._lock:
            by_shape: dict = {}
            for i, w in enumerate(windows):
                feeds, _, key = self._feeds(*_alone(w))
                by_shape.setdefault(key, []).append((i, feeds))
            self._compile_missing([(key, True) for key in by_shape])
            # One shape's queue at a time: its streams hold every thread, so two queues at once would oversubscribe.
            for key, calls in by_shape.items():
                queue = self._queues[key]
                queue.set_callback(done)
                for i, feeds in calls:
                    queue.start_async(feeds, userdata=i)
                queue.wait_all()
        return out


def _alone(window: list[int]) -> tuple:
    """(input_ids, attention_mask) of one window as a batch of one."""
    import numpy as np

    ids = np.array([window], dtype=np.int64)
    return ids, np.ones_like(ids)
