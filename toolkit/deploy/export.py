"""`toolkit export`: a trained run -> a self-contained artifact, gated on parity with PyTorch.

An artifact is one of the export paths (`paths.PATHS`): an ONNX graph (fp32, fp32 with ONNX Runtime's transformer
fusions, or int8), OpenVINO's compilation of it, or the run's PyTorch model (fp32, or under bf16 autocast on
machines with bf16 units). Which is fastest depends on the CPU, so `--precision auto` measures them all here.

`export_run` reads top to bottom: choose the paths, build them, check each one's parity with the run's PyTorch
fp32 model on the parity documents, time them, and write the chosen one. Nothing is written at `out` unless
every parity budget holds: the artifact is built in a temporary sibling directory and renamed into place.
The manifest records every path's parity and speed, and the chosen artifact's throughput, from which the
service sizes its admission queue.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from toolkit.deploy.model_card import write_model_card
from toolkit.deploy.parity import ParityBudgets, budget_problems, parity_documents, parity_figures, span_f1
from toolkit.deploy.paths import PATHS, Machine, paths_to_build, resolve_path
from toolkit.deploy.timing import fitted_windows, single_document_speeds, throughput
from toolkit.errors import ToolkitError
from toolkit.infer import load_predictor
from toolkit.infer.selector import SELECTOR_FILE
from toolkit.models.attention import CONFIG_KEY as BIDIRECTIONAL_KEY
from toolkit.registry.saved import ExportInfo
from toolkit.rundir import CONFIG_FILE, Run, open_run, write_manifest, write_meta

__all__ = ["ParityBudgets", "export_run", "export_table"]


def _build(name: str, run: Run, directory: Path, built: dict[str, Path]) -> dict:
    """Write path `name` as a model folder at `directory`, with the run's fitted side files, its toolkit.json
    (saying which path, runtime and precision it is) and its recipe; returns what the build recorded."""
    path = PATHS[name]
    info = path.build(run, directory, built.get(path.made_from), built)
    # Fitted scikit-learn parts the predictor loads beside the network: the CLM's candidate-window selector,
    # a segment model's linear prior (segments.linear_prior) and its clause starts (segments.clause_starts).
    for side in (SELECTOR_FILE, *run.meta.side_files()):
        if (run.model_dir / side).is_file() and not (directory / side).is_file():
            shutil.copy2(run.model_dir / side, directory / side)
    # toolkit.json says how to run the folder: the predictors read runtime and precision from it.
    runtime = path.runtime
    export = ExportInfo(path=name, runtime=runtime.name, precision=path.precision, **runtime.export_fields)
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
    measures windows sized to each document on the chosen path (`timing.fitted_windows`), `trained` keeps the
    run's."""
    from toolkit.hardware import describe, fit_threads, measure_conditions

    requested = resolve_path(precision)
    if windows not in ("auto", "trained"):
        raise ToolkitError(f"windows {windows!r} is not supported", fix="use auto or trained")
    out = Path(out)
    run = open_run(run_path)  # resolved once: model folder, toolkit.json, config.yaml
    if run.spec.not_exported:
        reason, _, fix = run.spec.not_exported.partition(": ")
        raise ToolkitError(f"{run.path}: {reason}", fix=fix)
    if out.exists() and not overwrite:
        raise ToolkitError(f"{out} already exists", fix="pass --overwrite, or choose another --out")
    hardware = describe()
    # Timings of paths are only comparable on cores nothing else is using: measure the load first, and
    # time with the threads the free cores allow (the manifest records both; the CLI prints the warning).
    conditions = measure_conditions()
    fit_threads(conditions)
    # 1. Choose: the paths this machine and task allow (or the one asked for), with those they are made from.
    wanted, skipped = _choose(run, requested, hardware)
    records, source = parity_documents(run, data, parity_docs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        started = time.perf_counter()
        built = _build_paths(run, wanted, tmp)
        checked = _check_parity(run, built, records, source, skipped, budgets)
        chosen = _time_and_choose(run, requested, built, checked)
        windowing = _windowing(run, built[chosen], checked, chosen, windows, budgets)
        about = {
            "task": run.task,
            "path": chosen,
            "runtime": PATHS[chosen].runtime.name,
            "precision": PATHS[chosen].precision,
        }
        extra = {"requested": requested, "windowing": windowing, "budgets": asdict(budgets), "hardware": hardware}
        manifest = _write(run, built[chosen], checked, about, {**extra, "conditions": conditions}, started)
        if out.exists():
            shutil.rmtree(out)
        os.replace(built[chosen][0], out)
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class _Checked:
    """Step 3's findings: the parity record, every path's figures (or why it was skipped), each built path's
    budget problems and loaded predictor, the parity documents and the reference's span F1; step 4's timed texts."""

    records: list
    parity: dict
    paths: dict[str, dict]
    problems: dict[str, list[str]]
    predictors: dict
    reference_f1: float
    timed: list[str] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.records]


def _build_paths(run: Run, wanted: list[str], tmp: Path) -> dict[str, tuple[Path, dict]]:
    """2. Build each path's model folder (in order: a path may be made from one built before it)."""
    built: dict[str, Path] = {}
    notes = {}
    for name in wanted:
        built[name] = tmp / name
        notes[name] = _build(name, run, built[name], built)
    return {name: (built[name], notes[name]) for name in wanted}


def _check_parity(
    run: Run, built: dict[str, tuple[Path, dict]], records, source: str, skipped: dict[str, str], budgets
) -> _Checked:
    """3. Check parity: the reference (the run's PyTorch fp32 model) runs once; every path is compared with it."""
    texts = [r.text for r in records]
    reference = run.spec.predictor_class().load_reference(run)
    inputs = reference.parity_inputs(texts)
    ref = reference.parity_outputs(texts, inputs)
    reference_f1 = span_f1(records, ref[1])
    del reference
    parity = {"documents": len(records), "source": source, "pytorch_span_f1": reference_f1}
    paths: dict[str, dict] = {name: {"skipped": why} for name, why in skipped.items()}
    problems, predictors = {}, {}
    for name, (directory, notes) in built.items():
        predictor = predictors[name] = load_predictor(directory)
        candidate = predictor.parity_outputs(texts, inputs)
        figures = parity[name] = {**parity_figures(ref, candidate, records, predictor.decisions), **notes}
        paths[name] = {"span_f1": figures["span_f1"]}
        problems[name] = budget_problems(reference_f1, figures, budgets, exact=PATHS[name].exact)
        source_path = PATHS[name].made_from
        if source_path and problems.get(source_path):
            problems[name] = [*problems[name], f"made from the {source_path} graph, which failed its gate"]
    return _Checked(records, parity, paths, problems, predictors, reference_f1)


def _time_and_choose(run: Run, requested: str, built: dict, checked: _Checked) -> str:
    """4. Time: every path one document at a time, in turns; keep the fastest within budget."""
    checked.timed = checked.texts[: run.spec.speed_docs]
    for name, speed in single_document_speeds(checked.predictors, checked.timed).items():
        checked.paths[name].update(speed)
    chosen = _chosen(requested, {name: folder for name, (folder, _) in built.items()}, checked.problems, checked.paths)
    if chosen is None:
        failed = "; ".join(f"{name} {p}" for name, found in checked.problems.items() for p in found)
        parity = checked.parity
        raise ToolkitError(
            f"{run.path}: export failed its parity gate on {parity['documents']} documents of {parity['source']}: "
            f"{failed}; nothing was written",
            fix=(
                "inspect the model, or loosen the budget with --max-logit-diff / --max-f1-drop if the difference "
                "is acceptable"
            ),
        )
    for name in checked.paths:
        checked.paths[name]["chosen"] = name == chosen
    return chosen


def _windowing(run: Run, built: tuple[Path, dict], checked: _Checked, chosen: str, windows: str, budgets) -> dict:
    """4b. Taggers with windows=auto: windows sized to each document, kept where they are faster within budget
    (written into the artifact's toolkit.json)."""
    meta, artifact = run.meta, built[0]
    windowing: dict = {"max_length": meta.max_length, "stride": meta.stride}
    if run.spec.outputs == "tags" and windows == "auto":
        windowing["fitted"] = fitted = fitted_windows(
            checked.predictors[chosen],
            checked.records,
            checked.timed,
            checked.reference_f1,
            checked.paths[chosen]["span_f1"],
            budgets,
        )
        if fitted["kept"]:
            written = open_run(artifact).meta  # as _build wrote it, with its export entry
            export = written.export.model_copy(update={"window_limit": fitted["window_limit"]})
            write_meta(artifact, written.model_copy(update={"export": export}))
            checked.predictors[chosen].window_limit = fitted["window_limit"]  # the throughput below: as it will run
    return windowing


def _write(run: Run, built: tuple[Path, dict], checked: _Checked, about: dict, extra: dict, started: float) -> dict:
    """5. Write: the model card, then the manifest (which lists the card's checksum); the caller moves the folder
    into place."""
    from toolkit import __version__

    artifact, chosen = built[0], about["path"]
    write_model_card(run, artifact, {**about, "parity": checked.parity, "hardware": extra["hardware"]})
    return write_manifest(
        artifact,
        {
            **about,
            "requested": extra["requested"],
            "model_id": f"{run.path.name}-{chosen}",
            "source_run": str(run.path.resolve()),
            "labels": run.meta.labels,
            "windowing": extra["windowing"],
            **({"decoding": run.meta.decoding} if not run.spec.generates else {}),
            "parity": checked.parity,
            "budgets": extra["budgets"],
            "hardware": extra["hardware"],
            "conditions": extra["conditions"],
            "paths": checked.paths,
            "throughput": throughput(checked.predictors[chosen], checked.texts),
            "export_seconds": round(time.perf_counter() - started, 1),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": _versions(__version__),
        },
    )


def _choose(run: Run, requested: str, hardware: dict) -> tuple[list[str], dict[str, str]]:
    """(paths to build, in order; every path this machine or task cannot build, with why)."""
    config = json.loads((run.model_dir / "config.json").read_text())
    machine = Machine(run.spec, hardware, config.get("model_type", "unknown"), bool(config.get(BIDIRECTIONAL_KEY)))
    skipped = {name: why for name, path in PATHS.items() if (why := path.unavailable(machine))}
    if requested != "auto" and requested in skipped:
        raise ToolkitError(
            f"{run.path}: cannot export {requested}: {skipped[requested]}", fix="choose another --precision, or auto"
        )
    wanted = [n for n in PATHS if n not in skipped] if requested == "auto" else [requested]
    return paths_to_build(wanted), skipped


def _chosen(requested: str, built: dict, problems: dict, paths: dict) -> str | None:
    """The path kept: the fastest within budget (auto), or the one asked for if it is within budget."""
    passing = [name for name in built if not problems[name]]
    if requested == "auto":
        return max(passing, key=lambda n: paths[n]["docs_per_second"], default=None)
    return requested if requested in passing else None


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
