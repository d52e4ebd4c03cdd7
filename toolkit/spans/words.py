"""The word tokenization every token-based measure uses (seqeval, +/-k boundaries, length buckets,
Jaccard, error analysis), whatever the model's tokenizer. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterator

_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[tuple[int, int]]:
    """Word and punctuation offsets used by every token-based measure."""
    return [m.span() for m in _WORD.finditer(text)]


def iter_words(text: str) -> Iterator[tuple[int, int]]:
    """`words(text)`, one at a time (a long document's scoring holds none of them)."""
    return (m.span() for m in _WORD.finditer(text))


def words_around(text: str, a: int, b: int) -> list[tuple[int, int]]:
    """The words starting before `b` from just before `a`: what `words(text)` gives there, for counting words and
    word boundaries at positions in [a, b] without the document's whole word list. A word that began before `a`
    is read from `a - 1` (its start stays before `a`; its end is its own)."""
    out = []
    for m in _WORD.finditer(text, max(0, a - 1)):
        if m.start() >= b:
            break
        out.append(m.span())
    return out
