"""`toolkit export`: a trained run -> a self-contained artifact, gated on parity with PyTorch.

An artifact is one of the PATHS: an ONNX graph (fp32, fp32 with ONNX Runtime's transformer fusions,
or int8) or the run's PyTorch model (fp32, or under bf16 autocast on machines with bf16 units). Which
is fastest depends on the CPU (docs/benchmarks.md at 0ea11c2), so `--precision auto` measures them all here.

The ONNX export itself is optimum-onnx's (`main_export`): token classification for MLM runs,
`text-generation-with-past` (a decoder with KV cache) for CLM runs. We chose optimum over
onnxruntime-genai's builder because its ORTModelForCausalLM plugs into transformers'
`generate`, so the CLM track's constrained copy decoding (a LogitsProcessor) and its
windowing, parsing and offset recovery run unchanged on the ONNX model.

int8 stores matmul weights as 8-bit blocks and quantizes activations per row block at run time, so
a document's answer never depends on the documents batched with it (`_quantize_int8`). Nothing is
written at `out` unless every parity budget holds: the artifact is built in a temporary sibling
directory and renamed into place. The manifest records every path's parity and speed, and the chosen
artifact's throughput, from which the service sizes its admission queue.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from toolkit.attention import CONFIG_KEY as BIDIRECTIONAL_KEY
from toolkit.deploy.model_card import write_model_card
from toolkit.errors import ToolkitError
from toolkit.evaluate.metrics import document_counts, paired_bootstrap, score
from toolkit.infer import load_predictor
from toolkit.infer.openvino_model import (
    OPENVINO_FILE,
    PAD_MULTIPLE,
    STATIC_MAX_WIDTH,
    convert_onnx,
    nncf_available,
    openvino_available,
    quantize_int8,
)
from toolkit.infer.selector import SELECTOR_FILE
from toolkit.registry import Task
from toolkit.rundir import (
    CONFIG_FILE,
    META_FILE,
    ONNX_FILE,
    ExportInfo,
    Run,
    open_run,
    records_for,
    write_manifest,
    write_meta,
)
from toolkit.scoring import SCORING


@dataclass(frozen=True)
class ParityBudgets:
    """Largest differences from the PyTorch model an artifact may show on the parity sample."""

    max_logit_diff: float = 1e-3  # fp32, largest absolute logit difference
    max_f1_drop: float = 0.01  # span F1, fp32 and int8 (0.01 = one point)
    # Span F1 that windows sized to each document may cost against the same path on the trained windows: a
    # change of context, not of arithmetic, kept to half a point (and within max_f1_drop in all).
    max_window_f1_drop: float = 0.005


def parity_documents(run: Run, data: str | None, max_docs: int) -> tuple[list, str]:
    """The fixed parity sample: the first `max_docs` documents of the run's dev file (or `data`), as the run sees
    them."""
    source = data or (run.recipe.data.dev if run.recipe else None)
    if not source:
        raise ToolkitError(
            f"{run.path}: no dev file recorded for the parity check", fix="pass --data FILE with labeled documents"
        )
    return records_for(run, source, max_docs), str(source)


CALIBRATION_WINDOWS = 64


def calibration_windows(run: Run, count: int = CALIBRATION_WINDOWS) -> list[dict]:
    """Model inputs for int8 calibration: `count` windows of the run's training documents, spread evenly over
    them, cut by the tagger's own windowing (make_windows: max_length, stride). Training documents, not the
    parity documents: the scales are then not fitted to the sample that gates them."""
    import numpy as np

    from toolkit.pretrained import load_tokenizer
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


def _span_f1(records, predictions) -> float:
    return score([r.text for r in records], [r.spans for r in records], predictions, bootstrap=0)["summary"]["span_f1"]


def _decisions(logits, group: int | None):
    if group == 0:
        return logits > 0
    return logits.reshape(logits.shape[0], -1, group).argmax(-1) if group else logits.argmax(-1)


def _tagger_outputs(tagger, texts: list[str], windows) -> tuple[list, list]:
    """(per-window logits, decoded spans) on the parity windows, one forward pass."""
    logits = tagger.logits(windows)
    return logits, tagger.decode(texts, windows, logits)


def _generator_outputs(generator, texts: list[str], windows) -> tuple[list, list]:
    """(next-token logits of every window's prompt, generated spans)."""
    import torch

    tok = generator.tokenizer
    logits = []
    for view in windows:  # the decoder's views of the parity windows, built once for every path
        prompt = generator.prompt(texts, view)
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False, return_token_type_ids=False)
        with torch.inference_mode():
            logits.append(generator.model(**enc).logits[0, -1:].float().numpy())
    return logits, generator.predict(texts)


def _parity(reference: tuple[list, list], candidate: tuple[list, list], records, group: int | None) -> dict:
    """Largest logit difference, decision agreement and span F1 of a candidate against the reference outputs,
    with the F1 drop's 95% interval (paired bootstrap over the parity documents): how stable the gated figure is."""
    import numpy as np

    (ref_logits, ref_spans), (cand_logits, cand_spans) = reference, candidate
    diff = max((float(np.abs(a - b).max()) for a, b in zip(ref_logits, cand_logits)), default=0.0)
    agree = [float((_decisions(a, group) == _decisions(b, group)).mean()) for a, b in zip(ref_logits, cand_logits)]
    texts, golds = [r.text for r in records], [r.spans for r in records]
    drop = paired_bootstrap(
        document_counts(texts, golds, ref_spans), document_counts(texts, golds, cand_spans), SCORING.boundary_tolerance
    )["span_f1"]
    return {
        "max_logit_diff": diff,
        "argmax_agreement": float(np.mean(agree)) if agree else 1.0,
        "span_f1": _span_f1(records, cand_spans),
        "span_f1_drop": {
            "points": round(100 * drop["difference"], 2),
            "ci95_points": [round(100 * x, 2) for x in drop["ci95"]],
        },
    }


def _onnx_export(model_dir: Path, out: Path, spec: Task) -> None:
    from optimum.exporters.onnx import main_export

    try:
        main_export(str(model_dir), output=str(out), task=spec.onnx_task, do_validation=False, device="cpu")
    except Exception as exc:  # optimum raises many kinds; the user needs the model and the cause
        raise ToolkitError(
            f"{model_dir}: ONNX export failed: {exc}",
            fix="check that the model architecture is supported by optimum-onnx",
        ) from exc


def _quantize_int8(fp32: Path, int8: Path) -> None:
    """int8 weights in blocks of INT8_BLOCK input channels (onnxruntime's MatMulNBits, 8 bits); at run time
    each row of activations is quantized per block (accuracy level 4: int8 compute). A row's scale never
    sees another row, so a window's outputs do not depend on the windows batched with it, unlike
    whole-tensor dynamic quantization. Embeddings stay fp32. Accuracy and speed against the other
    schemes we measured (dynamic, static with calibration): docs/benchmarks.md at 0ea11c2."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # The quantizer logs a line per node at INFO; one summary (the parity figures) is enough.
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(fp32)), bits=8, block_size=INT8_BLOCK, is_symmetric=True, accuracy_level=4
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(int8), use_external_data_format=False)


INT8_BLOCK = 32


def _throughput(predictor, texts: list[str]) -> dict:
    """The artifact's batched speed on the parity documents (after a warm-up pass over them): the service
    sizes its admission queue from chars_per_second."""
    predictor.predict(texts)  # warm-up: every input shape seen once, as in a running service
    started = time.perf_counter()
    predictor.predict(texts)
    seconds = time.perf_counter() - started
    chars = sum(len(t) for t in texts)
    return {
        "documents": len(texts),
        "characters": chars,
        "seconds": round(seconds, 3),
        "docs_per_second": round(len(texts) / seconds, 2),
        "chars_per_second": round(chars / seconds, 1),
    }


# Every path an export can measure and package: name -> (runtime, precision). `auto` measures every one
# this machine and task allow and keeps the fastest within the parity budgets.
PATHS = {
    "onnx_fp32": ("onnx", "fp32"),
    "onnx_fused": ("onnx", "fp32"),  # ONNX Runtime's transformer fusions: attention, skip layer norm, bias GELU
    "onnx_int8": ("onnx", "int8"),
    "pytorch_fp32": ("pytorch", "fp32"),
    "pytorch_bf16": ("pytorch", "bf16"),  # the fp32 weights run under bf16 autocast
    # OpenVINO compiles the onnx_fp32 graph for this CPU: fp32, or bf16 matmuls on AMX / AVX-512 bf16 units.
    "openvino_fp32": ("openvino", "fp32"),
    "openvino_bf16": ("openvino", "bf16"),
    # int8 matmuls on the VNNI / AMX int8 units, activation ranges calibrated on training windows (NNCF).
    "openvino_int8": ("openvino", "int8"),
    # The same int8 matmuls, everything else (attention, normalization, activations) in bf16 on machines with
    # bf16 units; measured beside openvino_int8 because the faster of the two depends on the CPU.
    "openvino_int8_bf16": ("openvino", "int8_bf16"),
}
ALIASES = {
    "fp32": "onnx_fp32",
    "int8": "onnx_int8",
    "fused": "onnx_fused",
    "bf16": "pytorch_bf16",
    "pytorch": "pytorch_fp32",
}
# fp32 arithmetic: gated on the logits as well as on F1
EXACT = ("onnx_fp32", "onnx_fused", "pytorch_fp32", "openvino_fp32")
FROM_ONNX_GRAPH = ("onnx", "openvino")  # runtimes whose paths are made from the onnx_fp32 graph
# Hugging Face model types that ONNX Runtime's transformer optimizer fuses as BERT-like encoders.
FUSION_MODEL_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "distilbert": "bert", "electra": "bert"}


def resolve_path(requested: str) -> str:
    """A --precision value (a path name, `auto`, or a short alias: fp32, int8, fused, bf16, pytorch) -> its path
    name."""
    name = ALIASES.get(requested.replace("-", "_"), requested.replace("-", "_"))
    if name != "auto" and name not in PATHS:
        raise ToolkitError(
            f"precision {requested!r} is not supported",
            fix=f"use auto, one of {', '.join(PATHS)}, or a short name: {', '.join(ALIASES)}",
        )
    return name


def unavailable(name: str, spec: Task, hardware: dict, model_type: str, bidirectional: bool = False) -> str | None:
    """Why `name` cannot be built here for this task and model (None: it can); `bidirectional`: a decoder
    whose causal mask was removed (model.attention). Pure."""
    runtime, precision = PATHS[name]
    if runtime in FROM_ONNX_GRAPH and bidirectional:
        return "optimum exports a decoder's causal graph: its bidirectional attention (model.attention) runs in PyTorch"
    if runtime in ("pytorch", "openvino") and spec.generates:
        return "decoders are packaged as ONNX Runtime graphs with a KV cache"
    if runtime == "openvino" and not openvino_available():
        return "OpenVINO is not installed (pip install openvino)"
    if name.startswith("openvino_int8") and not nncf_available():
        return "NNCF, which calibrates OpenVINO's int8, is not installed (pip install nncf)"
    if precision.endswith("bf16") and not hardware["bf16"]:
        return "this machine has no bf16 units (avx512_bf16 or amx_bf16) and no CUDA device"
    if name == "onnx_fused" and spec.generates:
        return "fusions of decoder graphs with a KV cache are not built"
    if name == "onnx_fused" and model_type not in FUSION_MODEL_TYPES:
        return f"ONNX Runtime's transformer optimizer does not fuse model type {model_type!r}"
    return None


def _fuse(fp32: Path, fused: Path, config: dict) -> dict:
    """ONNX Runtime's transformer fusions (python pass only, opt_level 0, so the graph stays portable
    across CPUs); returns the count of each fused operator."""
    from onnxruntime.transformers.optimizer import optimize_model

    # The optimizer logs every pass at INFO under many logger names; the parity table is the summary.
    logging.disable(logging.INFO)
    try:
        model = optimize_model(
            str(fp32),
            model_type=FUSION_MODEL_TYPES[config["model_type"]],
            num_heads=config["num_attention_heads"],
            hidden_size=config["hidden_size"],
            opt_level=0,
        )
        model.save_model_to_file(str(fused))
    finally:
        logging.disable(logging.NOTSET)
    return {op: n for op, n in model.get_fused_operator_statistics().items() if n}


# Documents a path reads in a row when the paths are timed in turn (see _single_document_speeds).
SPEED_BLOCK = 8


def _single_document_speeds(predictors: dict, texts: list[str]) -> dict[str, dict]:
    """Each path's documents per second, sent one at a time (as one client sees a running service).

    After a warm-up pass of every path over the documents (a runtime that prepares kernels per input shape,
    OpenVINO, is timed in its steady state, not on its first sight of each shape), the paths take turns: each
    reads a block of SPEED_BLOCK documents, in an order shuffled per block, so a host whose speed drifts during
    the export slows every path alike. Timed one path after another, a drift made onnx_fused outrun OpenVINO in
    one `make demo`; turns of one document each slowed ONNX Runtime and PyTorch by a quarter beside the other
    runtimes' threads (docs/benchmarks.md at 0ea11c2, issue 30)."""
    for predictor in predictors.values():
        for text in texts:
            predictor.predict([text])
    order, rng = list(predictors), random.Random(0)
    seconds = dict.fromkeys(order, 0.0)
    for lo in range(0, len(texts), SPEED_BLOCK):
        rng.shuffle(order)
        for name in order:
            started = time.perf_counter()
            for text in texts[lo : lo + SPEED_BLOCK]:
                predictors[name].predict([text])
            seconds[name] += time.perf_counter() - started
    return {
        name: {"speed_documents": len(texts), "docs_per_second": round(len(texts) / seconds[name], 2)}
        for name in predictors
    }


@dataclass
class _AtWindowLimit:
    """A tagger read at one window limit (None: the trained windows), so that `_single_document_speeds` can time
    limits of one tagger in turns: the limit is set before each call."""

    tagger: object
    limit: int | None

    def predict(self, texts: list[str]) -> list:
        self.tagger.window_limit = self.limit
        return self.tagger.predict(texts)


def window_limits(trained: int, position_limit: int) -> list[int]:
    """Pure: the window limits to measure for windows sized to each document, largest first: the model's
    positions (a document that fits is read in one pass), and halfway from the trained length, where fewer
    positions lie beyond what fine-tuning saw. Empty when the model has no positions beyond the trained length."""
    if position_limit <= trained:
        return []
    return sorted({position_limit, trained + (position_limit - trained) // 2} - {trained}, reverse=True)


def _fitted_windows(predictor, records, timed: list[str], reference_f1: float, trained_f1: float, budgets) -> dict:
    """A tagger read with windows sized to each document (`window_limits`) instead of the trained windows:
    each limit's span F1 on the parity documents and single-document speed. The fastest limit is kept that is
    faster than the trained windows, costs at most max_window_f1_drop against their span F1 (`trained_f1`) and
    keeps the path within max_f1_drop of the reference. The context a window sees differs from training, so
    parity is measured, never assumed. The trained windows are timed again in turns with the limits, so a
    drifting host slows them alike."""
    texts = [r.text for r in records]
    trained = predictor.window_limit
    limits = window_limits(predictor.meta.max_length, predictor.position_limit())
    f1s, speeds = {}, {}
    try:
        for limit in limits:
            predictor.window_limit = limit
            f1s[limit] = _span_f1(records, predictor.predict(texts))
        if limits:
            views = {limit: _AtWindowLimit(predictor, limit) for limit in (trained, *limits)}
            speeds = {limit: s["docs_per_second"] for limit, s in _single_document_speeds(views, timed).items()}
    finally:
        predictor.window_limit = trained
    trained_speed = speeds.get(trained)
    measured = []
    for limit in limits:
        f1, speed = f1s[limit], speeds[limit]
        problems = [
            f"span F1 drop {drop:.4f} > {budget} ({against})"
            for drop, budget, against in (
                (trained_f1 - f1, budgets.max_window_f1_drop, "against the trained windows"),
                (reference_f1 - f1, budgets.max_f1_drop, "against PyTorch fp32"),
            )
            if drop > budget
        ]
        if not problems and speed <= trained_speed:
            problems.append(f"not faster ({speed} vs {trained_speed} docs/s)")
        measured.append({"window_limit": limit, "span_f1": f1, "docs_per_second": speed, "problems": problems})
    passing = [m for m in measured if not m["problems"]]
    best = max(passing, key=lambda m: m["docs_per_second"], default=None)
    return {
        "kept": best is not None,
        "window_limit": best["window_limit"] if best else None,
        "trained_docs_per_second": trained_speed,
        "why": "the fastest limit within the F1 budgets and faster than the trained windows"
        if best
        else "; ".join(f"{m['window_limit']}: {', '.join(m['problems'])}" for m in measured)
        or "the model has no positions beyond its trained windows",
        "measured": measured,
    }


def _within_budget(reference_f1: float, figures: dict, budgets: ParityBudgets, exact: bool) -> list[str]:
    problems = []
    if exact and figures["max_logit_diff"] > budgets.max_logit_diff:
        problems.append(f"max logit difference {figures['max_logit_diff']:.2e} > {budgets.max_logit_diff:.0e}")
    if reference_f1 - figures["span_f1"] > budgets.max_f1_drop:
        problems.append(f"span F1 drop {reference_f1 - figures['span_f1']:.4f} > {budgets.max_f1_drop}")
    return problems


def _build(name: str, run: Run, directory: Path, built: dict[str, Path]) -> dict:
    """Write path `name` as a model folder at `directory` (ONNX graphs from the onnx_fp32 one, built
    first); returns what the build recorded (fused operators, quantization scheme)."""
    runtime, precision = PATHS[name]
    info: dict = {}
    if runtime == "pytorch":
        # The run's own weights and tokenizer; the LoRA adapter was merged into them at save time.
        shutil.copytree(run.model_dir, directory, ignore=shutil.ignore_patterns("adapter", "checkpoint-*"))
    elif name == "onnx_fp32":
        _onnx_export(run.model_dir, directory, run.spec)
    else:
        shutil.copytree(built["onnx_fp32"], directory, ignore=shutil.ignore_patterns(f"{ONNX_FILE}*", META_FILE))
        if name == "openvino_int8_bf16" and "openvino_int8" in built:
            # One calibration for both int8 paths: the model file is the same, only its compiled precision differs.
            for file in (OPENVINO_FILE, str(Path(OPENVINO_FILE).with_suffix(".bin"))):
                shutil.copy2(built["openvino_int8"] / file, directory / file)
            info["scheme"] = "the openvino_int8 model, compiled with bf16 outside its int8 matmuls"
        elif name.startswith("openvino_int8"):
            info.update(quantize_int8(built["onnx_fp32"] / ONNX_FILE, calibration_windows(run), directory))
        elif runtime == "openvino":
            convert_onnx(built["onnx_fp32"] / ONNX_FILE, directory)
        elif name == "onnx_int8":
            _quantize_int8(built["onnx_fp32"] / ONNX_FILE, directory / ONNX_FILE)
            info["scheme"] = f"weights int8 in blocks of {INT8_BLOCK}"
        else:
            info["fused_operators"] = _fuse(
                built["onnx_fp32"] / ONNX_FILE,
                directory / ONNX_FILE,
                json.loads((run.model_dir / "config.json").read_text()),
            )
    # Fitted scikit-learn parts the predictor loads beside the network: the CLM's candidate-window selector,
    # a segment model's linear prior (segments.linear_prior) and its clause starts (segments.clause_starts).
    for side in (SELECTOR_FILE, run.meta.linear_prior, run.meta.clause_starts):
        if side and (run.model_dir / side).is_file() and not (directory / side).is_file():
            shutil.copy2(run.model_dir / side, directory / side)
    # toolkit.json says how to run the folder: the predictors read runtime and precision from it.
    padding = {"pad_multiple": PAD_MULTIPLE, "static_max_width": STATIC_MAX_WIDTH} if runtime == "openvino" else {}
    export = ExportInfo(path=name, runtime=runtime, precision=precision, **padding)
    write_meta(directory, run.meta.model_copy(update={"export": export}))
    if run.config_path is not None:
        # The run's recipe travels with the artifact: `toolkit eval ARTIFACT` applies its label map.
        shutil.copy2(run.config_path, directory / CONFIG_FILE)
    return info


def export_run(
    run_path: Path,
    out: Path,
    precision: str = "auto",
    budgets: ParityBudgets = ParityBudgets(),
    data: str | None = None,
    parity_docs: int = 64,
    overwrite: bool = False,
    windows: str = "auto",
) -> dict:
    """Build, gate, measure and write an artifact atomically; returns the manifest.

    `precision` names one path of PATHS (or an alias), or `auto`: every path this machine and task allow
    is built, checked for parity against the run's PyTorch fp32 model on the parity documents and timed
    one document at a time, and the fastest within budget is kept. The manifest records every path's
    parity and speed (or why it was skipped) and which one was chosen. `windows` (taggers): `auto` also
    measures windows sized to each document on the chosen path (`_fitted_windows`), `trained` keeps the run's."""
    from toolkit import __version__
    from toolkit.hardware import describe, fit_threads, measure_conditions

    requested = resolve_path(precision)
    if windows not in ("auto", "trained"):
        raise ToolkitError(f"windows {windows!r} is not supported", fix="use auto or trained")
    out = Path(out)
    run = open_run(run_path)  # resolved once: model folder, toolkit.json, config.yaml
    meta, task, spec = run.meta, run.task, run.spec
    if spec.not_exported:
        reason, _, fix = spec.not_exported.partition(": ")
        raise ToolkitError(f"{run.path}: {reason}", fix=fix)
    if out.exists() and not overwrite:
        raise ToolkitError(f"{out} already exists", fix="pass --overwrite, or choose another --out")
    hardware = describe()
    # Timings of paths are only comparable on cores nothing else is using: measure the load first, and
    # time with the threads the free cores allow (the manifest records both; the CLI prints the warning).
    conditions = measure_conditions()
    fit_threads(conditions)
    config = json.loads((run.model_dir / "config.json").read_text())
    model_type, bidirectional = config.get("model_type", "unknown"), bool(config.get(BIDIRECTIONAL_KEY))
    skipped = {name: why for name in PATHS if (why := unavailable(name, spec, hardware, model_type, bidirectional))}
    if requested != "auto" and requested in skipped:
        raise ToolkitError(
            f"{run.path}: cannot export {requested}: {skipped[requested]}", fix="choose another --precision, or auto"
        )
    wanted = [n for n in PATHS if n not in skipped] if requested == "auto" else [requested]
    if any(PATHS[n][0] in FROM_ONNX_GRAPH for n in wanted) and "onnx_fp32" not in wanted:
        wanted.insert(0, "onnx_fp32")  # the graph the other ONNX and the OpenVINO paths are made from
    records, source = parity_documents(run, data, parity_docs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        started = time.perf_counter()
        built: dict[str, Path] = {}
        notes = {}
        for name in wanted:
            built[name] = tmp / name
            notes[name] = _build(name, run, built[name], built)
        # The reference (the run's PyTorch fp32 model) runs once; every path is compared with its outputs.
        texts = [r.text for r in records]
        timed = texts[: spec.speed_docs]
        reference = load_predictor(run, **({"precision": "fp32"} if spec.generates else {}))
        if spec.generates:
            parity_windows, outputs, group = reference.views(texts)[0], _generator_outputs, None
        else:
            parity_windows, outputs = reference.windows(texts), _tagger_outputs
            # Multi-label tagger outputs are an O/B/I softmax per label: compare the decision within each group
            # of three; a segment model's outputs are one sigmoid per label (group 0: the sign).
            group = 0 if spec.outputs == "segment_scores" else 3 if reference.space.multi_label else None
        ref = outputs(reference, texts, parity_windows)
        reference_f1 = _span_f1(records, ref[1])
        del reference
        parity = {"documents": len(records), "source": source, "pytorch_span_f1": reference_f1}
        paths: dict[str, dict] = {name: {"skipped": why} for name, why in skipped.items()}
        problems, predictors = {}, {}
        for name, directory in built.items():
            predictor = predictors[name] = load_predictor(directory)
            candidate = outputs(predictor, texts, parity_windows)
            figures = parity[name] = {**_parity(ref, candidate, records, group), **notes[name]}
            paths[name] = {"span_f1": figures["span_f1"]}
            problems[name] = _within_budget(reference_f1, figures, budgets, exact=name in EXACT)
            if name != "onnx_fp32" and PATHS[name][0] in FROM_ONNX_GRAPH and problems.get("onnx_fp32"):
                problems[name] = [*problems[name], "made from the onnx_fp32 graph, which failed its gate"]
        for name, speed in _single_document_speeds(predictors, timed).items():
            paths[name].update(speed)
        passing = [name for name in built if not problems[name]]
        chosen = (
            max(passing, key=lambda n: paths[n]["docs_per_second"], default=None)
            if requested == "auto"
            else (requested if requested in passing else None)
        )
        if chosen is None:
            failed = "; ".join(f"{name} {p}" for name, found in problems.items() for p in found)
            raise ToolkitError(
                f"{run.path}: export failed its parity gate on {len(records)} documents of {source}: {failed}; nothing "
                f"was written",
                fix=(
                    "inspect the model, or loosen the budget with --max-logit-diff / --max-f1-drop if the difference "
                    "is acceptable"
                ),
            )
        for name in paths:
            paths[name]["chosen"] = name == chosen
        artifact = built[chosen]
        windowing: dict = {"max_length": meta.max_length, "stride": meta.stride}
        if spec.outputs == "tags" and windows == "auto":
            windowing["fitted"] = fitted = _fitted_windows(
                predictors[chosen], records, timed, reference_f1, paths[chosen]["span_f1"], budgets
            )
            if fitted["kept"]:
                written = open_run(artifact).meta  # as _build wrote it, with its export entry
                export = written.export.model_copy(update={"window_limit": fitted["window_limit"]})
                write_meta(artifact, written.model_copy(update={"export": export}))
                predictors[chosen].window_limit = fitted["window_limit"]  # the throughput below: as it will run
        # The model card is written before the manifest, so its checksum is listed like every other file.
        write_model_card(
            run,
            artifact,
            {
                "task": task,
                "path": chosen,
                "runtime": PATHS[chosen][0],
                "precision": PATHS[chosen][1],
                "parity": parity,
                "hardware": hardware,
            },
        )
        manifest = write_manifest(
            artifact,
            {
                "task": task,
                "path": chosen,
                "runtime": PATHS[chosen][0],
                "precision": PATHS[chosen][1],
                "requested": requested,
                "model_id": f"{run.path.name}-{chosen}",
                "source_run": str(run.path.resolve()),
                "labels": meta.labels,
                "windowing": windowing,
                **({"decoding": meta.decoding} if not spec.generates else {}),
                "parity": parity,
                "budgets": asdict(budgets),
                "hardware": hardware,
                "conditions": conditions,
                "paths": paths,
                "throughput": _throughput(predictors[chosen], texts),
                "export_seconds": round(time.perf_counter() - started, 1),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "versions": _versions(__version__),
            },
        )
        if out.exists():
            shutil.rmtree(out)
        os.replace(artifact, out)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _versions(toolkit_version: str) -> dict:
    import onnxruntime
    import transformers

    return {
        "toolkit": toolkit_version,
        "onnxruntime": onnxruntime.__version__,
        "transformers": transformers.__version__,
    }


def export_table(manifest: dict):
    """Every path of an export side by side (paths as columns, so it fits 80 columns); skipped paths
    are listed under it with the reason."""
    from toolkit.tables import SystemsTable

    parity = manifest["parity"]
    rows = ["span F1", "F1 drop (points)", "drop 95% CI", "max logit diff", "docs/s (1 doc)", "chosen"]
    paths, notes = {}, []
    for name, figures in manifest["paths"].items():
        if "skipped" in figures:
            notes.append(f"{name}: skipped, {figures['skipped']}")
            continue
        f = parity[name]
        d = f["span_f1_drop"]
        paths[name] = [
            f"{f['span_f1']:.4f}",
            str(d["points"]),
            f"{d['ci95_points'][0]} to {d['ci95_points'][1]}",
            f"{f['max_logit_diff']:.2e}",
            str(figures["docs_per_second"]),
            "yes" if figures["chosen"] else "",
        ]
    return SystemsTable(
        "every path: span F1, its drop from PyTorch fp32, single-document speed",
        rows,
        paths,
        first_header="path",
        notes=notes,
    )
