"""The runtimes a saved model runs on, one `Runtime` each (the registry of runtimes): PyTorch from a run's model/
folder or a PyTorch artifact, ONNX Runtime or OpenVINO from an artifact. Every module that needs to know
something of a runtime asks its `Runtime`; none branches on a runtime's name (tests/test_architecture.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.models.openvino import PAD_MULTIPLE, STATIC_MAX_WIDTH
from toolkit.models.pretrained import load_tokenizer
from toolkit.rundir import ONNX_FILE, Run, open_run


@dataclass(frozen=True)
class Runtime:
    """One runtime: how a model folder loads on it, and what its artifacts promise."""

    name: str  # toolkit.json export.runtime
    load: Callable[..., tuple]  # (run, auto_class, device, dtype) -> (model, device)
    # An artifact on this runtime reads one window per call: its kernels are chosen per shape, so a window padded
    # to its batch's width gets scores that move in the last bits (tests/test_batch_invariance.py); alone, its answer
    # never depends on its neighbours. ONNX Runtime's answers do not move with padding, so ONNX batches.
    windows_alone: bool
    # Runs a torch module: autocast and bf16 weights apply (an exported graph runs as exported).
    torch: bool
    hub_tag: str  # the model card's library tag
    export_fields: dict = field(default_factory=dict)  # what its artifacts' toolkit.json export entry adds

    def autocast(self, precision: str | None) -> str | None:
        """The dtype an artifact of `precision` runs under ("bfloat16" for a torch model exported at bf16)."""
        return "bfloat16" if self.torch and precision == "bf16" else None


def _load_pytorch(run: Run, auto_class: str, device: str | None, dtype: str | None) -> tuple:
    import torch
    import transformers

    from toolkit.models.attention import restore_attention
    from toolkit.models.gemma import register_gemma_tagger

    device = device or default_device()
    config = transformers.AutoConfig.from_pretrained(run.model_dir)
    register_gemma_tagger(config.model_type)
    weights = {"dtype": getattr(torch, dtype)} if dtype else {}
    model = getattr(transformers, auto_class).from_pretrained(run.model_dir, config=config, **weights).to(device)
    restore_attention(model)
    return model, device


def _load_onnx(run: Run, auto_class: str, device: str | None, dtype: str | None) -> tuple:
    import optimum.onnxruntime as ort_models

    ort_class = {
        "AutoModelForTokenClassification": "ORTModelForTokenClassification",
        "AutoModelForCausalLM": "ORTModelForCausalLM",
    }[auto_class]
    # The ONNX graph is the model here: read its own config, never re-export.
    model = getattr(ort_models, ort_class).from_pretrained(
        run.model_dir, file_name=ONNX_FILE, provider="CPUExecutionProvider", session_options=_session_options()
    )
    return model, "cpu"


def _load_openvino(run: Run, auto_class: str, device: str | None, dtype: str | None) -> tuple:
    from toolkit.hardware import inference_threads
    from toolkit.models.openvino import OpenVINOTokenClassifier

    export = run.meta.export
    model = OpenVINOTokenClassifier(
        run.model_dir, export.precision, inference_threads(), export.pad_multiple, export.static_max_width
    )
    return model, "cpu"


PYTORCH = Runtime("pytorch", _load_pytorch, windows_alone=True, torch=True, hub_tag="pytorch")
ONNX = Runtime("onnx", _load_onnx, windows_alone=False, torch=False, hub_tag="onnx")
OPENVINO = Runtime(
    "openvino",
    _load_openvino,
    windows_alone=True,
    torch=False,
    hub_tag="openvino",
    export_fields={"pad_multiple": PAD_MULTIPLE, "static_max_width": STATIC_MAX_WIDTH},
)
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (PYTORCH, ONNX, OPENVINO)}


def runtime_named(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise ToolkitError(
            f"runtime {name!r} is not known to this version of the toolkit", fix=f"use one of {', '.join(RUNTIMES)}"
        )
    return RUNTIMES[name]


def runtime_of(run: Run) -> Runtime:
    """The runtime a run or artifact loads on: its export entry's, else ONNX Runtime where the folder holds a
    graph (artifacts saved before the entry existed), else PyTorch."""
    if run.meta.export is not None:
        return runtime_named(run.meta.export.runtime)
    return ONNX if (run.model_dir / ONNX_FILE).is_file() else PYTORCH


def load_model_dir(run: Run | Path, auto_class: str, device: str | None = None, dtype: str | None = None) -> tuple:
    """(model, tokenizer, meta, device) of a saved run or exported artifact, on its runtime.

    `auto_class` names a transformers Auto class; an ONNX artifact loads as optimum's
    ORTModel of the same kind, which shares the transformers call and generate API. `dtype` ("bfloat16")
    loads a PyTorch model's weights in that precision; None keeps them as stored.
    """
    run = run if isinstance(run, Run) else open_run(run)
    model, device = runtime_of(run).load(run, auto_class, device, dtype)
    return model, load_tokenizer(str(run.model_dir)), run.meta, device


def artifact_autocast(run: Run) -> str | None:
    """The dtype an exported model runs under ("bfloat16"), None for as stored (and for a run)."""
    export = run.meta.export
    return runtime_of(run).autocast(export.precision) if export is not None else None


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _session_options():
    """ONNX Runtime's options: the thread count set by `hardware.set_inference_threads`, else its default."""
    import onnxruntime

    from toolkit.hardware import inference_threads

    options = onnxruntime.SessionOptions()
    if inference_threads():
        options.intra_op_num_threads = inference_threads()
    return options


def preferred_autocast(precision: str, device: str) -> str | None:
    """The autocast dtype for a precision setting ("fp32" | "prefer_bf16") on `device`: "bfloat16" where
    prefer_bf16 meets bf16 units (without them autocast emulates bf16, slower than fp32), else None."""
    if precision != "prefer_bf16":
        return None
    from toolkit.hardware import bf16_supported

    return "bfloat16" if bf16_supported(device) else None


def autocast_context(device: str, dtype: str | None):
    """torch autocast to `dtype` ("bfloat16") on `device`, or a no-op for None (run as stored)."""
    import contextlib

    import torch

    return torch.autocast(device.split(":")[0], dtype=getattr(torch, dtype)) if dtype else contextlib.nullcontext()
