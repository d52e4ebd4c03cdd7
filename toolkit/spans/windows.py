"""Sliding windows over documents with a fast tokenizer: never silent truncation.

The tokenizer's own overflow mechanism makes the windows (`stride` tokens shared
by consecutive windows); offsets index the original document, so alignment and
decoding work in document characters whatever window a token came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Window:
    doc: int
    input_ids: list[int]
    offsets: list[tuple[int, int]]  # (0, 0) for special tokens
    word_ids: list[int | None]


def make_windows(tokenizer, texts: Sequence[str], max_length: int, stride: int, batch: int = 64) -> list[Window]:
    """Every document split into windows of at most `max_length` tokens (special tokens included)."""
    out: list[Window] = []
    for lo in range(0, len(texts), batch):
        chunk = list(texts[lo : lo + batch])
        enc = tokenizer(
            chunk,
            max_length=max_length,
            stride=stride,
            truncation=True,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=False,
        )
        for i, ids in enumerate(enc["input_ids"]):
            word_ids = enc.word_ids(i)
            offsets = [
                (int(a), int(b)) if w is not None else (0, 0) for (a, b), w in zip(enc["offset_mapping"][i], word_ids)
            ]
            out.append(Window(lo + int(enc["overflow_to_sample_mapping"][i]), list(ids), offsets, list(word_ids)))
    return out


def fitted_max_length(content_tokens: int, special_tokens: int, limit: int, stride: int) -> int:
    """The window length (special tokens included) that reads a document of `content_tokens` in the fewest
    windows of at most `limit` tokens sharing `stride`, the windows as even as that count allows. A document
    that fits gets `limit` (its one window is as long as the document: windows are not padded)."""
    room = limit - special_tokens
    if room <= stride:
        raise ValueError(f"a window of {limit} tokens has no room beyond {special_tokens} special and {stride} shared")
    if content_tokens <= room:
        return limit
    windows = 1 + -(-(content_tokens - room) // (room - stride))
    return special_tokens + -(-(content_tokens + (windows - 1) * stride) // windows)


def make_fitted_windows(tokenizer, texts: Sequence[str], limit: int, stride: int) -> list[Window]:
    """Windows sized to each document (`fitted_max_length`) instead of one trained length: a document that
    fits `limit` is read in one pass, a longer one in the fewest windows. Documents are in order.

    Every document is tokenized once at `limit`; only those that take more than one window are tokenized
    again at their fitted length (their token count follows from the first windows and the stride)."""
    specials = tokenizer.num_special_tokens_to_add()
    first = make_windows(tokenizer, texts, limit, stride)
    by_doc: dict[int, list[Window]] = {}
    for w in first:
        by_doc.setdefault(w.doc, []).append(w)
    by_length: dict[int, list[int]] = {}
    for doc, windows in by_doc.items():
        if len(windows) > 1:
            content = sum(len(w.input_ids) - specials for w in windows) - (len(windows) - 1) * stride
            by_length.setdefault(fitted_max_length(content, specials, limit, stride), []).append(doc)
    if not by_length:
        return first
    out = [w for w in first if len(by_doc[w.doc]) == 1]
    for max_length, docs in by_length.items():
        for w in make_windows(tokenizer, [texts[i] for i in docs], max_length, stride):
            out.append(Window(docs[w.doc], w.input_ids, w.offsets, w.word_ids))
    out.sort(key=lambda w: w.doc)  # stable: a document's windows keep their order
    return out


@dataclass(frozen=True)
class TextWindow:
    doc: int
    start: int
    end: int


def text_windows(tokenizer, texts: list[str], max_length: int, stride: int) -> list[TextWindow]:
    """Character ranges of the same token windows (span_generation prompts hold window text, not tokens)."""
    out = []
    for w in make_windows(tokenizer, texts, max_length, stride):
        real = [(a, b) for a, b in w.offsets if b > a]
        if real:
            out.append(TextWindow(w.doc, real[0][0], real[-1][1]))
        elif not texts[w.doc]:
            out.append(TextWindow(w.doc, 0, 0))
    return out
