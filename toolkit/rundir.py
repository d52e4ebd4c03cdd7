"""The on-disk contract of a trained run and of an exported artifact. Everything that reads or
writes one goes through here.

A run directory (`<output_dir>/<name>/`, made by `toolkit run`):

    config.yaml          the resolved recipe (its data.label_map is the run's label map)
    data_report.json     the plan: documents, windows, spans left out and why
    train_log.jsonl      the Trainer's log history
    checkpoints/         one per evaluation (a crashed run resumes from the latest)
    model/               the model, its tokenizer and toolkit.json (task, labels, windowing)
    predictions.jsonl    dev predictions;  metrics.json, report.md: dev scores

An artifact (made by `toolkit export`) is a model folder (model.onnx, or the PyTorch weights), its
toolkit.json with an `export` entry (path, runtime, precision), the run's config.yaml and manifest.json
(the sha256 of every file). Both open as a `Run`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from toolkit.data.records import filter_labels, load_records, map_record_labels
from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.registry import RecipeBase, Task, meta_class, task_named
from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_loader import dump_recipe, load_saved_recipe
from toolkit.registry.saved import ModelMeta
from toolkit.scoring_defaults import SCORING

CONFIG_FILE = "config.yaml"
DATA_REPORT_FILE = "data_report.json"
TRAIN_LOG_FILE = "train_log.jsonl"
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"
PREDICTIONS_FILE = "predictions.jsonl"
HALLUCINATIONS_FILE = "hallucinations.jsonl"
CURVE_FILE = "curve.jsonl"
MODEL_DIR = "model"
META_FILE = "toolkit.json"
MANIFEST = "manifest.json"
ONNX_FILE = "model.onnx"
OPENVINO_WEIGHTS = "openvino_model.bin"  # an OpenVINO artifact's weights (models/openvino.py)
ARTIFACT_FORMAT = 1


# --- the typed files: toolkit.json and metrics.json ---------------------------------------------


def code_commit() -> dict:
    """The toolkit's commit (short hash) and whether its tracked files differ from it, read from git where the
    package runs from a checkout; both None elsewhere (an installed wheel). A run's metrics.json carries them, and a
    result record takes its commit from there."""
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=7", "HEAD")
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "toolkit") if commit else None
    return {"commit": commit, "uncommitted_changes": None if changed is None else bool(changed)}


def model_meta(**fields: Any) -> ModelMeta:
    """toolkit.json's fields as the saved metadata of their task (`Task.meta`): a field another task saves is
    refused."""
    return meta_class(fields)(**fields)


def write_meta(directory: Path, meta: ModelMeta) -> None:
    data = meta.model_dump(mode="json", exclude_none=True)
    if "export" in data:  # an artifact's export entry comes last, after its task's own fields
        data["export"] = data.pop("export")
    (Path(directory) / META_FILE).write_text(json.dumps(data, indent=2), encoding="utf-8")


class Metrics(BaseModel):
    """metrics.json: a run's (or an evaluation's) scores, and for a run its training record (`run`).
    Sections a task does not produce are absent from the file."""

    model_config = ConfigDict(extra="forbid")
    summary: dict[str, Any]
    before: dict[str, Any] | None = None  # pretrain_*: held-out scores before training
    after: dict[str, Any] | None = None  # pretrain_*: held-out scores after training
    ci95: dict[str, list[float]] | None = None
    errors: dict[str, Any] | None = None
    per_label: dict[str, dict[str, Any]] | None = None
    length_buckets: list[dict[str, Any]] | None = None
    counts: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    ranking: dict[str, Any] | None = None
    at_default_threshold: dict[str, Any] | None = None  # segment models: dev scores at the default threshold
    thresholds: dict[str, float] | None = None  # segment models: the per-label thresholds saved with the model
    # segment models with a linear prior: dev figures of the linear model alone, the encoder alone and the final model
    models: dict[str, dict[str, Any]] | None = None
    selector: dict[str, Any] | None = None  # span_generation: what the window selector kept and cost
    run: dict[str, Any] | None = None


def write_metrics_file(directory: Path, metrics: Metrics) -> None:
    """metrics.json in the order of its sections, without the sections a task does not produce."""
    (Path(directory) / METRICS_FILE).write_text(
        json.dumps(metrics.model_dump(exclude_unset=True), indent=2), encoding="utf-8"
    )


def read_metrics(directory: Path) -> Metrics | None:
    """A run's (or evaluation's) metrics.json, None when it has none."""
    path = Path(directory) / METRICS_FILE
    if not path.is_file():
        return None
    try:
        return Metrics.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ToolkitError(
            f"{path}: not a metrics file of this toolkit ({exc.error_count()} problem(s): {exc.errors()[0]['msg']})",
            fix="re-run or re-score the run",
        ) from None


# --- writing a run -------------------------------------------------------------------------------


def run_dir_for(recipe: RecipeBase) -> Path:
    return Path(recipe.output_dir) / recipe.name


def prepare_run_dir(run_dir: Path, overwrite: bool) -> None:
    """A finished run is never overwritten by accident; an unfinished one resumes from its checkpoints."""
    if (run_dir / METRICS_FILE).is_file():
        if not overwrite:
            raise ToolkitError(
                f"{run_dir} holds a finished run", fix="pass --overwrite, or choose another name: name=NEW_NAME"
            )
        shutil.rmtree(run_dir)


def start_run_dir(recipe: RecipeBase, run_dir: Path, plan: dict) -> None:
    """The resolved config and the data report, written before training."""
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_recipe(recipe, run_dir / CONFIG_FILE)
    (run_dir / DATA_REPORT_FILE).write_text(json.dumps(plan, indent=2), encoding="utf-8")


def write_train_log(run_dir: Path, log_history: list[dict]) -> None:
    (run_dir / TRAIN_LOG_FILE).write_text("".join(json.dumps(e) + "\n" for e in log_history), encoding="utf-8")


def write_hallucinations(run_dir: Path, rows: list[dict]) -> None:
    """Generated spans that could not be located in their window, one JSON object a line."""
    (run_dir / HALLUCINATIONS_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def save_model_dir(model, tokenizer, directory: Path, meta: ModelMeta) -> None:
    """A plain model directory (LoRA merged; the adapter kept in adapter/) plus toolkit.json."""
    directory.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model.save_pretrained(directory / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    write_meta(directory, meta)


# --- reading a run or an artifact ----------------------------------------------------------------


def is_artifact(path: Path) -> bool:
    """A model folder made by `toolkit export` (ONNX or PyTorch)."""
    path = Path(path)
    return (path / ONNX_FILE).is_file() or (path / MANIFEST).is_file()


def weights_file(manifest: dict) -> str:
    """The file of an artifact's manifest that holds its weights (its version is that file's sha256)."""
    return next(name for name in (ONNX_FILE, OPENVINO_WEIGHTS, "model.safetensors") if name in manifest["files"])


def model_dir_of(path: Path) -> Path:
    """A run directory, its model/ folder or an exported artifact -> the folder holding toolkit.json."""
    path = Path(path)
    if (path / MODEL_DIR / META_FILE).is_file():
        return path / MODEL_DIR
    if (path / META_FILE).is_file():
        return path
    raise ToolkitError(
        f"{path}: no trained model here",
        fix=(
            "pass a run directory made by `toolkit run` (it holds model/toolkit.json) or an artifact made by `toolkit "
            "export`"
        ),
    )


def load_meta(directory: Path) -> ModelMeta:
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise ToolkitError(
            f"{directory}: not a toolkit model directory (no {META_FILE})",
            fix="pass a run directory made by `toolkit run`, or its model/ folder",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ToolkitError(f"{path}: not a JSON object", fix="this file is written by `toolkit run`/`export`")
        return meta_class(data).model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ToolkitError(
            f"{path}: {where}: {first['msg']}",
            fix="this file is written by `toolkit run`/`export`: re-run, or restore it",
        ) from None


@dataclass(frozen=True)
class Run:
    """A trained run, its model/ folder, or an artifact: where each part lives and what it says."""

    path: Path
    model_dir: Path
    meta: ModelMeta  # toolkit.json
    recipe: RecipeBase | None  # config.yaml, when the run (or artifact) carries one
    config_path: Path | None

    @property
    def task(self) -> str:
        return self.meta.task

    @property
    def spec(self) -> Task:
        return task_named(self.meta.task, self.meta.classifier)

    @property
    def labels(self) -> list[str]:
        return list(self.meta.labels)

    @property
    def label_map(self) -> dict[str, str] | None:
        """The data.label_map the run was trained with, so it is scored on the same labels."""
        return self.recipe.data.label_map if self.recipe else None

    @property
    def jaccard_threshold(self) -> float:
        """The word-Jaccard threshold the run was scored with (its eval.jaccard_threshold)."""
        return (
            self.recipe.eval.jaccard_threshold
            if isinstance(self.recipe, ExtractionRecipe)
            else SCORING.jaccard_threshold
        )

    @property
    def is_artifact(self) -> bool:
        return is_artifact(self.model_dir) or self.meta.export is not None

    @property
    def window_limit(self) -> int | None:
        """Tokens per window an artifact's tagger sizes its windows up to (None: the trained windows)."""
        return self.meta.export.window_limit if self.meta.export is not None else None


def open_run(path: Path | str) -> Run:
    """Resolve a run directory, its model/ folder or an artifact once."""
    path = Path(path)
    model_dir = model_dir_of(path)
    # config.yaml sits in the run directory (above model/) or inside an artifact.
    candidates = [d / CONFIG_FILE for d in ((path, path.parent) if model_dir == path else (path,))]
    config = next((c for c in candidates if c.is_file()), None)
    return Run(path, model_dir, load_meta(model_dir), load_saved_recipe(config) if config else None, config)


def saved_predictions(run: Run) -> tuple[dict[str, list[dict]], dict[str, list[str]], dict] | None:
    """A finished run's own dev outputs: spans per document id, labels of hallucinated spans per id,
    and the run information of metrics.json; None when the run has no saved predictions."""
    pred_file, metrics_file = run.path / PREDICTIONS_FILE, run.path / METRICS_FILE
    if not (pred_file.is_file() and metrics_file.is_file()):
        return None
    spans = {}
    with pred_file.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            spans[row["id"]] = row["spans"]
    hallucinated: dict[str, list[str]] = {}
    if (run.path / HALLUCINATIONS_FILE).is_file():
        with (run.path / HALLUCINATIONS_FILE).open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                hallucinated.setdefault(row["id"], []).append(row["label"])
    metrics = read_metrics(run.path)
    return spans, hallucinated, (metrics.run or {}) if metrics else {}


def records_for(
    run: Run, data: str, max_docs: int | None = None, labels: list[str] | None = None, other: Counter | None = None
) -> list[SpanRecord]:
    """Documents of `data` as the run sees them: its label map applied, only its labels (or `labels`)
    kept; spans of other labels are counted in `other`."""
    records = load_records(data, max_docs)
    if run.label_map:
        records = [map_record_labels(r, run.label_map)[0] for r in records]
    return filter_labels(records, labels if labels is not None else run.labels, other)


# --- artifacts -----------------------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(directory: Path, info: dict) -> dict:
    files = {
        p.relative_to(directory).as_posix(): {"sha256": sha256_of(p), "bytes": p.stat().st_size}
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"format": ARTIFACT_FORMAT, **info, "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(directory: Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise ToolkitError(f"{directory}: no {MANIFEST}", fix="pass a directory made by `toolkit export`")
    return json.loads(path.read_text(encoding="utf-8"))


def verify_artifact(directory: Path) -> dict:
    """The manifest, after checking every listed file's sha256 (a copied or edited artifact fails loudly)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    for name, entry in manifest["files"].items():
        f = directory / name
        if not f.is_file():
            raise ToolkitError(
                f"{directory}: {name} listed in {MANIFEST} is missing", fix="re-export the run with `toolkit export`"
            )
        if sha256_of(f) != entry["sha256"]:
            raise ToolkitError(
                f"{directory}: {name} does not match its sha256 in {MANIFEST}",
                fix="re-export the run; artifacts must not be edited",
            )
    return manifest


def read_curve(run_dir: Path) -> list[dict]:
    """A run's learning curve (curve.jsonl, written with eval.curve_docs), in order of training seconds."""
    path = Path(run_dir) / CURVE_FILE
    if not path.is_file():
        return []
    points = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            point = json.loads(line)
            points[(point.get("stage"), point["step"])] = (
                point  # a resumed run scores a checkpoint again: keep the last
            )
    return sorted(points.values(), key=lambda p: p["train_seconds"])
