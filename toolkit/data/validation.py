"""Validation of span records: every problem at once, each located and with a fix.

`check_record` is pure (no I/O). `validate_files` streams files through it and adds
the checks that need more than one record: duplicate ids and train/dev leakage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolkit.data.jsonl import iter_json_lines
from toolkit.data.label_sets import suggest_label
from toolkit.data.schema import Span, SpanRecord
from toolkit.errors import Problem

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}
_JSON_TYPE = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list", dict: "object"}


def format_loc(loc: Iterable[Any]) -> str:
    """('spans', 3, 'end') -> 'spans[3].end'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_TYPE.get(type(value), type(value).__name__)


def _problem_from_pydantic(err: dict, where: dict) -> Problem:
    loc = err["loc"]
    path = format_loc(loc)
    etype = err["type"]
    name = str(loc[-1]) if loc else "record"
    if etype == "missing":
        example = {"id": '"doc-1"', "text": '"..."', "spans": "[]", "start": "0", "end": "5", "label": '"Disease"'}
        return Problem(
            "missing_field",
            f"required field {path!r} is missing.",
            f'add it, e.g. "{name}": {example.get(name, "...")}.',
            field=path,
            **where,
        )
    if etype == "extra_forbidden":
        scope = (
            'the record\'s "meta" object'
            if len(loc) == 1
            else 'the record\'s "meta" object (spans take start, end, label, and optionally text and score)'
        )
        return Problem(
            "extra_field", f"unknown field {path!r}.", f"remove it, or move it into {scope}.", field=path, **where
        )
    if etype in _TYPE_NAMES:
        return Problem(
            "wrong_type",
            f"{path or 'the record'} must be {_TYPE_NAMES[etype]}, got {_json_type(err.get('input'))}.",
            f"write {path or 'the record'} as {_TYPE_NAMES[etype]}"
            + (" (offsets are integer character indices)." if name in ("start", "end") else "."),
            field=path,
            **where,
        )
    if etype in ("greater_than_equal", "greater_than") and name in ("start", "end"):
        return Problem(
            "offset_out_of_range",
            f"{path} = {err.get('input')} is negative or zero.",
            "offsets are 0-based character indices into text; end is exclusive.",
            field=path,
            **where,
        )
    if name == "score" and etype in ("greater_than_equal", "less_than_equal"):
        return Problem(
            "score_out_of_range",
            f"{path} = {err.get('input')} is outside [0, 1].",
            "a score is a probability: write it in [0, 1], or leave it out.",
            field=path,
            **where,
        )
    if etype == "string_too_short":
        return Problem(
            "empty_value", f"{path} is an empty string.", f"give {path} a non-empty value.", field=path, **where
        )
    return Problem(
        "invalid", f"{path}: {err['msg']}.", "see data_schemas/span_record.v1.schema.json.", field=path, **where
    )


def check_spans(
    text: str, spans: list[Any], labels: frozenset[str] | None, where: dict, skip: set[int]
) -> tuple[list[Span], list[Problem]]:
    """Offsets, emptiness, whitespace and label checks for the structurally valid spans."""
    good: list[Span] = []
    problems: list[Problem] = []
    seen: set[tuple[int, int, str]] = set()
    n = len(text)
    for i, raw in enumerate(spans):
        if i in skip:
            continue
        span = Span.model_validate(raw) if not isinstance(raw, Span) else raw
        path = f"spans[{i}]"
        start, end = span.start, span.end
        ok = True
        if end > n or start > n:
            problems.append(
                Problem(
                    "offset_out_of_range",
                    f"span {start}-{end} ends past the text, which has {n} characters.",
                    "offsets are Python str (code point) indices; if they came from a UTF-16 or byte-based tool, "
                    "convert them.",
                    field=f"{path}.end",
                    **where,
                )
            )
            ok = False
        elif start >= end:
            problems.append(
                Problem(
                    "empty_span" if start == end else "inverted_span",
                    f"start {start} >= end {end}.",
                    "end is exclusive and must be greater than start; drop empty spans.",
                    field=path,
                    **where,
                )
            )
            ok = False
        else:
            covered = text[start:end]
            if not covered.strip():
                problems.append(
                    Problem(
                        "blank_span",
                        f"span {start}-{end} covers only whitespace ({covered!r}).",
                        "remove the span or fix its offsets.",
                        field=path,
                        **where,
                    )
                )
                ok = False
            elif covered != covered.strip():
                lead = len(covered) - len(covered.lstrip())
                trail = len(covered) - len(covered.rstrip())
                problems.append(
                    Problem(
                        "whitespace_edge",
                        f"span {start}-{end} {covered[:40]!r} has leading/trailing whitespace.",
                        f"trim it to start={start + lead}, end={end - trail}.",
                        field=path,
                        **where,
                    )
                )
                ok = False
        if ok and span.text is not None and span.text != text[start:end]:
            problems.append(
                Problem(
                    "text_mismatch",
                    f"span {start}-{end} says its text is {span.text[:40]!r} but the document has "
                    f"{text[start:end][:40]!r}.",
                    "the offsets or the text changed after the span was written: predict again on this text, or fix "
                    "the offsets.",
                    field=f"{path}.text",
                    **where,
                )
            )
            ok = False
        if labels is not None and span.label not in labels:
            problems.append(
                Problem(
                    "unknown_label",
                    f"label {span.label!r} is not in the label set.",
                    suggest_label(span.label, labels),
                    field=f"{path}.label",
                    **where,
                )
            )
            ok = False
        key = (start, end, span.label)
        if ok and key in seen:
            problems.append(
                Problem(
                    "duplicate_span",
                    f"span {start}-{end} {span.label!r} appears twice.",
                    "keep one copy.",
                    field=path,
                    severity="warning",
                    **where,
                )
            )
            ok = False
        if ok:
            seen.add(key)
            good.append(span)
    return good, problems


@dataclass
class CheckedRecord:
    """A structurally valid record; `spans` holds only the spans that passed every check."""

    record: SpanRecord
    spans: list[Span]
    file: str
    line: int
    spans_rejected: int


def check_record(
    obj: Any, labels: frozenset[str] | None = None, file: str | None = None, line: int | None = None
) -> tuple[CheckedRecord | None, list[Problem]]:
    """All problems of one parsed JSON value; the record (with its good spans) when its structure is valid."""
    rid = obj.get("id") if isinstance(obj, dict) else None
    where = {"file": file, "line": line, "record_id": str(rid) if isinstance(rid, (str, int)) else None}
    if not isinstance(obj, dict):
        return None, [
            Problem(
                "not_an_object",
                f"the line holds a JSON {_json_type(obj)}, not an object.",
                'write {"id": ..., "text": ..., "spans": [...]}.',
                **where,
            )
        ]
    problems: list[Problem] = []
    try:
        record = SpanRecord.model_validate(obj, strict=True)
        bad_spans: set[int] = set()
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems += [_problem_from_pydantic(e, where) for e in errors]
        bad_spans = {
            e["loc"][1]
            for e in errors
            if len(e["loc"]) >= 2 and e["loc"][0] == "spans" and isinstance(e["loc"][1], int)
        }
        text = obj.get("text")
        spans = obj.get("spans")
        # Keep checking the spans that are themselves well-formed, so one bad span
        # does not hide the problems of the others.
        if isinstance(text, str) and isinstance(spans, list):
            _, more = check_spans(text, spans, labels, where, bad_spans)
            problems += more
        return None, problems
    good, span_problems = check_spans(record.text, record.spans, labels, where, bad_spans)
    problems += span_problems
    return CheckedRecord(record, good, file or "", line or 0, len(record.spans) - len(good)), problems


def text_fingerprint(text: str) -> bytes:
    """Whitespace- and case-insensitive digest of a document, for duplicate and leakage checks."""
    return hashlib.blake2b(" ".join(text.split()).lower().encode("utf-8"), digest_size=16).digest()


@dataclass
class ValidationSummary:
    """What validation saw and what it left out, per file."""

    records: dict[str, int] = field(default_factory=dict)
    records_rejected: dict[str, int] = field(default_factory=dict)
    spans_rejected: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]


def validate_files(
    paths: Iterable[Path],
    labels: frozenset[str] | None = None,
    summary: ValidationSummary | None = None,
) -> Iterator[CheckedRecord]:
    """Stream records from every file, yielding the valid ones; all problems go into `summary`.

    Cross-record checks: duplicate ids (in a file and across files) and the same
    document in two files (train/dev leakage). Memory is one id and one 16-byte
    digest per document, never the texts.
    """
    summary = summary if summary is not None else ValidationSummary()
    seen_ids: dict[str, tuple[str, int]] = {}
    seen_texts: dict[bytes, tuple[str, int, str]] = {}
    for path in paths:
        name = str(path)
        summary.records[name] = 0
        summary.records_rejected[name] = 0
        summary.spans_rejected[name] = 0
        for item in iter_json_lines(Path(path)):
            if item.problem is not None:
                summary.problems.append(item.problem)
                if item.problem.severity == "error":
                    summary.records[name] += 1
                    summary.records_rejected[name] += 1
                continue
            summary.records[name] += 1
            checked, problems = check_record(item.obj, labels, name, item.line)
            summary.problems += problems
            if checked is None:
                summary.records_rejected[name] += 1
                continue
            summary.spans_rejected[name] += checked.spans_rejected
            rec = checked.record
            where = {"file": name, "line": item.line, "record_id": rec.id}
            fp = text_fingerprint(rec.text)
            if fp in seen_texts:
                other_file, other_line, other_id = seen_texts[fp]
                if other_file != name:
                    summary.problems.append(
                        Problem(
                            "leakage",
                            f"the same document is in {other_file}:{other_line} (id={other_id!r}).",
                            "keep each document in one split only; remove it from the evaluation file or the training "
                            "file.",
                            **where,
                        )
                    )
                else:
                    summary.problems.append(
                        Problem(
                            "duplicate_document",
                            f"the same text appears at line {other_line} (id={other_id!r}).",
                            "remove the duplicate: it counts twice in training or scoring.",
                            severity="warning",
                            **where,
                        )
                    )
            else:
                seen_texts[fp] = (name, item.line, rec.id)
            if rec.id in seen_ids:
                other_file, other_line = seen_ids[rec.id]
                summary.problems.append(
                    Problem(
                        "duplicate_id",
                        f"id {rec.id!r} is also used at {other_file}:{other_line}.",
                        "give every document a unique id (e.g. append a suffix), or remove the duplicate.",
                        field="id",
                        **where,
                    )
                )
            else:
                seen_ids[rec.id] = (name, item.line)
            yield checked
        if summary.records[name] == 0:
            summary.problems.append(
                Problem(
                    "no_documents",
                    "the file holds no documents (it is empty, or only blank lines).",
                    "write one JSON record per line, or pass the right file.",
                    file=name,
                )
            )


def collect(
    paths: Iterable[Path],
    labels: frozenset[str] | None = None,
    on_record: Callable[[CheckedRecord], None] | None = None,
) -> ValidationSummary:
    """Run `validate_files` to the end, calling `on_record` for each valid record."""
    summary = ValidationSummary()
    for checked in validate_files(paths, labels, summary):
        if on_record is not None:
            on_record(checked)
    return summary
