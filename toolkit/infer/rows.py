"""The per-document work of `toolkit predict`, shared by the local path and Ray Data's workers.

`extract_file` turns a file into document rows (or failure rows), lazily; `batched_rows` turns
document rows into prediction rows (or failure rows), in model calls bounded by text as well as by
count. Rows are JSON strings with a `kind`, so they cross Ray's object store as plain strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from toolkit.data.documents import DocumentError, InputDocument, count_documents, read_documents
from toolkit.spans.content import drop_contentless
from toolkit.spans.decoding import PredictedSpan


def encode_row(obj: dict) -> str:
    """One row as a line of JSON. A name that is not UTF-8 (a file name os.fsdecode holds as surrogates, or a lone
    surrogate from a JSON escape) is not UTF-8 text (nor an Arrow string, for Ray), so that row is written with JSON's
    \\u escapes: still valid JSON on one line, and `json.loads` gives back the exact name."""
    line = json.dumps(obj, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(obj)
    return line


def failure_row(source: str, doc_id: str | None, reason: str, fix: str) -> str:
    return encode_row({"kind": "failure", "source": source, "id": doc_id, "reason": reason, "fix": fix})


def extract_file(
    path: str, done: frozenset[tuple[str, str]] = frozenset(), piece: tuple[int, int, int] | None = None
) -> Iterator[str]:
    """`file_items` as rows (a document as a row of kind `document`), what Ray's tasks send as plain strings."""
    for item in file_items(path, done, piece):
        yield item if isinstance(item, str) else encode_row({"kind": "document", **item.to_dict()})


def file_items(
    path: str, done: frozenset[tuple[str, str]] = frozenset(), piece: tuple[int, int, int] | None = None
) -> Iterator[InputDocument | str]:
    """One file's documents (only the lines of `piece` of a JSONL file) and failure rows, leaving out documents
    already done. A generator, so a large JSONL file is never held as rows. The local path passes the documents on
    as they are: a long document's text is then held once, not also as a JSON row and its parse."""
    read_any = False
    try:
        for item in read_documents(Path(path), piece):
            read_any = True
            if isinstance(item, tuple):
                doc_id, problem = item
                yield failure_row(path, doc_id, problem.reason, problem.fix)
            elif item.key not in done:
                yield item
            item = None  # not held while the caller predicts the next one
        if (
            not read_any
            and path.endswith(".jsonl")
            and (piece is None or piece[0] == 0)
            and count_documents(Path(path)) == 0
        ):
            yield failure_row(
                path,
                None,
                "no documents (the file is empty, or only blank lines)",
                "write one JSON record per line, or pass the right file",
            )
    except DocumentError as exc:
        yield failure_row(path, None, exc.reason, exc.fix)
    except (OSError, UnicodeDecodeError) as exc:
        yield failure_row(path, None, f"cannot read: {exc}", "check the file's permissions and encoding (UTF-8)")
    except Exception as exc:  # noqa: BLE001 - no file may end the run: whatever a reader meets is this file's failure
        yield failure_row(
            path,
            None,
            f"reading failed: {type(exc).__name__}: {exc}",
            "report it with this file; the other files went on",
        )


def predict_rows(
    predictor, documents: list[InputDocument], model_id: str, batch_size: int
) -> list[str | PredictionRow]:
    """Output rows for `documents`, in order (failures as strings, predictions as `PredictionRow`s). When a batch
    fails, each document is retried alone so the failure is pinned to the one document that causes it and the
    others still get their spans."""
    if not documents:
        return []
    try:
        lazy = getattr(predictor, "reads_file_text", False)  # else a FileText (a long .txt file) is read whole
        predictions = predictor.predict([d.text if lazy else str(d.text) for d in documents], batch_size=batch_size)
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
    report = getattr(predictor, "last_report", {})
    per_document = {meta_key: report.get(report_key, {}) for report_key, meta_key in COUNTED.items()}
    return [
        PredictionRow(d, spans, model_id, {key: counts[i] for key, counts in per_document.items() if counts.get(i)})
        for i, (d, spans) in enumerate(zip(documents, predictions))
    ]


# What a predictor's last_report counts per document (document index -> count) -> the row's meta key. Each says
# where the text or a span was cut for memory's sake, so nothing is changed silently.
COUNTED = {
    # a long document's span cut where no place to end it came within the bound (spans.streaming)
    "spans_cut_in_long_documents": "spans_cut_at_the_memory_bound",
    # its text cut where no tokenizer-safe place came within a piece (one word that long)
    "text_cut_in_long_documents": "text_cut_without_a_safe_place",
    # a segment longer than spans.segments.MAX_SEGMENT_CHARS, split (a segment model's documents)
    "segments_split_in_documents": "segments_split_at_max_length",
}


_NOT_UTF8 = re.compile("[\ud800-\udfff]")  # lone surrogates: the only str that UTF-8 cannot encode
ESCAPE_CHARS = 1 << 20  # text escaped a slice at a time


class PredictionRow:
    """A prediction row, {kind, id, text, spans, meta}, written in pieces: the text escaped a slice at a time
    and the spans one at a time, so a long document's row never exists whole beside its text. `str(row)` is
    `encode_row` of the same dict (what Ray's workers send back). Spans without a word are left out and
    counted (`toolkit.spans.content`)."""

    def __init__(
        self, d: InputDocument, spans: Sequence[PredictedSpan], model_id: str, counts: dict[str, int] | None = None
    ):
        self.doc = d
        self.spans, contentless = drop_contentless(d.text, spans)
        self.meta = {"source": d.source, **d.meta, "model": model_id}
        if contentless:  # dropped, not silently
            self.meta["spans_without_content"] = contentless
        self.meta.update(counts or {})  # `COUNTED`'s
        # Not a FileText's text: it was decoded strictly, which no lone surrogate passes.
        self.ascii_only = any(_NOT_UTF8.search(v) for v in (d.id, d.text) if isinstance(v, str)) or bool(
            _NOT_UTF8.search(json.dumps(self.meta, ensure_ascii=False))
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.doc.source, self.doc.id)

    def pieces(self, kind: bool = True) -> Iterator[str]:
        """The row's line (without its newline) in pieces; `kind=False` leaves out the kind (OUT's lines)."""

        def dump(value) -> str:
            return json.dumps(value, ensure_ascii=self.ascii_only)

        text = self.doc.text
        yield f"{{{dump('kind')}: {dump('prediction')}, " if kind else "{"
        yield f'{dump("id")}: {dump(self.doc.id)}, {dump("text")}: "'
        for lo in range(0, len(text), ESCAPE_CHARS):  # JSON escapes each character alone: slices escape alike
            yield dump(text[lo : lo + ESCAPE_CHARS])[1:-1]
        yield f'", {dump("spans")}: ['
        for k, span in enumerate(self.spans):
            yield (", " if k else "") + dump(span.to_dict(text))
        yield f"], {dump('meta')}: {dump(self.meta)}}}"

    def __str__(self) -> str:
        return "".join(self.pieces())


# Text per model call, in characters per document slot: about one 256-token window of English. A call
# holds at most batch_size windows' worth of text (or one document, however long), so one huge file
# no longer rides with batch_size - 1 others, and memory follows the windows in flight.
CHARS_PER_SLOT = 1_000


def batched_rows(
    rows: Iterable[InputDocument | str],
    predictor,
    model_id: str,
    batch_size: int,
    ready: Callable[[], bool] = lambda: True,
) -> Iterator[str | PredictionRow]:
    """Documents (as `InputDocument`s, or as rows of kind `document`) through the model; failure rows pass
    straight through. A model call takes at most `batch_size` documents and about `batch_size * CHARS_PER_SLOT`
    characters (a longer document goes alone), and runs as soon as `ready()` says no further row is waiting, so
    rows already read are not held back by a file still being read."""
    budget = batch_size * CHARS_PER_SLOT
    batch: list[InputDocument] = []
    chars = 0
    for row in rows:
        doc = row if isinstance(row, InputDocument) else None
        if doc is None:
            obj = json.loads(row)  # once per row: a document row carries its whole text
            if obj.pop("kind") != "document":
                yield row
            else:
                doc = InputDocument(**obj)
        row = None  # the document is what is kept: a long document is not held twice
        if doc is not None:
            if batch and chars + len(doc.text) > budget:
                yield from predict_rows(predictor, batch, model_id, batch_size)
                batch, chars = [], 0
            batch.append(doc)
            chars += len(doc.text)
            doc = None
        if batch and (len(batch) == batch_size or chars >= budget or not ready()):
            yield from predict_rows(predictor, batch, model_id, batch_size)
            batch, chars = [], 0
    yield from predict_rows(predictor, batch, model_id, batch_size)


def model_id_of(model: Path) -> str:
    """The artifact's model id (name-path), or the run directory's name."""
    from toolkit.rundir import MANIFEST, read_manifest

    if (Path(model) / MANIFEST).is_file():
        return read_manifest(model)["model_id"]
    return Path(model).resolve().name
