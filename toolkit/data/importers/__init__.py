"""Importers and exporters between the span JSONL and other annotation formats.

`run_import` wraps every reader with the checks that hold for any format:
label mapping, documents held out for another split (leakage), duplicate ids and
duplicate documents. Everything it leaves out is logged.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog
from toolkit.data.jsonl import write_jsonl
from toolkit.data.schema import SpanRecord
from toolkit.data.validation import text_fingerprint
from toolkit.errors import ToolkitError

# format -> (module in this package, function, the options it takes with their defaults).
READERS = {
    "conll": ("conll", "read_conll", {"scheme": "auto"}),
    "brat": ("brat", "read_brat", {"discontinuous": "report"}),
    "pubtator": ("pubtator", "read_pubtator", {}),
    "cuad": ("cuad", "read_cuad", {}),
    "labelstudio": ("labelstudio", "read_labelstudio", {"text_key": None, "predictions": False}),
    "docbin": ("docbin", "read_docbin", {"spans_key": None}),
}
WRITERS = {
    "conll": ("conll", "write_conll", {"scheme": "iob2"}),
    "brat": ("brat", "write_brat", {}),
    "pubtator": ("pubtator", "write_pubtator", {}),
    "labelstudio": ("labelstudio", "write_labelstudio", {}),
    "docbin": ("docbin", "write_docbin", {"spans_key": "sc"}),
}
IMPORT_FORMATS = (*READERS, "jsonl")
EXPORT_FORMATS = tuple(WRITERS)


def _bind(entry: tuple[str, str, dict], options: dict) -> Callable:
    """The format's function (imported on demand: spaCy is heavy) with its options bound."""
    module, name, defaults = entry
    function = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return functools.partial(function, **{key: options.get(key) or default for key, default in defaults.items()})


def reader(fmt: str, options: dict) -> Callable[[list[Path], ImportLog], Iterator[SpanRecord]]:
    """The reader of `fmt`, with its format options bound."""
    if fmt == "jsonl":
        return read_jsonl_records
    if fmt not in READERS:
        raise ToolkitError(f"unknown format {fmt!r}", fix=f"use one of {', '.join(IMPORT_FORMATS)}")
    return _bind(READERS[fmt], options)


def read_jsonl_records(paths: list[Path], log: ImportLog) -> Iterator[SpanRecord]:
    """Valid records of span JSONL files; invalid ones are logged (run `toolkit check` for details)."""
    from toolkit.data.validation import ValidationSummary, validate_files

    summary = ValidationSummary()
    for checked in validate_files(paths, None, summary):
        yield checked.record.model_copy(update={"spans": checked.spans})
    for p in summary.problems:
        log.problems.append(p)
    log.documents_dropped += sum(summary.records_rejected.values())
    log.spans_dropped += sum(summary.spans_rejected.values())


def parse_label_map(pairs: Iterable[str]) -> dict[str, str]:
    """['Old=New', ...] -> {'Old': 'New'}; 'Old=' drops a label (reported per span)."""
    out = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old:
            raise ToolkitError(
                f"--map-label {pair!r} is not OLD=NEW",
                fix="e.g. --map-label SpecificDisease=Disease (OLD= drops the label)",
            )
        out[old] = new
    return out


def run_import(
    fmt: str,
    sources: list[Path],
    out: Path | None,
    options: dict | None = None,
    label_map: dict[str, str] | None = None,
    holdout: list[Path] | None = None,
) -> tuple[list[SpanRecord], ImportLog]:
    """Read `sources`, apply the generic checks, write JSONL to `out` (when given); return records and log."""
    options = options or {}
    log = ImportLog(fmt)
    held_ids: dict[str, str] = {}
    held_texts: dict[bytes, str] = {}
    if holdout:
        hold_log = ImportLog(fmt)
        hold_reader = reader("jsonl" if all(str(p).endswith(".jsonl") for p in holdout) else fmt, options)
        for rec in hold_reader(holdout, hold_log):
            held_ids[rec.id] = rec.id
            held_texts[text_fingerprint(rec.text)] = rec.id
    seen_ids: dict[str, bytes] = {}
    seen_source: dict[str, str | None] = {}
    seen_texts: dict[bytes, str] = {}
    records: list[SpanRecord] = []
    for rec in reader(fmt, options)(sources, log):
        meta = rec.meta or {}
        where = {"file": meta.get("source"), "line": meta.get("line"), "record_id": rec.id}
        fp = text_fingerprint(rec.text)
        if rec.id in held_ids or fp in held_texts:
            log.drop_document(
                "held_out",
                f"also in the held-out files (id={held_texts.get(fp, rec.id)!r}).",
                "nothing to do: it belongs to the held-out split; this keeps train and dev apart.",
                severity="warning",
                spans=len(rec.spans),
                **where,
            )
            continue
        if rec.id in seen_ids and seen_source[rec.id] != meta.get("source") and seen_ids[rec.id] == fp:
            log.drop_document(
                "leakage",
                f"the same document is also in {seen_source[rec.id]}: two splits share it.",
                f"import each split on its own, with --holdout naming the other (e.g. the file that holds {rec.id!r} "
                f"for dev).",
                spans=len(rec.spans),
                **where,
            )
            continue
        if rec.id in seen_ids:
            same = seen_ids[rec.id] == fp
            log.drop_document(
                "duplicate_document" if same else "duplicate_id",
                "an earlier document has the same id" + (" and text." if same else " but a different text."),
                "nothing to do: the first copy was kept." if same else "give the documents distinct ids in the source.",
                severity="warning" if same else "error",
                spans=len(rec.spans),
                **where,
            )
            continue
        if fp in seen_texts:
            log.warn(
                "duplicate_text",
                f"the same text was imported as id {seen_texts[fp]!r}.",
                "remove one copy unless both are intended (they would leak across splits).",
                **where,
            )
        seen_ids[rec.id] = fp
        seen_source[rec.id] = meta.get("source")
        seen_texts.setdefault(fp, rec.id)
        if label_map:
            rec = _map_labels(rec, label_map, log, where)
        records.append(rec)
        log.documents += 1
        log.spans += len(rec.spans)
    if out is not None:
        write_jsonl(out, (r.to_json_dict() for r in records))
    return records, log


def _map_labels(rec: SpanRecord, label_map: dict[str, str], log: ImportLog, where: dict) -> SpanRecord:
    from toolkit.data.records import map_record_labels

    rec, dropped, merged = map_record_labels(rec, label_map)
    for s in dropped:
        log.drop_span(
            "label_dropped",
            f"{s.start}-{s.end} {s.label!r} dropped by --map-label.",
            "nothing to do.",
            severity="warning",
            **where,
        )
    if merged:
        log.warn(
            "labels_merged",
            f"{merged} span(s) became identical after label mapping; kept once.",
            "nothing to do.",
            **where,
        )
    return rec


def run_export(fmt: str, records: list[SpanRecord], out: Path, options: dict | None = None) -> ImportLog:
    """Write `records` in `fmt`; what the format cannot hold is logged."""
    options = options or {}
    log = ImportLog(fmt)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if fmt not in WRITERS:
        raise ToolkitError(f"cannot export to {fmt!r}", fix=f"use one of {', '.join(EXPORT_FORMATS)}")
    _bind(WRITERS[fmt], options)(records, out, log)
    return log
