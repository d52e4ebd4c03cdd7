"""PubTator (title + abstract + tab-separated mentions), as used by NCBI-disease and BC5CDR.

The document text is `title + " " + abstract`, which is what PubTator offsets index.
Relation lines (e.g. BC5CDR's CID) are counted and reported, not imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog, checked_span
from toolkit.data.schema import SpanRecord, sort_spans
from toolkit.errors import ToolkitError


def _blocks(path: Path) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """(first line number, [(line number, line), ...]) for each blank-line-separated block."""
    block: list[tuple[int, str]] = []
    with path.open(encoding="utf-8") as handle:
        for no, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.strip() == "":
                if block:
                    yield block[0][0], block
                    block = []
                continue
            block.append((no, line))
    if block:
        yield block[0][0], block


def read_pubtator(paths: list[Path], log: ImportLog) -> Iterator[SpanRecord]:
    """Yield one record per PubTator document; bad mentions are logged and left out."""
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ToolkitError(f"{path}: no such file", fix="pass PubTator .txt files")
        try:
            yield from _read_file(path, log)
        except UnicodeDecodeError as exc:
            raise ToolkitError(
                f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})", fix="re-encode the file as UTF-8"
            ) from None


def _read_file(path: Path, log: ImportLog) -> Iterator[SpanRecord]:
    name = str(path)
    for first_line, block in _blocks(path):
        title = abstract = None
        pmid = None
        mentions: list[tuple[int, list[str]]] = []
        for no, line in block:
            if "|t|" in line[:40] and title is None:
                pmid, title = line.split("|t|", 1)
            elif "|a|" in line[:40] and abstract is None:
                pmid_a, abstract = line.split("|a|", 1)
                if pmid is not None and pmid_a != pmid:
                    log.warn(
                        "pmid_mismatch",
                        f"abstract id {pmid_a!r} differs from title id {pmid!r}.",
                        "keep title and abstract of one document together.",
                        file=name,
                        line=no,
                    )
            elif "\t" in line:
                mentions.append((no, line.split("\t")))
            else:
                log.warn(
                    "unparsed_line",
                    f"line not understood: {line[:60]!r}.",
                    "PubTator lines are ID|t|title, ID|a|abstract or tab-separated mentions.",
                    file=name,
                    line=no,
                )
        if title is None or abstract is None:
            log.drop_document(
                "incomplete_document",
                "a block without both a |t| title and an |a| abstract line.",
                "each PubTator document needs ID|t|title and ID|a|abstract lines.",
                spans=len(mentions),
                file=name,
                line=first_line,
            )
            continue
        text = f"{title} {abstract}"
        spans = []
        for no, cols in mentions:
            if len(cols) == 4:
                log.ignore(f"relation lines ({cols[1]})")
                continue
            if len(cols) < 5:
                log.drop_span(
                    "bad_mention_line",
                    f"{len(cols)} tab-separated columns.",
                    "mention lines are ID, start, end, text, type[, concept id].",
                    file=name,
                    line=no,
                    record_id=pmid,
                )
                continue
            try:
                start, end = int(cols[1]), int(cols[2])
            except ValueError:
                log.drop_span(
                    "bad_offsets",
                    f"offsets {cols[1]!r}, {cols[2]!r} are not integers.",
                    "columns 2 and 3 are character offsets.",
                    file=name,
                    line=no,
                    record_id=pmid,
                )
                continue
            span = checked_span(text, start, end, cols[4], log, expected=cols[3], file=name, line=no, record_id=pmid)
            if span is not None:
                spans.append(span)
        yield SpanRecord(id=pmid, text=text, spans=sort_spans(spans), meta={"source": path.name, "line": first_line})


def write_pubtator(records: list[SpanRecord], path: Path, log: ImportLog) -> None:
    """Export records as PubTator; a text without the title/abstract separator becomes title only."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as out:
        for rec in records:
            if "\n" in rec.text:
                log.warn(
                    "newline_in_text",
                    "PubTator holds one line of title and one of abstract; newlines were kept as spaces.",
                    "nothing to do; offsets are unchanged.",
                    record_id=rec.id,
                )
            text = rec.text.replace("\n", " ").replace("\r", " ")
            # PubTator offsets index `title + " " + abstract`; splitting at the first
            # ". " keeps that string equal to the text, so offsets stay valid.
            cut = text.find(". ")
            title, abstract = (text[: cut + 1], text[cut + 2 :]) if cut != -1 else (text, "")
            out.write(f"{rec.id}|t|{title}\n{rec.id}|a|{abstract}\n")
            for s in rec.spans:
                out.write(f"{rec.id}\t{s.start}\t{s.end}\t{text[s.start : s.end]}\t{s.label}\t-\n")
            out.write("\n")
            log.documents += 1
            log.spans += len(rec.spans)
