"""A long .txt file's text, read from the file a block at a time instead of held whole.

`FileText` gives what `decode_text` and `replace_nuls` give for the file (its length, any slice or character,
whether it is only whitespace) while holding a few blocks: a 100 MB contract is 200 MB as a Python str (one
non-ASCII character makes every character two bytes), more than everything else `toolkit predict` holds for it.
The file is read once when opened, to check it decodes and to index where each block starts in characters and
bytes; a slice then reads only its blocks. Written here rather than taken from a library: `io.TextIOWrapper`
seeks only to positions its own `tell()` returned and cannot seek to a character offset.

The readers that stream a document (the tagger's long-document path) read it as a `FileText`; anything else
takes `str(text)`, the whole text, as before.
"""

from __future__ import annotations

import bisect
import codecs
from collections import OrderedDict
from pathlib import Path

# Bytes decoded per block: what one slice reads at most per block it touches.
BLOCK_BYTES = 1 << 18
# Blocks kept decoded: a slice near a block's edge, and the span decoding that trails the tokenizer, hit them.
CACHED_BLOCKS = 4


class FileText:
    """The text of `path` from byte `start` on, in `codec`, with NULs read as spaces; indexable like a str."""

    def __init__(self, path: Path, codec: str, start: int, block_bytes: int | None = None):
        self.path, self.codec = Path(path), codec
        self._chars, self._bytes = [0], [start]  # block k: characters _chars[k]:_chars[k+1], bytes likewise
        self.nuls = 0
        self._only_space = True
        self._cache: OrderedDict[int, str] = OrderedDict()
        decoder = codecs.getincrementaldecoder(codec)("strict")
        at = start
        with self.path.open("rb") as f:
            f.seek(start)
            while True:
                data = f.read(block_bytes or BLOCK_BYTES)
                pending = len(decoder.getstate()[0])
                try:
                    text = decoder.decode(data, final=not data)
                except UnicodeDecodeError as exc:
                    raise DecodeAt(at - pending + exc.start) from None
                at += len(data)
                if text:
                    self.nuls += text.count("\0")
                    self._only_space = self._only_space and text.isspace()
                    self._chars.append(self._chars[-1] + len(text))
                    self._bytes.append(at - len(decoder.getstate()[0]))
                if not data:
                    break
        self._size = at

    def __len__(self) -> int:
        return self._chars[-1]

    def isspace(self) -> bool:
        return len(self) > 0 and self._only_space

    def __str__(self) -> str:
        return self[0 : len(self)]

    def __getitem__(self, key: int | slice) -> str:
        if isinstance(key, int):
            i = key + len(self) if key < 0 else key
            if not 0 <= i < len(self):
                raise IndexError("FileText index out of range")
            return self[i : i + 1]
        lo, hi, step = key.indices(len(self))
        if step != 1:
            raise ValueError("FileText slices take no step")
        if hi <= lo:
            return ""
        first = bisect.bisect_right(self._chars, lo) - 1
        last = bisect.bisect_left(self._chars, hi) - 1
        parts = [self._block(k)[max(0, lo - self._chars[k]) : hi - self._chars[k]] for k in range(first, last + 1)]
        return parts[0] if len(parts) == 1 else "".join(parts)

    def _block(self, k: int) -> str:
        if k in self._cache:
            self._cache.move_to_end(k)
            return self._cache[k]
        with self.path.open("rb") as f:
            if f.seek(0, 2) != self._size:
                raise FileChanged(self.path)
            f.seek(self._bytes[k])
            data = f.read(self._bytes[k + 1] - self._bytes[k])
        text = data.decode(self.codec).replace("\0", " ")
        if len(text) != self._chars[k + 1] - self._chars[k]:
            raise FileChanged(self.path)
        self._cache[k] = text
        if len(self._cache) > CACHED_BLOCKS:
            self._cache.popitem(last=False)
        return text


class DecodeAt(Exception):
    """The file does not decode in its codec from this byte (counted from the file's first byte)."""

    def __init__(self, byte: int):
        super().__init__(byte)
        self.byte = byte


class FileChanged(Exception):
    """The file is no longer what was indexed when it was opened (something wrote to it meanwhile)."""

    def __init__(self, path: Path):
        super().__init__(f"{path} changed while it was read: predict it again once nothing writes to it")


class FileBytes:
    """A file's bytes, sliced from the file (what `text_encoding.wide_codec` samples), never held whole."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._size = self.path.stat().st_size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: slice) -> bytes:
        lo, hi, _ = key.indices(self._size)
        with self.path.open("rb") as f:
            f.seek(lo)
            return f.read(max(0, hi - lo))
