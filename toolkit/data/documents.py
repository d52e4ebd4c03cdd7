"""Unlabeled documents for `toolkit predict`: span JSONL, .txt, .pdf (text layer) and .docx, or folders of them.

Each reader returns the text the model reads; that text is written with the predictions, so every
offset can be checked against it. A file that cannot be read raises `DocumentError` with the reason
and a fix; the caller reports it and goes on with the rest.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.data.document_error import DocumentError
from toolkit.data.file_text import FileText
from toolkit.data.text_encoding import BOMS, conversion_fix, decode_text, read_file_text, replace_nuls
from toolkit.errors import ToolkitError

SUFFIXES = (".jsonl", ".txt", ".pdf", ".docx")
# Pages of a PDF are joined with a form feed, as pdftotext does: offsets stay in one string, and a
# page break stays visible in the written text.
PAGE_BREAK = "\f"
# A .txt file larger than this is read as a `FileText`, from the file as it is sliced, not held whole (a reader
# that does not stream takes it whole). Below it, holding the text costs less than the model's own memory.
LAZY_TEXT_BYTES = 4 << 20
# Bounds on what a .docx (a zip archive) may inflate to. The text of the longest contracts is a few
# MB; images and fonts inside a .docx are never read, but their sizes count against the total.
MAX_ZIP_ENTRY_BYTES = 256 * 2**20
MAX_ZIP_TOTAL_BYTES = 1024 * 2**20
MAX_ZIP_ENTRIES = 10_000


@dataclass
class InputDocument:
    """A document to predict on. `key` (source, id) is unique in a collection and is what a resumed run skips."""

    id: str
    text: str | FileText  # a FileText: a long .txt file, read from the file as it is sliced
    source: str
    meta: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.id)

    def to_dict(self) -> dict:
        return {"id": self.id, "text": str(self.text), "source": self.source, "meta": self.meta}


@dataclass
class Sources:
    """Every entry under the inputs, each accounted for: `files` are read; `skipped` (other suffixes,
    hidden entries, a folder reached again through a link) are counted and named in the summary, as
    (path, why); `unreadable` (FIFOs, sockets, devices, broken or looping links, folders that cannot be
    listed) become failure records, as (path, reason, fix)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    unreadable: list[tuple[Path, str, str]] = field(default_factory=list)

    @property
    def entries(self) -> int:
        return len(self.files) + len(self.skipped) + len(self.unreadable)


NOT_REGULAR = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}
REGULAR_FIX = "predict reads regular files: copy the content into a .txt, .pdf, .docx or .jsonl file"


def list_sources(inputs: list[Path]) -> Sources:
    """Files to read (named files, and folders searched recursively in sorted order), and every other
    entry of those folders, reported rather than left out silently. Paths are absolute, so a document's
    source names it wherever the run (or a Ray worker) starts. Links are followed; a folder reached
    twice (a link cycle) is read once."""
    sources = Sources()
    for given in inputs:
        path = Path(given).absolute()
        kind, reason = _entry_kind(path)
        if kind == "dir":
            _walk(path.resolve(), sources, set())
        elif kind == "file":
            if path.suffix.lower() not in SUFFIXES:
                raise ToolkitError(
                    f"{display_name(str(path))}: cannot read {path.suffix or 'files without a suffix'}",
                    fix=f"pass {', '.join(SUFFIXES)} files, or a folder",
                )
            sources.files.append(path.resolve())
        elif kind == "missing":
            raise ToolkitError(f"{display_name(str(path))}: no such file or folder", fix="check the path")
        else:
            raise ToolkitError(
                f"{display_name(str(path))}: {reason}", fix=REGULAR_FIX if kind == "other" else "check the path"
            )
    if not sources.files:
        raise ToolkitError(
            f"no {'/'.join(SUFFIXES)} files in {', '.join(display_name(str(p)) for p in inputs)}",
            fix="pass files or folders that hold documents",
        )
    sources.files.sort(key=str)
    sources.skipped.sort(key=lambda s: str(s[0]))
    sources.unreadable.sort(key=lambda u: str(u[0]))
    return sources


def _entry_kind(path: Path) -> tuple[str, str]:
    """("dir" | "file" | "missing" | "link" | "other", the reason when it cannot be read)."""
    try:
        mode = os.stat(path).st_mode  # follows links
    except OSError as exc:
        if os.path.islink(path):
            if exc.errno == errno.ELOOP:
                return "link", "a symbolic link loop"
            target = display_name(os.readlink(path))
            return "link", f"a broken symbolic link (to {target}, which does not exist)"
        if exc.errno == errno.ENOENT:
            return "missing", "no such file or folder"
        return "other", f"cannot read its status ({exc.strerror})"
    if stat.S_ISDIR(mode):
        return "dir", ""
    if stat.S_ISREG(mode):
        return "file", ""
    return "other", f"not a regular file ({NOT_REGULAR.get(stat.S_IFMT(mode), 'a special file')})"


def _walk(folder: Path, sources: Sources, seen: set[tuple[int, int]]) -> None:
    # os.scandir rather than Path.rglob, which keeps only what `is_file` says and so drops FIFOs,
    # broken links and link loops without a word.
    st = os.stat(folder)
    if (st.st_dev, st.st_ino) in seen:
        sources.skipped.append((folder, "a link to a folder read already"))
        return
    seen.add((st.st_dev, st.st_ino))
    try:
        with os.scandir(folder) as it:
            names = sorted(entry.name for entry in it)
    except OSError as exc:
        sources.unreadable.append((folder, f"cannot list the folder ({exc.strerror})", "check its permissions"))
        return
    for name in names:
        path = folder / name
        if name.startswith("."):
            sources.skipped.append((path, "hidden"))  # .git, .DS_Store: named in the summary, not read
            continue
        kind, reason = _entry_kind(path)
        if kind == "dir":
            _walk(path, sources, seen)
        elif kind == "file":
            if path.suffix.lower() in SUFFIXES:
                sources.files.append(path)
            else:
                sources.skipped.append((path, f"not {'/'.join(SUFFIXES)}"))
        elif kind == "missing":  # removed while the folder was listed
            sources.unreadable.append((path, "removed while the folder was read", "run again"))
        else:
            sources.unreadable.append(
                (path, reason, REGULAR_FIX if kind == "other" else "remove the link or fix its target")
            )


def display_name(name: str) -> str:
    """A path as a terminal can print it: bytes that are not UTF-8 (held as surrogates by os.fsdecode)
    shown as \\xNN. Output rows keep the name itself, losslessly (see `toolkit.infer.collection`)."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate os.fsdecode does not make (from a JSON escape): shown as \\udNNN
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def read_documents(
    path: Path, piece: tuple[int, int, int] | None = None
) -> Iterator[InputDocument | tuple[str, DocumentError]]:
    """The documents of one file. A JSONL file yields one per line (only the lines of `piece`, a
    (start byte, end byte, first line number) from `split_jsonl`, when given), and a bad line yields
    (its id or line, DocumentError) so the other lines still count; any other file yields one document
    or raises DocumentError."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _jsonl(path, piece)
        return
    reader = {".txt": _txt, ".pdf": _pdf, ".docx": _docx}[suffix]
    text, meta = reader(path)
    if not text or text.isspace():  # not text.strip(): that copies a long document
        raise DocumentError("no text", "the file is empty or holds only whitespace")
    yield InputDocument(id=str(path), text=text, source=str(path), meta={"format": suffix[1:], **meta})


def count_documents(path: Path) -> int:
    """Documents `read_documents` will yield (for the progress bar): lines of a JSONL file, else one."""
    if path.suffix.lower() != ".jsonl":
        return 1
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 1  # reading it fails again in `read_documents`, which reports it


def split_jsonl(path: Path, lines_per_piece: int) -> list[tuple[int, int, int]]:
    """(start byte, end byte, first line number) pieces of about `lines_per_piece` lines, so workers
    can each read part of one large file."""
    pieces, start, first, n, offset = [], 0, 1, 0, 0
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            offset += len(line)
            if n - first + 1 == lines_per_piece:
                pieces.append((start, offset, first))
                start, first = offset, n + 1
    if offset > start:
        pieces.append((start, offset, first))
    return pieces


def _jsonl(
    path: Path, piece: tuple[int, int, int] | None = None
) -> Iterator[InputDocument | tuple[str, DocumentError]]:
    # Spans are ignored, so a record needs only its text; ids default to the line number.
    start, end, first = piece or (0, None, 1)
    with path.open("rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(end - start)
    if start == 0 and data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        start = len(codecs.BOM_UTF8)
    elif start == 0 and any(data.startswith(bom) for bom, _ in BOMS):
        # JSONL is UTF-8 by definition, and its lines are found (and split among workers) by byte.
        raise DocumentError(
            "JSONL in UTF-16 or UTF-32 (it starts with that byte-order mark)",
            "convert it to UTF-8, e.g. `iconv -f utf-16 -t utf-8`",
        )
    try:
        # split on "\n" only: str.splitlines would also split at U+2028, which JSON strings may hold raw.
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 (byte {start + exc.start})", conversion_fix(data)) from None
    for n, line in enumerate(lines, first):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield where, DocumentError(f"line {n}: not JSON ({exc.msg})", "write one JSON object per line")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            yield (
                where,
                DocumentError(f"line {n}: no 'text' string field", 'each line needs {"id": ..., "text": "..."}'),
            )
            continue
        rid = obj.get("id", where)
        if not obj["text"] or obj["text"].isspace():
            yield str(rid), DocumentError(f"line {n}: 'text' is empty", "remove the record, or give it text")
            continue
        yield InputDocument(id=str(rid), text=obj["text"], source=str(path), meta={"format": "jsonl", "line": n})


def _txt(path: Path) -> tuple[str | FileText, dict]:
    # NULs inside UTF-8 text are replaced, counted in the document's meta, never dropped silently.
    if path.stat().st_size > LAZY_TEXT_BYTES:
        file_text = read_file_text(path)
        text, nuls = file_text, file_text.nuls
    else:
        text, nuls = replace_nuls(decode_text(path.read_bytes()))
    return text, ({"nul_characters_replaced": nuls} if nuls else {})


def _pdf(path: Path) -> tuple[str, dict]:
    """The text layer of every page, joined by PAGE_BREAK; pages without one are listed (1-based)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise DocumentError("the PDF is encrypted", "decrypt it first, e.g. `qpdf --decrypt in.pdf out.pdf`")
        pages = [page.extract_text() or "" for page in reader.pages]
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises what malformed objects make it meet (PdfReadError, TypeError, RecursionError, ...)
        raise DocumentError(
            f"not a readable PDF ({type(exc).__name__}: {exc})", "open it in a PDF viewer; re-save or repair it"
        ) from None
    empty = [i + 1 for i, text in enumerate(pages) if not text.strip()]
    if pages and len(empty) == len(pages):
        raise DocumentError(
            f"no text layer on any of its {len(pages)} pages (a scan?)",
            "run OCR first, e.g. `ocrmypdf in.pdf out.pdf`, and predict on the output",
        )
    return PAGE_BREAK.join(pages), {"pages": len(pages), "pages_without_text": empty}


def _docx(path: Path) -> tuple[str, dict]:
    """Paragraphs and tables in body order: a paragraph a line, table cells by tabs and rows by lines."""
    import docx
    from docx.table import Table

    _check_zip_bounds(path)
    try:
        document = docx.Document(str(path))
        blocks = []
        tables = 0
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                tables += 1
                blocks.extend("\t".join(cell.text for cell in row.cells) for row in block.rows)
            else:
                blocks.append(block.text)
        paragraphs = len(document.paragraphs)
    except Exception as exc:  # noqa: BLE001 - python-docx raises what its parser meets (KeyError, AttributeError, lxml errors, PackageNotFoundError)
        raise DocumentError(
            f"not a readable .docx ({type(exc).__name__}: {exc})",
            "open it in a word processor and save it as .docx again, or convert it to .txt",
        ) from None
    return "\n".join(blocks), {"paragraphs": paragraphs, "tables": tables}


def _check_zip_bounds(path: Path) -> None:
    """Refuse a .docx that is not a zip, or whose entries would inflate past the bounds, before any
    entry is read: python-docx reads whole parts into memory, so a zip bomb would take the process down.
    zipfile reads an entry no further than the size its header declares, so bounding the declared
    sizes bounds what is inflated."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentError(
            f"not a .docx: not a zip archive ({exc})", "open it in a word processor and save it as .docx again"
        ) from None
    if len(infos) > MAX_ZIP_ENTRIES:
        raise DocumentError(
            f"{len(infos)} zip entries, over the bound of {MAX_ZIP_ENTRIES}",
            "save it as .docx again, or convert it to .txt",
        )
    biggest = max(infos, key=lambda i: i.file_size, default=None)
    total = sum(i.file_size for i in infos)
    if biggest is not None and biggest.file_size > MAX_ZIP_ENTRY_BYTES:
        raise DocumentError(
            f"zip entry {biggest.filename!r} inflates to {biggest.file_size:,} bytes, over the bound of "
            f"{MAX_ZIP_ENTRY_BYTES:,}",
            "a .docx this large is likely malformed or hostile; convert it to .txt if it is genuine",
        )
    if total > MAX_ZIP_TOTAL_BYTES:
        raise DocumentError(
            f"its zip entries inflate to {total:,} bytes, over the bound of {MAX_ZIP_TOTAL_BYTES:,}",
            "a .docx this large is likely malformed or hostile; convert it to .txt if it is genuine",
        )
