"""Unlabeled text for domain-adaptive pre-training: read documents, pack token blocks.

Sources: a `.txt` file (one document), a directory (every `*.txt` below it, one document
each), a JSONL file whose lines carry a `text` field (span files qualify: their spans are
ignored), or `sample:NAME`. Blank documents are counted, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import DataError, Problem, ToolkitError


@dataclass
class TextReport:
    documents: int = 0
    characters: int = 0
    blank_documents: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "documents": self.documents,
            "characters": self.characters,
            "blank_documents": len(self.blank_documents),
            "blank_examples": self.blank_documents[:10],
        }


def _jsonl_texts(path: Path) -> Iterator[tuple[str, str]]:
    problems = []
    with open(path, encoding="utf-8", errors="strict") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(
                    Problem(
                        "malformed_json", f"not valid JSON ({exc.msg})", "fix the line or remove it", str(path), line_no
                    )
                )
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                record_id = obj.get("id") if isinstance(obj, dict) else None
                problems.append(
                    Problem(
                        "missing_text",
                        "no string field 'text'",
                        'give every line a "text" string',
                        str(path),
                        line_no,
                        str(record_id) if record_id is not None else None,
                        "text",
                    )
                )
                continue
            yield f"{path}:{line_no}", obj["text"]
    if problems:
        raise DataError(problems, f"{path}: {len(problems)} line(s) without usable text")


def read_texts(source: str, max_docs: int | None = None, report: TextReport | None = None) -> list[str]:
    """The documents of a text source (see the module docstring), in order."""
    return [text for _, text in read_located_texts(source, max_docs, report)]


def read_located_texts(
    source: str, max_docs: int | None = None, report: TextReport | None = None
) -> list[tuple[str, str]]:
    """(where, text) of each document of a text source, in order; where is file:line for JSONL, else the file."""
    from toolkit.data.records import resolve_data_path

    path = resolve_data_path(source) if source.startswith("sample:") else Path(source)
    if not path.exists():
        raise ToolkitError(
            f"{path}: no such file or directory",
            fix="point it (data.train / data.dev, distill.unlabelled) at a .txt file, a directory of .txt files "
            "or a JSONL file with a 'text' field",
        )
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise ToolkitError(
                f"{path}: no .txt files in this directory",
                fix="add .txt files, or point at a JSONL file with a 'text' field",
            )
        pairs: Iterator[tuple[str, str]] = ((str(f), f.read_text(encoding="utf-8")) for f in files)
    elif path.suffix in (".jsonl", ".json"):
        pairs = _jsonl_texts(path)
    else:
        pairs = iter([(str(path), path.read_text(encoding="utf-8"))])
    report = report if report is not None else TextReport()
    texts = []
    for where, text in pairs:
        if max_docs is not None and len(texts) >= max_docs:
            break
        if not text.strip():
            report.blank_documents.append(where)
            continue
        texts.append((where, text))
        report.documents += 1
        report.characters += len(text)
    if not texts:
        raise ToolkitError(f"{path}: no non-blank documents", fix="check the source holds text")
    return texts


def pack_blocks(token_ids: Sequence[Sequence[int]], block_size: int) -> list[list[int]]:
    """Concatenate documents' token ids (each already framed by its special tokens) and cut
    blocks of exactly `block_size`; the remainder shorter than a block is dropped, as in
    transformers' run_mlm.py / run_clm.py (`group_texts`). Pure."""
    flat = [t for ids in token_ids for t in ids]
    return [flat[i : i + block_size] for i in range(0, len(flat) - block_size + 1, block_size)]


def split_blocks(token_ids: Sequence[Sequence[int]], block_size: int) -> list[list[int]]:
    """Without packing: every document cut into blocks of at most `block_size` (the last may be shorter). Pure."""
    return [list(ids[i : i + block_size]) for ids in token_ids for i in range(0, len(ids), block_size)]
