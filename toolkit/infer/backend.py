"""Loading a saved model for inference: PyTorch from a run's model/ folder, ONNX Runtime or OpenVINO from an
artifact."""

from __future__ import annotations

from pathlib import Path

from toolkit.pretrained import load_tokenizer
from toolkit.rundir import ONNX_FILE, Run, open_run


def load_model_dir(run: Run | Path, auto_class: str, device: str | None = None, dtype: str | None = None) -> tuple:
    """(model, tokenizer, meta, device) of a saved run or exported artifact.

    `auto_class` names a transformers Auto class; an ONNX artifact loads as optimum's
    ORTModel of the same kind, which shares the transformers call and generate API. `dtype` ("bfloat16")
    loads a PyTorch model's weights in that precision; None keeps them as stored.
    """
    import torch

    run = run if isinstance(run, Run) else open_run(run)
    directory, meta = run.model_dir, run.meta
    if run.runtime == "openvino":
        from toolkit.hardware import inference_threads
        from toolkit.infer.openvino_model import OpenVINOTokenClassifier

        export = meta.export
        model = OpenVINOTokenClassifier(
            directory, export.precision, inference_threads(), export.pad_multiple, export.static_max_width
        )
        return model, load_tokenizer(str(directory)), meta, "cpu"
    if run.runtime == "onnx":
        import optimum.onnxruntime as ort_models

        ort_class = {
            "AutoModelForTokenClassification": "ORTModelForTokenClassification",
            "AutoModelForCausalLM": "ORTModelForCausalLM",
        }[auto_class]
        # The ONNX graph is the model here: read its own config, never re-export.
        model = getattr(ort_models, ort_class).from_pretrained(
            directory, file_name=ONNX_FILE, provider="CPUExecutionProvider", session_options=_session_options()
        )
        return model, load_tokenizer(str(directory)), meta, "cpu"
    import transformers

    from toolkit.attention import restore_attention
    from toolkit.gemma import register_gemma_tagger

    device = device or default_device()
    config = transformers.AutoConfig.from_pretrained(directory)
    register_gemma_tagger(config.model_type)
    weights = {"dtype": getattr(torch, dtype)} if dtype else {}
    model = getattr(transformers, auto_class).from_pretrained(directory, config=config, **weights).to(device)
    restore_attention(model)
    return model, load_tokenizer(str(directory)), meta, device


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
