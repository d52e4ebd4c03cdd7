"""Label Studio JSON export (a list of tasks with `data` and `annotations`).

Label Studio's offsets are JavaScript string indices (UTF-16 code units). For
texts with characters outside the Basic Multilingual Plane (emoji, some CJK) they
differ from Python's; each region's own `text` tells which convention was used,
and the offsets are converted when needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog, checked_span
from toolkit.data.schema import SpanRecord, sort_spans
from toolkit.errors import ToolkitError


def utf16_to_index(text: str) -> dict[int, int]:
    """UTF-16 code-unit offset -> Python str offset, for every character boundary."""
    mapping, unit = {}, 0
    for i, ch in enumerate(text):
        mapping[unit] = i
        unit += 2 if ord(ch) > 0xFFFF else 1
    mapping[unit] = len(text)
    return mapping


def index_to_utf16(text: str) -> list[int]:
    """Python str offset -> UTF-16 offset (list indexed by Python offset)."""
    out, unit = [], 0
    for ch in text:
        out.append(unit)
        unit += 2 if ord(ch) > 0xFFFF else 1
    out.append(unit)
    return out


def _text_key(data: dict, wanted: str | None) -> str | None:
    if wanted:
        return wanted if isinstance(data.get(wanted), str) else None
    if isinstance(data.get("text"), str):
        return "text"
    strings = [k for k, v in data.items() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else None


def read_labelstudio(
    paths: list[Path], log: ImportLog, text_key: str | None = None, predictions: bool = False
) -> Iterator[SpanRecord]:
    """One record per task, from its first non-cancelled annotation (others are reported); with
    `predictions`, from its first model prediction instead (what `toolkit predict --format labelstudio` wrote)."""
    for path in paths:
        path = Path(path)
        try:
            tasks = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ToolkitError(f"{path}: no such file", fix="pass Label Studio JSON export files") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ToolkitError(
                f"{path}: not valid UTF-8 JSON ({exc})", fix="export the project again as JSON (not JSON-MIN or CSV)"
            ) from None
        if not isinstance(tasks, list):
            raise ToolkitError(f"{path}: expected a list of tasks", fix="export the project as JSON (Export > JSON)")
        for n, task in enumerate(tasks):
            yield from _task(task, n, path, log, text_key, predictions)


def _task(
    task, n: int, path: Path, log: ImportLog, text_key: str | None, predictions: bool = False
) -> Iterator[SpanRecord]:
    where = {"file": str(path), "field": f"[{n}]"}
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        log.drop_document("bad_task", f"task {n} has no 'data' object.", "export the project again as JSON.", **where)
        return
    # Our exports keep the record id in data.id; Label Studio's own task id otherwise.
    rid = str(task["data"]["id"]) if "id" in task["data"] else str(task.get("id", n))
    where["record_id"] = rid
    key = _text_key(task["data"], text_key)
    if key is None:
        log.drop_document(
            "no_text",
            f"task {rid} has no text field{' ' + repr(text_key) if text_key else ''}.",
            "pass --text-key with the data field your labeling config reads ($text).",
            **where,
        )
        return
    text = task["data"][key]
    kind = "predictions" if predictions else "annotations"
    annotations = [a for a in task.get(kind) or [] if isinstance(a, dict) and not a.get("was_cancelled")]
    if not annotations:
        other = "predictions" if kind == "annotations" else "annotations"
        hint = (
            f" It has {other}: pass {'--predictions' if other == 'predictions' else 'no --predictions'} to read them."
            if task.get(other)
            else ""
        )
        log.drop_document(
            "unlabeled_task",
            f"task {rid} has no (non-cancelled) {kind}.{hint}",
            "annotate it, or remove it from the export.",
            severity="warning",
            **where,
        )
        return
    if len(annotations) > 1:
        log.warn(
            "several_annotations",
            f"task {rid} has {len(annotations)} {kind}; used the first (id={annotations[0].get('id')}).",
            "resolve disagreements in Label Studio, or export one annotator's work.",
            **where,
        )
    to_index = None
    spans = []
    for k, region in enumerate(annotations[0].get("result") or []):
        value = region.get("value") or {}
        if region.get("type") != "labels" or "start" not in value:
            log.ignore(f"{region.get('type', 'unknown')} results")
            continue
        start, end = value["start"], value["end"]
        expected = value.get("text")
        if expected is not None and text[start:end] != expected:
            to_index = to_index or utf16_to_index(text)
            if start in to_index and end in to_index and text[to_index[start] : to_index[end]] == expected:
                start, end = to_index[start], to_index[end]
        for label in value.get("labels") or []:
            span = checked_span(
                text, start, end, label, log, expected=expected, **{**where, "field": f"[{n}].{kind}[0].result[{k}]"}
            )
            if span is not None:
                spans.append(span)
        if not value.get("labels"):
            log.drop_span("no_label", f"region {k} has no label.", "give the region a label in Label Studio.", **where)
    yield SpanRecord(id=rid, text=text, spans=sort_spans(list(dict.fromkeys(spans))), meta={"source": path.name})


def write_labelstudio(records: list[SpanRecord], path: Path, log: ImportLog) -> None:
    """Tasks with one annotation each, offsets in UTF-16 as Label Studio expects; importable as JSON."""
    tasks = []
    for rec in records:
        units = index_to_utf16(rec.text)
        result = [
            {
                "id": f"s{k}",
                "from_name": "label",
                "to_name": "text",
                "type": "labels",
                "value": {
                    "start": units[s.start],
                    "end": units[s.end],
                    "text": rec.text[s.start : s.end],
                    "labels": [s.label],
                },
            }
            for k, s in enumerate(rec.spans)
        ]
        tasks.append({"data": {"text": rec.text, "id": rec.id}, "annotations": [{"result": result}]})
        log.documents += 1
        log.spans += len(rec.spans)
    Path(path).write_text(json.dumps(tasks, ensure_ascii=False, indent=1), encoding="utf-8")


def write_labelstudio_predictions(stream: Path, out: Path, model_version: str) -> int:
    """`toolkit predict`'s span JSONL as Label Studio tasks with pre-annotations (`predictions`), each
    region with its score and the task scored by its lowest span score (Label Studio sorts tasks by it,
    so the least certain come first to review). Import with `toolkit import labelstudio --predictions`."""
    tasks = []
    with Path(stream).open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            text, units = rec["text"], index_to_utf16(rec["text"])
            result = [
                {
                    "id": f"p{k}",
                    "from_name": "label",
                    "to_name": "text",
                    "type": "labels",
                    "value": {
                        "start": units[s["start"]],
                        "end": units[s["end"]],
                        "text": text[s["start"] : s["end"]],
                        "labels": [s["label"]],
                    },
                    "score": s["score"],
                }
                for k, s in enumerate(rec["spans"])
            ]
            lowest = min((s["score"] for s in rec["spans"]), default=1.0)
            data = {"text": text, "id": rec["id"], "source": rec["meta"]["source"]}
            tasks.append(
                {"data": data, "predictions": [{"model_version": model_version, "score": lowest, "result": result}]}
            )
    tmp = Path(out).with_name(Path(out).name + ".tmp")
    tmp.write_text(json.dumps(tasks, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(out)
    return len(tasks)
