"""How each export path's model folder is built (`paths.PATHS` names them): the run's PyTorch weights, the ONNX
graph (optimum-onnx), its ONNX Runtime fusions and int8 blocks, and OpenVINO's conversions. Each builder takes
(run, directory, source, built): `source` is the folder of the path it is made from (the ONNX graph), `built`
every folder built so far; it returns what the build recorded (fused operators, quantization scheme).

The ONNX export itself is optimum-onnx's (`main_export`): token classification for MLM runs,
`text-generation-with-past` (a decoder with KV cache) for CLM runs. We chose optimum over
onnxruntime-genai's builder because its ORTModelForCausalLM plugs into transformers'
`generate`, so the CLM track's constrained copy decoding (a LogitsProcessor) and its
windowing, parsing and offset recovery run unchanged on the ONNX model."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.models.openvino import OPENVINO_FILE, convert_onnx, quantize_int8
from toolkit.rundir import META_FILE, ONNX_FILE, Run, records_for

CALIBRATION_WINDOWS = 64
INT8_BLOCK = 32
# Hugging Face model types that ONNX Runtime's transformer optimizer fuses as BERT-like encoders.
FUSION_MODEL_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "distilbert": "bert", "electra": "bert"}


def pytorch_weights(run: Run, directory: Path, source: Path | None, built: dict) -> dict:
    """The run's own weights and tokenizer; the LoRA adapter was merged into them at save time."""
    shutil.copytree(run.model_dir, directory, ignore=shutil.ignore_patterns("adapter", "checkpoint-*"))
    return {}


def onnx_graph(run: Run, directory: Path, source: Path | None, built: dict) -> dict:
    from optimum.exporters.onnx import main_export

    try:
        main_export(
            str(run.model_dir), output=str(directory), task=run.spec.onnx_task, do_validation=False, device="cpu"
        )
    except Exception as exc:  # optimum raises many kinds; the user needs the model and the cause
        raise ToolkitError(
            f"{run.model_dir}: ONNX export failed: {exc}",
            fix="check that the model architecture is supported by optimum-onnx",
        ) from exc
    return {}


def _beside_graph(source: Path, directory: Path) -> None:
    """The graph's folder (tokenizer, config) without the graph and its toolkit.json."""
    shutil.copytree(source, directory, ignore=shutil.ignore_patterns(f"{ONNX_FILE}*", META_FILE))


def fused_graph(run: Run, directory: Path, source: Path | None, built: dict) -> dict:
    """ONNX Runtime's transformer fusions (python pass only, opt_level 0, so the graph stays portable
    across CPUs); records the count of each fused operator."""
    from onnxruntime.transformers.optimizer import optimize_model

    _beside_graph(source, directory)
    config = json.loads((run.model_dir / "config.json").read_text())
    # The optimizer logs every pass at INFO under many logger names; the parity table is the summary.
    logging.disable(logging.INFO)
    try:
        model = optimize_model(
            str(source / ONNX_FILE),
            model_type=FUSION_MODEL_TYPES[config["model_type"]],
            num_heads=config["num_attention_heads"],
            hidden_size=config["hidden_size"],
            opt_level=0,
        )
        model.save_model_to_file(str(directory / ONNX_FILE))
    finally:
        logging.disable(logging.NOTSET)
    return {"fused_operators": {op: n for op, n in model.get_fused_operator_statistics().items() if n}}


def int8_graph(run: Run, directory: Path, source: Path | None, built: dict) -> dict:
    """int8 weights in blocks of INT8_BLOCK input channels (onnxruntime's MatMulNBits, 8 bits); at run time
    each row of activations is quantized per block (accuracy level 4: int8 compute). A row's scale never
    sees another row, so a window's outputs do not depend on the windows batched with it, unlike
    whole-tensor dynamic quantization. Embeddings stay fp32."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    _beside_graph(source, directory)
    # The quantizer logs a line per node at INFO; one summary (the parity figures) is enough.
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(source / ONNX_FILE)), bits=8, block_size=INT8_BLOCK, is_symmetric=True, accuracy_level=4
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(directory / ONNX_FILE), use_external_data_format=False)
    return {"scheme": f"weights int8 in blocks of {INT8_BLOCK}"}


def openvino_model(run: Run, directory: Path, source: Path | None, built: dict) -> dict:
    """The graph converted to OpenVINO's model (compiled at load for its precision)."""
    _beside_graph(source, directory)
    convert_onnx(source / ONNX_FILE, directory)
    return {}


def openvino_int8(run: Run, directory: Path, source: Path | None, built: dict, reuse: str | None = None) -> dict:
    """OpenVINO int8, calibrated by NNCF on training windows; `reuse`: a path whose int8 model, when built, is
    copied instead (one calibration for both int8 paths: only the compiled precision differs)."""
    _beside_graph(source, directory)
    if reuse in built:
        for file in (OPENVINO_FILE, str(Path(OPENVINO_FILE).with_suffix(".bin"))):
            shutil.copy2(built[reuse] / file, directory / file)
        return {"scheme": f"the {reuse} model, compiled with bf16 outside its int8 matmuls"}
    return quantize_int8(source / ONNX_FILE, calibration_windows(run), directory)


def calibration_windows(run: Run, count: int = CALIBRATION_WINDOWS) -> list[dict]:
    """Model inputs for int8 calibration: `count` windows of the run's training documents, spread evenly over
    them, cut by the tagger's own windowing (make_windows: max_length, stride). Training documents, not the
    parity documents: the scales are then not fitted to the sample that gates them."""
    import numpy as np

    from toolkit.models.pretrained import load_tokenizer
    from toolkit.spans.windows import make_windows

    source = run.recipe.data.train if run.recipe else None
    if not source:
        raise ToolkitError(
            f"{run.path}: no training file recorded to calibrate int8 on",
            fix="export another path (--precision auto skips none it can build; choose e.g. openvino_bf16)",
        )
    texts = [r.text for r in records_for(run, source, count)]
    windows = make_windows(load_tokenizer(str(run.model_dir)), texts, run.meta.max_length, run.meta.stride or 0)
    chosen = sorted(set(np.linspace(0, len(windows) - 1, num=min(count, len(windows))).round().astype(int).tolist()))
    inputs = []
    for i in chosen:
        ids = np.array([windows[i].input_ids], dtype=np.int64)
        inputs.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    return inputs
