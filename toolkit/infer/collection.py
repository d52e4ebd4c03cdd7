"""`toolkit predict`: a trained run or artifact over a collection of documents, streamed to span JSONL.

The per-document functions of `toolkit.infer.rows` do the work, on one machine and on Ray alike
(`toolkit.infer.ray_data`). Rows are JSON strings with a `kind`: `prediction` rows go to OUT,
`failure` rows to OUT's failure file.
OUT is appended line by line and flushed, so a crashed run resumes: documents already in OUT are
skipped, and a last line cut off mid-write is removed first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.data.documents import count_documents, list_sources
from toolkit.errors import ToolkitError
from toolkit.infer.rows import batched_rows, extract_file, model_id_of

FORMATS = ("spans", "labelstudio")


def local_rows(model: Path, files: list[Path], done: frozenset, batch_size: int) -> Iterator[str]:
    from toolkit.infer import load_predictor

    predictor = load_predictor(model)
    documents = (row for path in files for row in extract_file(str(path), done))
    yield from batched_rows(documents, predictor, model_id_of(model), batch_size)


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

    def write(self, row: str) -> dict:
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
            self._failed.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self._failed.flush()
        else:
            self._out.write(json.dumps(obj, ensure_ascii=False) + "\n")
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
    files, skipped = list_sources(inputs)
    sink = PredictionSink(stream_path(out, fmt))
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
        "files": len(files),
        "files_skipped": [str(p) for p in skipped],
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
