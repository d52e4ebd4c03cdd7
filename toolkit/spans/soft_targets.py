"""A teacher tagger's scores -> a student's per-token soft targets (distillation). Pure: numpy only, no I/O.

Teacher and student may tokenize differently (mpnet and MiniLM do), so targets travel through document
characters, as gold spans do (`alignment.py`): the teacher's scores are kept per teacher word (its first
sub-token's logits, the token its decoding reads), and each student token that carries a target takes the
scores of the teacher word covering its first character. A student token starting inside a teacher word is a
continuation, so the teacher's B- mass for a label moves to its I- tag, as a gold span's inner token is I-.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.spans.alignment import trainable_tokens


@dataclass(frozen=True)
class TeacherWords:
    """One document as the teacher read it: each word's character range and logits [words, tags]."""

    starts: np.ndarray  # int64 [words], ascending
    ends: np.ndarray  # int64 [words]
    logits: np.ndarray  # float [words, tags]


def teacher_words(keys: Sequence[tuple[int, int]], word_ids: Sequence[int | None], scores: np.ndarray) -> TeacherWords:
    """A document's stitched tokens (`decoding.stitch_windows`: character ranges in order, word ids, scores)
    grouped into words: a word runs from its first token's start to its last token's end and keeps its first
    token's scores."""
    starts, ends, rows = [], [], []
    prev: object = object()
    for t, ((a, b), w) in enumerate(zip(keys, word_ids)):
        if w is not None and w == prev and starts:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
            rows.append(t)
        prev = w
    width = scores.shape[-1] if scores.ndim == 2 else 0
    return TeacherWords(
        np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64),
        np.asarray(scores, dtype=np.float32)[rows] if rows else np.zeros((0, width), dtype=np.float32),
    )


def continuation_pairs(tags: Sequence[str]) -> list[tuple[int, int]]:
    """(B- index, I- index) of every label in a flat IOB2 tag list."""
    index = {t: i for i, t in enumerate(tags)}
    return [(i, index["I-" + t[2:]]) for i, t in enumerate(tags) if t.startswith("B-") and "I-" + t[2:] in index]


def as_continuation(logits: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """The scores of a word's inner part: each label's B- and I- probability joined on I- (log-sum-exp of the
    two logits, so the distribution at temperature 1 keeps its O/label split) and B- left at a floor."""
    out = np.array(logits, dtype=np.float32, copy=True)
    floor = out.min(axis=-1) - 20.0  # e^-20 below the least likely tag: no B- mass, and no -inf in the loss
    for b, i in pairs:
        out[..., i] = np.logaddexp(out[..., b], out[..., i])
        out[..., b] = floor
    return out


def soft_targets(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    teacher: TeacherWords,
    pairs: Sequence[tuple[int, int]],
    label_all_subtokens: bool = False,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(logits [tokens, tags], mask [tokens], tokens without a teacher word) for one student window. The mask
    is True on the tokens that carry a target (`alignment.trainable_tokens`) and have a teacher word; a
    trainable token no teacher word covers (text the teacher's tokenizer dropped) is counted, not guessed."""
    tags = teacher.logits.shape[-1]
    out = np.zeros((len(offsets), tags), dtype=np.float32)
    mask = np.zeros(len(offsets), dtype=bool)
    missing = 0
    for t, keep in enumerate(trainable_tokens(word_ids, label_all_subtokens)):
        if not keep:
            continue
        start = offsets[t][0]
        j = int(np.searchsorted(teacher.starts, start, side="right")) - 1
        if j < 0 or start >= teacher.ends[j]:
            missing += 1
            continue
        # As for gold targets, a token is B- only where it starts where the teacher's word starts.
        out[t] = as_continuation(teacher.logits[j], pairs) if start > teacher.starts[j] else teacher.logits[j]
        mask[t] = True
    return out, mask, missing
