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
