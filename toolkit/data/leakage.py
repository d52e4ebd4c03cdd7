"""Dev text among unlabelled text: the check distillation runs before a teacher labels anything. Pure: no I/O.

A dev document leaks when one of its sentences (whitespace collapsed, case folded, at least `min_chars` long)
occurs in an unlabelled document: a whole copy, a copy in another layout (title and abstract split or joined)
and a copy inside a longer document are all caught, and common short sentences ("Results.") are not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")


def sentences(text: str, min_chars: int) -> list[str]:
    """The text's sentences, normalized (case folded, whitespace collapsed), of at least `min_chars`."""
    out = (_SPACE.sub(" ", s).strip().casefold() for s in _SENTENCE_END.split(text))
    return [s for s in out if len(s) >= min_chars]


@dataclass(frozen=True)
class Leak:
    dev_id: str  # the dev record's id
    source: str  # where the unlabelled document is (file:line, or file)
    sentence: str  # the first sentence they share


def shared_sentences(
    dev: Sequence[tuple[str, str]], pool: Iterable[tuple[str, str]], min_chars: int = 40
) -> list[Leak]:
    """Every dev document (id, text) sharing a sentence with an unlabelled document (where, text); one Leak
    per dev document, naming the first unlabelled document that shares one."""
    seen: dict[str, str] = {}
    for where, text in pool:
        for s in sentences(text, min_chars):
            seen.setdefault(s, where)
    leaks = []
    for dev_id, text in dev:
        hit = next((s for s in sentences(text, min_chars) if s in seen), None)
        if hit is not None:
            leaks.append(Leak(dev_id, seen[hit], hit))
    return leaks
