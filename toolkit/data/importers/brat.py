"""BRAT standoff: DOC.txt with DOC.ann (T lines: `T1<TAB>Label 10 20<TAB>text`).

Discontinuous text-bound annotations (`10 20;25 30`) do not fit a contiguous span.
By default each one is left out and reported; `discontinuous="split"` imports its
fragments as separate spans (also reported). They are never merged silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog, checked_span
from toolkit.data.schema import SpanRecord, sort_spans
from toolkit.errors import ToolkitError

DISCONTINUOUS = ("report", "split")
_IGNORED = {
    "R": "relations",
    "E": "events",
    "A": "attributes",
    "M": "attributes",
    "N": "normalizations",
    "#": "notes",
    "*": "equivalences",
}


def _ann_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += sorted(p.rglob("*.ann"))
        elif p.suffix == ".ann" and p.is_file():
            out.append(p)
        elif p.suffix == ".txt" and p.with_suffix(".ann").is_file():
            out.append(p.with_suffix(".ann"))
        else:
            raise ToolkitError(
                f"{p}: not a BRAT .ann file or a directory of them",
                fix="pass DIR or DOC.ann files (each with DOC.txt beside it)",
            )
    if not out:
        raise ToolkitError(
            f"no .ann files under {', '.join(map(str, paths))}", fix="pass the BRAT collection directory"
        )
    return out


def read_brat(paths: list[Path], log: ImportLog, discontinuous: str = "report") -> Iterator[SpanRecord]:
    if discontinuous not in DISCONTINUOUS:
        raise ToolkitError(f"unknown --discontinuous {discontinuous!r}", fix=f"use one of {', '.join(DISCONTINUOUS)}")
    for ann in _ann_files(paths):
        txt = ann.with_suffix(".txt")
        if not txt.is_file():
            log.drop_document(
                "missing_text",
                f"{ann.name} has no {txt.name} beside it.",
                "put the document text next to its .ann file.",
                file=str(ann),
            )
            continue
        # newline="" keeps \r\n as two characters: BRAT offsets count them.
        text = txt.open(encoding="utf-8", newline="").read()
        spans = []
        for no, raw in enumerate(ann.open(encoding="utf-8", newline=""), start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            where = {"file": str(ann), "line": no, "record_id": ann.stem}
            kind = line[0]
            if kind != "T":
                log.ignore(_IGNORED.get(kind, f"lines starting {kind!r}"))
                continue
            parts = line.split("\t")
            if len(parts) < 3:
                log.drop_span(
                    "bad_annotation_line",
                    f"{line[:60]!r} is not ID<TAB>TYPE OFFSETS<TAB>TEXT.",
                    "fix the line in the .ann file.",
                    **where,
                )
                continue
            label, _, offsets = parts[1].partition(" ")
            try:
                fragments = [tuple(int(x) for x in frag.split()) for frag in offsets.split(";")]
                if any(len(f) != 2 for f in fragments):
                    raise ValueError
            except ValueError:
                log.drop_span(
                    "bad_offsets",
                    f"offsets {offsets!r} of {parts[0]} are not START END[;START END].",
                    "fix the offsets.",
                    **where,
                )
                continue
            if len(fragments) > 1:
                if discontinuous == "report":
                    log.drop_span(
                        "discontinuous",
                        f"{parts[0]} {label!r} has {len(fragments)} fragments ({offsets}).",
                        "import with --discontinuous split to keep each fragment as its own span.",
                        severity="warning",
                        **where,
                    )
                    continue
                log.warn(
                    "discontinuous_split",
                    f"{parts[0]} {label!r} split into {len(fragments)} spans.",
                    "nothing to do.",
                    **where,
                )
                for a, b in fragments:
                    span = checked_span(text, a, b, label, log, **where)
                    if span is not None:
                        spans.append(span)
                continue
            ((a, b),) = fragments
            span = checked_span(text, a, b, label, log, expected=parts[2], **where)
            if span is not None:
                spans.append(span)
        yield SpanRecord(id=ann.stem, text=text, spans=sort_spans(spans), meta={"source": ann.name})


def write_brat(records: list[SpanRecord], directory: Path, log: ImportLog) -> None:
    """One DOC.txt + DOC.ann per record; overlapping spans are fine in BRAT."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for rec in records:
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in rec.id)
        (directory / f"{stem}.txt").write_text(rec.text, encoding="utf-8", newline="")
        lines = []
        renamed: set[str] = set()
        for k, s in enumerate(rec.spans, start=1):
            covered = rec.text[s.start : s.end]
            if "\n" in covered or "\t" in covered:
                covered = covered.replace("\n", " ").replace("\t", " ")
            lines.append(f"T{k}\t{s.label.replace(' ', '_')} {s.start} {s.end}\t{covered}\n")
            if " " in s.label and s.label not in renamed:
                renamed.add(s.label)
                log.warn(
                    "label_renamed",
                    f"BRAT types cannot hold spaces: {s.label!r} written as {s.label.replace(' ', '_')!r}.",
                    f"map it back on import: --map-label {s.label.replace(' ', '_')}={s.label!r}.",
                    record_id=rec.id,
                )
        (directory / f"{stem}.ann").write_text("".join(lines), encoding="utf-8", newline="")
        log.documents += 1
        log.spans += len(rec.spans)
