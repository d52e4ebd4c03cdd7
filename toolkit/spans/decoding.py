"""Per-token scores -> character spans, with windows stitched. Pure: numpy only, no torch, no I/O.

Training-time evaluation, `toolkit eval` and the serving endpoint all decode
through `stitch_windows` + `decode_flat` / `decode_multi_label`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.spans.label_space import LabelSpace, layer_tags
from toolkit.spans.tagging import decode_tags
from toolkit.spans.viterbi import iob2_transitions, viterbi_path


@dataclass(frozen=True, slots=True)  # slots: a long document's spans are many
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
    """One window's token offsets (document characters; (0, 0) for special tokens), word ids and scores [tokens,
    outputs]."""

    offsets: Sequence[tuple[int, int]]
    word_ids: Sequence[int | None]
    scores: np.ndarray


def stitch_windows(windows: Sequence[WindowScores]) -> tuple[list[tuple[int, int]], list[int | None], np.ndarray]:
    """Document-level tokens and scores. Each token takes its scores from the window where it sits
    furthest from an edge, so every token is judged with the most context on both sides (ties: the
    earliest window, then the earliest token). Vectorized: it runs on every served document."""
    starts, ends, margins, word_ids, scores = [], [], [], [], []
    for w in windows:
        offsets = np.asarray(w.offsets, dtype=np.int64).reshape(-1, 2)
        real = np.flatnonzero(offsets[:, 1] > offsets[:, 0])
        if real.size == 0:
            continue
        starts.append(offsets[real, 0])
        ends.append(offsets[real, 1])
        margins.append(np.minimum(real - real[0], real[-1] - real))
        word_ids.extend(w.word_ids[i] for i in real.tolist())
        scores.append(np.asarray(w.scores)[real])
    if not starts:
        width = windows[0].scores.shape[-1] if windows else 0
        return [], [], np.zeros((0, width), dtype=np.float32)
    start, end, margin = np.concatenate(starts), np.concatenate(ends), np.concatenate(margins)
    # By characters, then the widest margin, then first seen; the first row of each character range wins.
    order = np.lexsort((np.arange(start.size), -margin, end, start))
    start, end = start[order], end[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = (start[1:] != start[:-1]) | (end[1:] != end[:-1])
    picks = order[first]
    keys = list(zip(start[first].tolist(), end[first].tolist()))
    return keys, [word_ids[i] for i in picks.tolist()], np.concatenate(scores)[picks]


def _groups(word_ids: Sequence[int | None], label_all_subtokens: bool) -> list[list[int]]:
    """Token indices decoded as one unit: each word's sub-tokens (read from the first), or each token."""
    groups: list[list[int]] = []
    prev: object = object()
    for t, w in enumerate(word_ids):
        if label_all_subtokens or w is None or w != prev or not groups:
            groups.append([t])
        else:
            groups[-1].append(t)
        prev = w
    return groups


def _to_char_span(text: str | None, offsets, groups: list[list[int]], a: int, b: int) -> tuple[int, int]:
    """Characters of units a..b-1 (each unit a group of tokens)."""
    start, end = offsets[groups[a][0]][0], offsets[groups[b - 1][-1]][1]
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
    decoding: str = "argmax",
) -> list[PredictedSpan]:
    """IOB2 tags -> spans; a span's score is the mean probability of its tokens' tags.

    decoding: 'argmax' tags each unit alone (orphan I- tags are repaired as conlleval does);
    'viterbi' takes the most probable valid IOB2 sequence (`toolkit.spans.viterbi`)."""
    if len(offsets) == 0:
        return []
    groups = _groups(word_ids, label_all_subtokens)
    src = [g[0] for g in groups]  # a word is tagged by its first sub-token
    unit_probs = probs[src]
    if decoding == "viterbi":
        ids = viterbi_path(unit_probs, *iob2_transitions(id_to_tag))
    else:
        ids = unit_probs.argmax(-1)
    tags = [id_to_tag[int(i)] for i in ids]
    conf = [float(unit_probs[k, i]) for k, i in enumerate(ids)]
    chunks, _ = decode_tags(tags, "iob2")  # predictions: lenient repair, as conlleval
    out = []
    for label, a, b in chunks:
        start, end = _to_char_span(text, offsets, groups, a, b)
        if end > start:
            out.append(PredictedSpan(start, end, label, float(np.mean(conf[a:b]))))
    return out


def decode_multi_label(
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
    probs: np.ndarray,
    labels: Sequence[str],
    label_all_subtokens: bool = False,
    text: str | None = None,
    decoding: str = "argmax",
) -> list[PredictedSpan]:
    """An O/B/I softmax per label ([tokens, 3 x labels]) -> spans of every label; spans of different labels may overlap.
    Each label's layer is decoded on its own (`decoding` as in `decode_flat`)."""
    if len(offsets) == 0:
        return []
    out = []
    for k, label in enumerate(labels):
        layer = probs[:, 3 * k : 3 * k + 3]
        for s in decode_flat(offsets, word_ids, layer, layer_tags(label), label_all_subtokens, text, decoding):
            out.append(s)
    return sorted(out, key=lambda s: (s.start, s.end, s.label))


def logits_to_probs(logits: np.ndarray, multi_label: bool) -> np.ndarray:
    """Softmax over the tags (flat), or over O/B/I within each label's group of 3 (multi-label)."""
    logits = logits.astype(np.float64)
    shape = logits.shape
    if multi_label:
        logits = logits.reshape(*shape[:-1], shape[-1] // 3, 3)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).reshape(shape)


def decode_documents(
    texts: Sequence[str],
    window_docs: Sequence[int],
    window_offsets: Sequence[Sequence[tuple[int, int]]],
    window_word_ids: Sequence[Sequence[int | None]],
    window_logits: Sequence[np.ndarray],
    space: LabelSpace,
) -> list[list[PredictedSpan]]:
    """Logits of every window (each [tokens, outputs], unpadded) -> spans per document."""
    per_doc: list[list[WindowScores]] = [[] for _ in texts]
    for doc, offs, wids, logits in zip(window_docs, window_offsets, window_word_ids, window_logits):
        per_doc[doc].append(
            WindowScores(offs, wids, logits_to_probs(np.asarray(logits)[: len(offs)], space.multi_label))
        )
    out = []
    for text, windows in zip(texts, per_doc):
        if not windows:
            out.append([])
            continue
        offsets, word_ids, probs = stitch_windows(windows)
        if space.multi_label:
            out.append(
                decode_multi_label(
                    offsets, word_ids, probs, space.labels, space.label_all_subtokens, text, space.decoding
                )
            )
        else:
            out.append(
                decode_flat(offsets, word_ids, probs, space.tags, space.label_all_subtokens, text, space.decoding)
            )
    return out
