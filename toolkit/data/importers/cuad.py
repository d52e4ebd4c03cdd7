"""CUAD: `master_clauses.csv` (one row per contract, a column per clause category holding a
Python-style list of clause strings) plus the contracts' `.txt` files.

Each clause string is split into pieces at `<omitted>` and each piece is located
verbatim in its contract. Where a piece occurs more than once the choice is
deterministic: the first occurrence, except for the categories in
`OCCURRENCE_OVERRIDES` (CUAD's own answer offsets for `Document Name` point at its
second occurrence: the title usually appears on a cover page and again at the top
of the agreement; a title that occurs once is taken there).
Pieces that cannot be found verbatim are left out and listed.
"""

from __future__ import annotations

import ast
import csv
import difflib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog, checked_span
from toolkit.data.schema import SpanRecord, sort_spans
from toolkit.errors import ToolkitError

OMITTED = "<omitted>"
OCCURRENCE_OVERRIDES = {"Document Name": 2}
FILENAME_SIMILARITY = 0.9


def _key(name: str) -> str:
    """Filename key that survives case, extension, punctuation and mangled characters."""
    stem = re.sub(r"\.(pdf|txt)$", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^0-9a-z]", "", stem.lower())


class _TextIndex:
    """Maps CSV file names to contract .txt files: exact stem, then normalised key, then similarity."""

    def __init__(self, txt_files: list[Path]):
        self.by_stem = {p.stem: p for p in txt_files}
        self.by_key: dict[str, Path] = {}
        for p in txt_files:
            self.by_key.setdefault(_key(p.name), p)
        self.keys = list(self.by_key)

    def find(self, filename: str) -> tuple[Path | None, str]:
        stem = re.sub(r"\.(pdf|txt)$", "", filename, flags=re.IGNORECASE)
        if stem in self.by_stem:
            return self.by_stem[stem], "exact"
        key = _key(filename)
        if key in self.by_key:
            return self.by_key[key], "normalised"
        close = difflib.get_close_matches(key, self.keys, n=1, cutoff=FILENAME_SIMILARITY)
        if close:
            return self.by_key[close[0]], "similar"
        return None, "none"


def _txt_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += sorted(p.rglob("*.txt"))
        elif p.suffix.lower() == ".txt" and p.is_file():
            out.append(p)
        else:
            raise ToolkitError(
                f"{p}: not a contract .txt file or a directory of them",
                fix="pass master_clauses.csv followed by the full_contract_txt directory",
            )
    return out


def _clause_strings(cell: str) -> list[str]:
    cell = cell.strip()
    if not cell:
        return []
    value = ast.literal_eval(cell)  # CUAD writes Python list literals; literal_eval never executes code
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return value


def _occurrences(text: str, piece: str) -> list[int]:
    found, at = [], text.find(piece)
    while at != -1:
        found.append(at)
        at = text.find(piece, at + 1)
    return found


def read_cuad(paths: list[Path], log: ImportLog) -> Iterator[SpanRecord]:
    """paths: master_clauses.csv, then contract .txt files or directories of them."""
    csv_paths = [Path(p) for p in paths if str(p).lower().endswith(".csv")]
    if len(csv_paths) != 1:
        raise ToolkitError(
            "CUAD import needs exactly one master_clauses.csv",
            fix="toolkit import cuad master_clauses.csv full_contract_txt/ -o cuad.jsonl",
        )
    csv_path = csv_paths[0]
    index = _TextIndex(_txt_files([p for p in paths if not str(p).lower().endswith(".csv")]))
    csv.field_size_limit(sys.maxsize)  # clause cells are long
    with csv_path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if "Filename" not in columns:
            raise ToolkitError(f"{csv_path}: no 'Filename' column", fix="pass CUAD's master_clauses.csv")
        # Answer columns hold normalised values, not clause text; one is spelled "...- Answer".
        categories = [c for c in columns if c != "Filename" and not c.replace(" ", "").endswith("-Answer")]
        used_txt: set[Path] = set()
        for row in reader:
            line = reader.line_num
            filename = row["Filename"]
            txt, how = index.find(filename)
            where = {"file": str(csv_path), "line": line, "record_id": filename}
            if txt is None:
                log.drop_document(
                    "missing_text",
                    f"no contract text matches {filename!r}.",
                    "pass the directory holding its .txt file.",
                    severity="warning",
                    **where,
                )
                continue
            if how == "similar":
                log.warn(
                    "filename_matched",
                    f"{filename!r} matched {txt.name!r} by similarity.",
                    "check the pairing; rename the .txt to match exactly.",
                    **where,
                )
            if txt in used_txt:
                log.drop_document(
                    "duplicate_row",
                    f"{txt.name} is already paired with an earlier row.",
                    "remove the duplicate row.",
                    **where,
                )
                continue
            used_txt.add(txt)
            yield _record(txt, row, categories, log, where)


def _record(txt: Path, row: dict, categories: list[str], log: ImportLog, where: dict) -> SpanRecord:
    text = txt.read_text(encoding="utf-8")
    rid = txt.stem
    where = {**where, "record_id": rid}
    spans = []
    for label in categories:
        try:
            strings = _clause_strings(row[label] or "")
        except (ValueError, SyntaxError):
            log.drop_span(
                "bad_cell",
                f"column {label!r} is not a list of strings.",
                "write the cell as ['clause one', 'clause two'].",
                field=label,
                **where,
            )
            continue
        wanted = OCCURRENCE_OVERRIDES.get(label, 1)
        for string in strings:
            for piece in (p.strip() for p in string.split(OMITTED)):
                if not piece:
                    continue
                found = _occurrences(text, piece)
                if not found:
                    log.drop_span(
                        "not_found",
                        f"{label!r} piece {piece[:80]!r} is not in the contract verbatim.",
                        "correct the clause text in the CSV to match the contract.",
                        field=label,
                        **where,
                    )
                    continue
                at = found[min(wanted, len(found)) - 1]
                span = checked_span(text, at, at + len(piece), label, log, field=label, **where)
                if span is not None:
                    spans.append(span)
    unique = sorted(set(spans), key=lambda s: (s.start, s.end, s.label))
    if len(unique) != len(spans):
        log.warn(
            "repeated_clause",
            f"{len(spans) - len(unique)} clause piece(s) listed twice under the same category; kept once.",
            "nothing to do.",
            **where,
        )
    return SpanRecord(id=rid, text=text, spans=sort_spans(unique), meta={"source": txt.name})
