"""CoNLL-style column files: one token a line, tag in the last column, blank lines between sentences.

Documents are delimited by `-DOCSTART-` lines; a file without them holds one
document per sentence. The text of a document is its tokens joined by single
spaces, sentences joined by newlines: CoNLL keeps no original whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from toolkit.data.importers.base import ImportLog
from toolkit.data.schema import Span, SpanRecord
from toolkit.errors import ToolkitError
from toolkit.spans.overlaps import max_disjoint, split_offsets
from toolkit.spans.tagging import SCHEMES, decode_tags, encode_tags, guess_scheme

_WORD = re.compile(r"\w+|[^\w\s]")
Token = tuple[int, str, str]  # (line number, token, tag)


def _fields(line: str) -> list[str]:
    # Tabs when present, so labels with spaces ("Governing Law") survive.
    return line.split("\t") if "\t" in line else line.split()


def _prescan(path: Path) -> tuple[bool, list[str]]:
    has_docstart = False
    tags: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("-DOCSTART-"):
                has_docstart = True
            elif line.strip():
                tags.add(_fields(line.rstrip("\r\n"))[-1])
    return has_docstart, sorted(tags)


def _documents(path: Path, by_docstart: bool) -> Iterator[tuple[str | None, list[list[Token]]]]:
    """(id from the DOCSTART line, sentences) per document."""
    doc_id: str | None = None
    sentences: list[list[Token]] = []
    sentence: list[Token] = []
    with path.open(encoding="utf-8") as handle:
        for no, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if line.startswith("-DOCSTART-"):
                if sentence:
                    sentences.append(sentence)
                    sentence = []
                if sentences:
                    yield doc_id, sentences
                fields = _fields(line)
                doc_id = fields[1].strip() if len(fields) == 2 and fields[1].strip() not in ("", "-X-", "O") else None
                sentences = []
                continue
            if not line.strip():
                if sentence:
                    sentences.append(sentence)
                    sentence = []
                    if not by_docstart:
                        yield None, sentences
                        sentences = []
                continue
            fields = _fields(line)
            token, tag = (fields[0], fields[-1]) if len(fields) >= 2 else (fields[0], "")
            sentence.append((no, token, tag))
    if sentence:
        sentences.append(sentence)
    if sentences:
        yield doc_id, sentences


def read_conll(paths: list[Path], log: ImportLog, scheme: str = "auto") -> Iterator[SpanRecord]:
    """Yield one record per document; tag repairs are reported as warnings, unreadable tags as errors."""
    if scheme != "auto" and scheme not in SCHEMES:
        raise ToolkitError(f"unknown tag scheme {scheme!r}", fix=f"use one of auto, {', '.join(SCHEMES)}")
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ToolkitError(f"{path}: no such file", fix="pass CoNLL/BIO column files")
        try:
            has_docstart, all_tags = _prescan(path)
        except UnicodeDecodeError as exc:
            raise ToolkitError(
                f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})", fix="re-encode the file as UTF-8"
            ) from None
        file_scheme = guess_scheme(all_tags) if scheme == "auto" else scheme
        for n, (doc_id, sentences) in enumerate(_documents(path, has_docstart), start=1):
            rid = doc_id or f"{path.stem}-{n}"
            yield _to_record(rid, sentences, file_scheme, log, str(path))


def _to_record(rid: str, sentences: list[list[Token]], scheme: str, log: ImportLog, name: str) -> SpanRecord:
    pieces: list[str] = []
    offsets: list[tuple[int, int]] = []
    lines: list[int] = []
    tags: list[str] = []
    pos = 0
    for s_index, sentence in enumerate(sentences):
        if s_index:
            pieces.append("\n")
            pos += 1
            tags.append("O")  # a sentence break ends any chunk
            offsets.append((pos - 1, pos - 1))
            lines.append(sentence[0][0])
        for t_index, (no, token, tag) in enumerate(sentence):
            if t_index:
                pieces.append(" ")
                pos += 1
            if tag == "":
                log.warn(
                    "missing_tag",
                    f"token {token!r} has no tag column; read as O.",
                    "write TOKEN<TAB>TAG on every line.",
                    file=name,
                    line=no,
                    record_id=rid,
                )
                tag = "O"
            pieces.append(token)
            offsets.append((pos, pos + len(token)))
            lines.append(no)
            tags.append(tag)
            pos += len(token)
    text = "".join(pieces)
    chunks, issues = decode_tags(tags, scheme)  # type: ignore[arg-type]
    for index, message in issues:
        log.warn(
            "tag_sequence",
            message + ".",
            f"check the tags, or pass --scheme if the file is not {scheme.upper()}.",
            file=name,
            line=lines[index],
            record_id=rid,
        )
    spans = [Span(start=offsets[a][0], end=offsets[b - 1][1], label=label) for label, a, b in chunks]
    return SpanRecord(
        id=rid,
        text=text,
        spans=sorted(spans, key=lambda s: (s.start, s.end, s.label)),
        meta={"source": Path(name).name, "line": sentences[0][0][0]},
    )


def write_conll(records: list[SpanRecord], path: Path, log: ImportLog, scheme: str = "iob2") -> None:
    """Export as TOKEN<TAB>TAG lines. Overlapping spans cannot be flat-tagged: the fewest are left out, each
    reported."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as out:
        for rec in records:
            log.documents += 1
            kept = set(max_disjoint(rec.spans))
            for i, s in enumerate(rec.spans):
                if i not in kept:
                    log.drop_span(
                        "not_representable",
                        f"{s.start}-{s.end} {s.label!r} overlaps another span; a flat tag sequence holds one span per "
                        f"token.",
                        "export to docbin or brat (they keep overlaps), or split labels into separate files.",
                        severity="warning",
                        record_id=rec.id,
                        field=f"spans[{i}]",
                    )
            spans = [rec.spans[i] for i in sorted(kept)]
            cuts = {s.start for s in spans} | {s.end for s in spans}
            tokens = split_offsets([m.span() for m in _WORD.finditer(rec.text)], cuts)
            start_index = {a: k for k, (a, _) in enumerate(tokens)}
            end_index = {b: k for k, (_, b) in enumerate(tokens)}
            chunks = [(s.label, start_index[s.start], end_index[s.end] + 1) for s in spans]
            tags = encode_tags(chunks, len(tokens), scheme)  # type: ignore[arg-type]
            inside = [False] * len(tokens)
            for _, a, b in chunks:
                for k in range(a, b - 1):
                    inside[k] = True
            out.write(f"-DOCSTART-\t{rec.id}\n\n")
            for k, ((a, b), tag) in enumerate(zip(tokens, tags)):
                out.write(f"{rec.text[a:b]}\t{tag}\n")
                # A sentence break at a newline, but never inside a span (it would cut it).
                if k + 1 < len(tokens) and "\n" in rec.text[b : tokens[k + 1][0]] and not inside[k]:
                    out.write("\n")
            out.write("\n")
            log.spans += len(spans)
