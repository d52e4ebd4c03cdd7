"""Streamed JSONL reading and writing. Reading never loads a whole file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import Problem, ToolkitError


@dataclass(frozen=True)
class JsonLine:
    """One line of a JSONL file: its parsed object, or the problem that stopped parsing."""

    line: int
    obj: Any = None
    problem: Problem | None = None


def iter_json_lines(path: Path) -> Iterator[JsonLine]:
    """Yield each non-blank line of `path`, parsed; bad lines come back as problems, never raise."""
    path = Path(path)
    if not path.is_file():
        raise ToolkitError(f"{path}: no such file", fix="check the path; JSONL files hold one JSON object a line")
    name = str(path)
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark is harmless; accept it
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield JsonLine(
                    line_no,
                    problem=Problem(
                        kind="encoding",
                        message=f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line.",
                        fix="re-encode the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`).",
                        file=name,
                        line=line_no,
                    ),
                )
                continue
            if not text.strip():
                yield JsonLine(
                    line_no,
                    problem=Problem(
                        kind="blank_line",
                        message="blank line skipped.",
                        fix="remove blank lines; JSONL has one object on every line.",
                        file=name,
                        line=line_no,
                        severity="warning",
                    ),
                )
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield JsonLine(
                    line_no,
                    problem=Problem(
                        kind="json",
                        message=f"malformed JSON: {exc.msg} at column {exc.colno}.",
                        fix="write one complete JSON object per line (check quotes, commas and brackets).",
                        file=name,
                        line=line_no,
                    ),
                )
                continue
            yield JsonLine(line_no, obj=obj)


def write_jsonl(path: Path, objects: Iterable[dict]) -> int:
    """Write objects one a line (UTF-8, no ASCII escaping); returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for obj in objects:
            handle.write(json.dumps(obj, ensure_ascii=False) + "\n")
            count += 1
    return count
