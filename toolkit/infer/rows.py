"""The per-document work of `toolkit predict`, shared by the local path and Ray Data's workers.

`extract_file` turns a file into document rows (or failure rows); `batched_rows` turns document rows
into prediction rows (or failure rows). Rows are JSON strings with a `kind`, so they cross Ray's
object store as plain strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from toolkit.data.documents import DocumentError, InputDocument, count_documents, read_documents


def failure_row(source: str, doc_id: str | None, reason: str, fix: str) -> str:
    return json.dumps(
        {"kind": "failure", "source": source, "id": doc_id, "reason": reason, "fix": fix}, ensure_ascii=False
    )


def extract_file(
    path: str, done: frozenset[tuple[str, str]] = frozenset(), piece: tuple[int, int, int] | None = None
) -> list[str]:
    """One file's documents (rows of kind `document`; only the lines of `piece` of a JSONL file) and
    failures, leaving out documents already done."""
    rows: list[str] = []
    read_any = False
    try:
        for item in read_documents(Path(path), piece):
            read_any = True
            if isinstance(item, tuple):
                doc_id, problem = item
                rows.append(failure_row(path, doc_id, problem.reason, problem.fix))
            elif item.key not in done:
                rows.append(json.dumps({"kind": "document", **item.to_dict()}, ensure_ascii=False))
        if (
            not read_any
            and path.endswith(".jsonl")
            and (piece is None or piece[0] == 0)
            and count_documents(Path(path)) == 0
        ):
            rows.append(
                failure_row(
                    path,
                    None,
                    "no documents (the file is empty, or only blank lines)",
                    "write one JSON record per line, or pass the right file",
                )
            )
    except DocumentError as exc:
        rows.append(failure_row(path, None, exc.reason, exc.fix))
    except (OSError, UnicodeDecodeError) as exc:
        rows.append(failure_row(path, None, f"cannot read: {exc}", "check the file's permissions and encoding (UTF-8)"))
    except Exception as exc:  # noqa: BLE001 - no file may end the run: whatever a reader meets is this file's failure
        rows.append(
            failure_row(
                path,
                None,
                f"reading failed: {type(exc).__name__}: {exc}",
                "report it with this file; the other files went on",
            )
        )
    return rows


def predict_rows(predictor, documents: list[InputDocument], model_id: str, batch_size: int) -> list[str]:
    """Output rows for `documents`, in order. When a batch fails, each document is retried alone so the
    failure is pinned to the one document that causes it and the others still get their spans."""
    if not documents:
        return []
    try:
        predictions = predictor.predict([d.text for d in documents], batch_size=batch_size)
    except Exception as exc:  # noqa: BLE001 - any model error on one document must not end the collection
        if len(documents) > 1:
            return [row for d in documents for row in predict_rows(predictor, [d], model_id, batch_size)]
        d = documents[0]
        return [
            failure_row(
                d.source,
                d.id,
                f"prediction failed: {type(exc).__name__}: {exc}",
                "report it with this document; the others went on",
            )
        ]
    return [
        json.dumps(
            {
                "kind": "prediction",
                "id": d.id,
                "text": d.text,
                "spans": [p.to_dict(d.text) for p in spans],
                "meta": {"source": d.source, **d.meta, "model": model_id},
            },
            ensure_ascii=False,
        )
        for d, spans in zip(documents, predictions)
    ]


def batched_rows(rows: Iterable[str], predictor, model_id: str, batch_size: int) -> Iterator[str]:
    """Document rows through the model `batch_size` at a time; failure rows pass straight through."""
    batch: list[InputDocument] = []
    for row in rows:
        obj = json.loads(row)  # once per row: a document row carries its whole text
        if obj.pop("kind") == "document":
            batch.append(InputDocument(**obj))
            if len(batch) == batch_size:
                yield from predict_rows(predictor, batch, model_id, batch_size)
                batch = []
        else:
            yield row
    yield from predict_rows(predictor, batch, model_id, batch_size)


def model_id_of(model: Path) -> str:
    """The artifact's model id (name-path), or the run directory's name."""
    from toolkit.rundir import MANIFEST, read_manifest

    if (Path(model) / MANIFEST).is_file():
        return read_manifest(model)["model_id"]
    return Path(model).resolve().name
