"""A text file's bytes as text: UTF-8, or the UTF-8/16/32 its byte-order mark names; anything else is refused
with the conversion that fixes it. Held whole (`decode_text`) or read from the file as it is sliced
(`read_file_text`, for a long file), with the same text and the same refusals."""

from __future__ import annotations

import codecs
from pathlib import Path

from toolkit.data.document_error import DocumentError
from toolkit.data.file_text import DecodeAt, FileBytes, FileText

# Byte-order marks and the codec each names; UTF-32's come first, as UTF-32 LE's starts with UTF-16 LE's.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text(data: bytes) -> str:
    """A text file's bytes as text: UTF-8, or the UTF-8/16/32 its byte-order mark names (the mark is
    not part of the text). Anything else raises DocumentError with the conversion that fixes it."""
    bom, codec = _marked_codec(data[:4])
    try:
        text = data[len(bom) :].decode(codec)
    except UnicodeDecodeError as exc:
        raise _undecodable(bom, codec, len(bom) + exc.start, data) from None
    _check_not_wide(bom, data)
    return text


def read_file_text(path: Path) -> FileText:
    """What `decode_text(path.read_bytes())` gives (NULs read as spaces, counted in `.nuls`), read from the file
    a block at a time when sliced, never held whole."""
    with path.open("rb") as f:
        bom, codec = _marked_codec(f.read(4))
    try:
        text = FileText(path, codec, len(bom))
    except DecodeAt as exc:
        raise _undecodable(bom, codec, exc.byte, FileBytes(path)) from None
    _check_not_wide(bom, FileBytes(path))
    return text


def _marked_codec(head: bytes) -> tuple[bytes, str]:
    """The byte-order mark the file starts with (b"" for none) and the codec it names (UTF-8 without one)."""
    for bom, codec in BOMS:
        if head.startswith(bom):
            return bom, codec
    return b"", "utf-8"


def _undecodable(bom: bytes, codec: str, byte: int, data: bytes | FileBytes) -> DocumentError:
    if bom:
        return DocumentError(
            f"starts with a {codec.upper()} byte-order mark but is not {codec.upper()} (byte {byte})",
            "re-save it in one encoding, ideally UTF-8",
        )
    return DocumentError(f"not UTF-8 (byte {byte})", conversion_fix(data))


def _check_not_wide(bom: bytes, data: bytes | FileBytes) -> None:
    codec = None if bom else wide_codec(data)
    if codec:  # ASCII in UTF-16/32 without a mark is valid UTF-8, with NULs where the wide code units are
        raise DocumentError(f"not UTF-8 text: its NUL bytes fall where {codec.upper()} puts them", conversion_fix(data))


# Where the NULs of ASCII text fall in each wide encoding without a byte-order mark: (codec, unit, positions).
WIDE_NULS = (
    ("utf-32le", 4, (1, 2, 3)),
    ("utf-32be", 4, (0, 1, 2)),
    ("utf-16le", 2, (1,)),
    ("utf-16be", 2, (0,)),
)


def _spread_sample(data: bytes | FileBytes, blocks: int = 16, size: int = 4096) -> bytes:
    """Up to `blocks` blocks of `size` bytes spread evenly over the data (all of it when it is small), each
    starting at a multiple of 4 so code units stay aligned."""
    if len(data) <= blocks * size:
        return data[0 : len(data)]
    step = (len(data) - size) // (blocks - 1)
    return b"".join(data[(i * step) // 4 * 4 : (i * step) // 4 * 4 + size] for i in range(blocks))


def wide_codec(data: bytes | FileBytes) -> str | None:
    """The UTF-16/32 codec (no byte-order mark) whose ASCII the bytes look like: nearly every byte at that
    codec's NUL positions is NUL and nearly none elsewhere, over a sample spread across the file. None for
    text without NULs and for UTF-8 text with NUL runs in it (NULs at every position alike)."""
    sample = _spread_sample(data)
    if sample.count(0) <= len(sample) // 4:
        return None
    for codec, unit, positions in WIDE_NULS:
        at = [sample[k::unit] for k in range(unit)]
        zero = sum(at[k].count(0) for k in positions) / max(1, sum(len(at[k]) for k in positions))
        other = [k for k in range(unit) if k not in positions]
        stray = sum(at[k].count(0) for k in other) / max(1, sum(len(at[k]) for k in other))
        if zero >= 0.9 and stray <= 0.1:
            return codec
    return None


def replace_nuls(text: str) -> tuple[str, int]:
    """UTF-8 text with NUL characters (a run of padding, an OCR or export artifact) as text with a space for
    each, so every offset still points at the same character of the file, and how many were replaced."""
    count = text.count("\0")
    return (text.replace("\0", " "), count) if count else (text, 0)


def conversion_fix(data: bytes | FileBytes) -> str:
    codec = wide_codec(data)
    if codec:
        return f"it looks like {codec.upper()} without a byte-order mark: convert it, e.g. `iconv -f {codec} -t utf-8`"
    return "convert it to UTF-8, e.g. `iconv -f cp1252 -t utf-8` for Windows text (`-f latin1` for ISO-8859-1)"
