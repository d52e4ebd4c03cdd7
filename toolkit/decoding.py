"""Per-token scores -> character spans, with windows stitched. Pure: numpy only, no torch, no I/O.

Training-time evaluation, `toolkit eval` and the serving endpoint all decode
through `stitch_windows` + `decode_flat` / `decode_multi_label`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.tagging import decode_tags


@dataclass(frozen=True)
class PredictedSpan:
    start: int
    end: int
    label: str
    score: float

    def to_dict(self, text: str | None = None) -> dict:
        out = {"start": self.start, "end": self.end, "label": self.label, "score": round(self.score, 4)}
        if text is not None:
            out["text"] = text[self.start : self.end]
        return out


@dataclass
class WindowScores:
    """One window's token offsets (document characters; (0, 0) for special tokens), word ids and scores [tokens, outputs]."""

    offsets: Sequence[tuple[int, int]]
    word_ids: Sequence[int | None]
    scores: np.ndarray


def stitch_windows(windows: Sequence[WindowScores]) -> tuple[list[tuple[int, int]], list[int | None], np.ndarray]:
    """Document-level tokens and scores. Each token takes its scores from the window where it sits
    furthest from an edge, so every token is judged with the most context on both sides."""
    best: dict[tuple[int, int], tuple[int, int | None, np.ndarray]] = {}
    for w in windows:
        real = [i for i, (a, b) in enumerate(w.offsets) if b > a]
        if not real:
            continue
        first, last = real[0], real[-1]
        for i in real:
            key = (int(w.offsets[i][0]), int(w.offsets[i][1]))
            margin = min(i - first, last - i)
            if key not in best or margin > best[key][0]:
                best[key] = (margin, w.word_ids[i], w.scores[i])
    keys = sorted(best)
    if not keys:
        width = windows[0].scores.shape[-1] if windows else 0
        return [], [], np.zeros((0, width), dtype=np.float32)
    return keys, [best[k][1] for k in keys], np.stack([best[k][2] for k in keys])


def _word_level(word_ids: Sequence[int | None], label_all_subtokens: bool) -> list[int]:
    """Index of the token whose prediction each token uses: itself, or its word's first sub-token."""
    src, first_of_word, prev = [], 0, object()
    for t, w in enumerate(word_ids):
        if label_all_subtokens or w is None or w != prev:
            first_of_word = t
        src.append(t if label_all_subtokens else first_of_word)
        prev = w
    return src


def _to_char_span(text: str | None, offsets, a: int, b: int) -> tuple[int, int]:
    start, end = offsets[a][0], offsets[b - 1][1]
    if text is not None:  # some tokenizers include a leading space in a token's offsets
        piece = text[start:end]
        start += len(piece) - len(piece.lstrip())
        end -= len(piece) - len(piece.rstrip())
    return start, end


def decode_flat(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    probs: np.ndarray,
    id_to_tag: Sequence[str],
    label_all_subtokens: bool = False,
    text: str | None = None,
) -> list[PredictedSpan]:
    """Argmax IOB2 tags -> spans; a span's score is the mean probability of its tokens' tags."""
    if len(offsets) == 0:
        return []
    src = _word_level(word_ids, label_all_subtokens)
    ids = probs.argmax(-1)
    tags = [id_to_tag[int(ids[s])] for s in src]
    conf = [float(probs[s, ids[s]]) for s in src]
    chunks, _ = decode_tags(tags, "iob2")  # predictions: lenient repair, as conlleval
    out = []
    for label, a, b in chunks:
        start, end = _to_char_span(text, offsets, a, b)
        if end > start:
            out.append(PredictedSpan(start, end, label, float(np.mean(conf[a:b]))))
    return out


def decode_multi_label(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    probs: np.ndarray,
    labels: Sequence[str],
    threshold: float = 0.5,
    label_all_subtokens: bool = False,
    text: str | None = None,
) -> list[PredictedSpan]:
    """Sigmoid B/I outputs per label -> spans of every label (they may overlap across labels)."""
    if len(offsets) == 0:
        return []
    src = _word_level(word_ids, label_all_subtokens)
    out = []
    for k, label in enumerate(labels):
        pb, pi = probs[src, 2 * k], probs[src, 2 * k + 1]
        tags = ["B-x" if b >= threshold and b >= i else "I-x" if i >= threshold else "O" for b, i in zip(pb, pi)]
        chunks, _ = decode_tags(tags, "iob2")
        for _, a, b in chunks:
            start, end = _to_char_span(text, offsets, a, b)
            if end > start:
                out.append(PredictedSpan(start, end, label, float(np.mean(np.maximum(pb[a:b], pi[a:b])))))
    return sorted(out, key=lambda s: (s.start, s.end, s.label))
