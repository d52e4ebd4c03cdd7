"""`toolkit predict`: a trained run or artifact over a collection of documents, streamed to span JSONL.

The per-document functions of `toolkit.infer.rows` do the work, on one machine and on Ray alike
(`toolkit.infer.ray_data`). Rows are JSON strings with a `kind`: `prediction` rows go to OUT,
`failure` rows to OUT's failure file.
OUT is appended line by line and flushed, so a crashed run resumes: documents already in OUT are
skipped, and a last line cut off mid-write is removed first.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.data.documents import InputDocument, count_documents, display_name, list_sources
from toolkit.errors import ToolkitError
from toolkit.infer.rows import (
    CHARS_PER_SLOT,
    PredictionRow,
    batched_rows,
    encode_row,
    failure_row,
    file_items,
    model_id_of,
)

FORMATS = ("spans", "labelstudio")


def local_rows(model: Path, files: list[Path], done: frozenset, batch_size: int) -> Iterator[str]:
    from toolkit.infer import load_predictor

    predictor = load_predictor(model)
    documents = ReadAhead((item for path in files for item in file_items(str(path), done)), batch_size * CHARS_PER_SLOT)
    try:
        yield from batched_rows(documents, predictor, model_id_of(model), batch_size, ready=documents.ready)
    finally:
        documents.close()


def row_chars(row: InputDocument | str) -> int:
    return len(row.text) if isinstance(row, InputDocument) else len(row)


class ReadAhead:
    """Rows produced by a reader thread while the model predicts: the files are read (a PDF's text layer
    can take minutes) while rows already read are predicted and written. At most `max_chars` of rows
    wait (always one, however long), so memory follows the documents in flight.

    Our own, on `threading`: the standard queue bounds items, not their size, and one item here can be
    a whole document."""

    def __init__(self, rows: Iterator[InputDocument | str], max_chars: int):
        self._rows, self._max = rows, max_chars
        self._waiting: deque[str] = deque()
        self._chars = 0
        self._done = False
        self._error: BaseException | None = None
        self._stop = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, name="predict-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for row in self._rows:
                size = row_chars(row)
                with self._cond:
                    self._cond.wait_for(
                        lambda size=size: self._stop or not self._waiting or self._chars + size <= self._max
                    )
                    if self._stop:
                        return
                    self._waiting.append(row)
                    self._chars += size
                    self._cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self._error = exc
        finally:
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def ready(self) -> bool:
        """Whether a row waits now (so a model call need not wait for the reader)."""
        with self._cond:
            return bool(self._waiting)

    def __iter__(self) -> Iterator[InputDocument | str]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._done)
                if not self._waiting:
                    if self._error is not None:
                        raise self._error
                    return
                box = [self._waiting.popleft()]
                self._chars -= row_chars(box[0])
                self._cond.notify_all()
            # Popped as it is yielded: a local would hold a long document's row all the while it is predicted.
            yield box.pop()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()


@dataclass
class PredictionSink:
    """OUT (appended, flushed per row) and its failure file (rewritten each run: failures are retried)."""

    out: Path
    done: set = field(default_factory=set)
    repaired_tail: bool = False
    predicted: int = 0
    failures: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.out.exists():
            self._resume()
        self._out = self.out.open("a", encoding="utf-8")
        self._failed = failures_path(self.out).open("w", encoding="utf-8")

    def _resume(self) -> None:
        """Keys of the complete lines already in OUT; a torn last line (a crash mid-write) is cut off."""
        data = self.out.read_bytes()
        keep = len(data)
        lines = data.split(b"\n")
        for n, line in enumerate(lines[:-1], 1):
            try:
                obj = json.loads(line)
                self.done.add((obj["meta"]["source"], obj["id"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ToolkitError(
                    f"{self.out}, line {n}: not a prediction line of `toolkit predict`, so the run cannot resume from "
                    f"it",
                    fix="write to a new -o file, or remove the file to start again",
                ) from None
        if lines[-1].strip():
            try:
                obj = json.loads(lines[-1])
                self.done.add((obj["meta"]["source"], obj["id"]))
                data += b"\n"
            except json.JSONDecodeError:
                keep = len(data) - len(lines[-1])
                self.repaired_tail = True
            self.out.write_bytes(data[:keep] if self.repaired_tail else data)

    def write(self, row: str | PredictionRow) -> dict:
        """Write one row (or, for a row that cannot be written, a failure naming why); returns what was written.
        Only the file system's own failure (a full disk) ends the run, with every row so far kept."""
        try:
            return self._write(row)
        except OSError as exc:
            raise ToolkitError(
                f"cannot write to {display_name(str(self.out))}: {exc.strerror or exc}",
                fix="free space or fix permissions, then run the same command again: it resumes after the last row",
            ) from None
        except Exception as exc:  # noqa: BLE001 - one row that cannot be written must not end the run
            source = "?"
            try:
                if isinstance(row, PredictionRow):
                    source, doc_id = row.key
                else:
                    parsed = json.loads(row)
                    source, doc_id = parsed.get("meta", parsed).get("source", "?"), parsed.get("id")
            except Exception:  # noqa: BLE001 - the row itself is unreadable; the failure still names the error
                doc_id = None
            failure = {
                "source": source,
                "id": doc_id,
                "reason": f"its row could not be written: {type(exc).__name__}: {exc}",
                "fix": "report it with this document; the others went on",
            }
            self.failures.append(failure)
            self._failed.write(encode_row(failure) + "\n")
            self._failed.flush()
            return failure

    def _write(self, row: str | PredictionRow) -> dict:
        if isinstance(row, PredictionRow):
            if row.key not in self.done:
                # Written in pieces: a long document's row is never one string beside its text. A row that fails
                # part-way is cut off again, so OUT holds whole lines only.
                start = self._out.tell()
                try:
                    for piece in row.pieces(kind=False):
                        self._out.write(piece)
                    self._out.write("\n")
                    self._out.flush()
                except Exception:
                    self._out.truncate(start)
                    raise
                self.done.add(row.key)
                self.predicted += 1
                return {"id": row.doc.id, "meta": row.meta}
            row = str(row)
        obj = json.loads(row)
        kind = obj.pop("kind")
        if kind == "prediction":
            key = (obj["meta"]["source"], obj["id"])
            # (source, id) is what resuming relies on, so a repeated id is refused here, where every
            # row of a file passes, whichever worker read it.
            if key in self.done:
                line = obj["meta"].get("line")
                obj, kind = (
                    {
                        "source": key[0],
                        "id": key[1],
                        "reason": f"id {key[1]!r} appears again (line {line})",
                        "fix": "give every record its own id",
                    },
                    "failure",
                )
            else:
                self.done.add(key)
        if kind == "failure":
            self.failures.append(obj)
            self._failed.write(encode_row(obj) + "\n")
            self._failed.flush()
        else:
            self._out.write(encode_row(obj) + "\n")
            self._out.flush()
            self.predicted += 1
        return obj

    def close(self) -> None:
        self._out.close()
        self._failed.close()


def failures_path(out: Path) -> Path:
    return out.with_name(out.name + ".failures.jsonl")


def stream_path(out: Path, fmt: str) -> Path:
    """Where the span JSONL stream goes: OUT itself, or beside a Label Studio file (written at the end)."""
    return out if fmt == "spans" else out.with_name(out.name + ".spans.jsonl")


def predict_collection(
    model: Path,
    inputs: list[Path],
    out: Path,
    fmt: str = "spans",
    batch_size: int = 16,
    ray_address: str | None = None,
    ray_actors: int | None = None,
    ray_cpus_per_actor: int = 1,
    progress=None,
) -> dict:
    """Predict on every document under `inputs`; returns the summary (also what the CLI prints).
    `progress(advanced, total)` is called once with the documents in the inputs, then as rows arrive; `ray_address`
    (e.g. "local", "auto", "ray://head:10001")
    runs the same per-document functions on Ray Data."""
    from toolkit.rundir import open_run

    if fmt not in FORMATS:
        raise ToolkitError(f"unknown --format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
    if batch_size < 1 or (ray_actors is not None and ray_actors < 1) or ray_cpus_per_actor < 1:
        raise ToolkitError(
            "--batch-size, --ray-actors and --ray-cpus-per-actor must be at least 1", fix="e.g. --batch-size 16"
        )
    open_run(model)  # a clear error for a path that is not a run or artifact, before any work
    sources = list_sources(inputs)
    files = sources.files
    sink = PredictionSink(stream_path(out, fmt))
    for path, reason, fix in sources.unreadable:
        sink.write(failure_row(str(path), None, reason, fix))
    done = frozenset(sink.done)
    started = time.perf_counter()
    total = sum(count_documents(p) for p in files)
    if progress:
        progress(0, total)
    if ray_address:
        from toolkit.infer.ray_data import ray_rows

        rows = ray_rows(Path(model), files, done, batch_size, ray_address, ray_actors, ray_cpus_per_actor)
    else:
        rows = local_rows(Path(model), files, done, batch_size)
    pages_without_text: dict[str, list[int]] = {}
    try:
        for row in rows:
            obj = sink.write(row)
            if obj.get("meta", {}).get("pages_without_text"):
                pages_without_text[obj["meta"]["source"]] = obj["meta"]["pages_without_text"]
            if progress:
                progress(1, total)
    finally:
        sink.close()
    seconds = time.perf_counter() - started
    if fmt == "labelstudio":
        from toolkit.data.importers.labelstudio import write_labelstudio_predictions

        write_labelstudio_predictions(sink.out, out, model_id_of(model))
    return {
        "out": str(out),
        "stream": str(sink.out),
        "entries": sources.entries,
        "files": len(files),
        "files_skipped": [f"{display_name(str(p))} ({why})" for p, why in sources.skipped],
        "documents_in_inputs": total,
        "already_done": len(done),
        "repaired_torn_line": sink.repaired_tail,
        "predicted": sink.predicted,
        "failed": len(sink.failures),
        "failures": sink.failures,
        "failures_file": str(failures_path(sink.out)),
        "pages_without_text": pages_without_text,
        "seconds": round(seconds, 2),
        "documents_per_second": round(sink.predicted / seconds, 3) if seconds > 0 else None,
        "engine": f"ray ({ray_address})" if ray_address else "local",
    }
