"""One long document read in bounded memory: tokenized in pieces, cut into the same windows as
`make_windows`, stitched and decoded in groups, so nothing proportional to the document's length is
held beside its text. Pure: numpy only, no torch, no I/O (the tokenizer is passed in).

Every step gives what the whole-document path gives, span for span:

- the text is tokenized in pieces cut only where tokenizing across the cut gives the same tokens as
  tokenizing each side (checked on the text around each cut), so the pieces' tokens are the document's: at
  whitespace, or in text without it (base64, CJK, minified markup) at another character; where no cut holds
  within a piece's length (one word longer than that), a hard cut, counted, so no text is read whole;
- windows start every `max_length - specials - stride` tokens, as the tokenizer's own overflow does;
- a token's scores come from the window where it sits furthest from an edge (`stitch_windows`), and a
  token is settled once a later window starts after it, since no later window can hold it;
- spans are decoded in blocks cut only before a word that no span can run through: its best tag is not
  an I- tag in any label (argmax), or each label's I- tag is less likely than its B- tag (viterbi, where
  that makes every best path restart there). A block can only outgrow `max_pending_tokens` inside one
  span longer than that; it is then cut anyway, and the cut is counted.

Written here rather than taken from a library: the tokenizers' own overflow holds the whole encoding,
which is what this module exists to avoid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.spans.decoding import (
    PredictedSpan,
    WindowScores,
    decode_flat,
    decode_multi_label,
    logits_to_probs,
    stitch_windows,
)
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.segment_windows import special_tokens_around
from toolkit.spans.span_columns import SpanColumns
from toolkit.spans.windows import Window

# Characters tokenized per call: a few hundred windows' worth of text.
CHUNK_CHARS = 200_000
# Text either side of a cut that is tokenized whole and in halves to check the cut.
CUT_CHECK_CHARS = 256
# Tokens a block may hold while no safe cut appears before it is cut anyway (a span that long).
MAX_PENDING_TOKENS = 200_000
# Cuts tried at other characters, where a piece's text has no whitespace to cut at (base64, CJK, minified text).
CHAR_CUT_TRIES = 16
_CUT = re.compile(r"\s(?=\S)")


@dataclass
class TokenPiece:
    """Tokens of one piece of a document: ids, offsets [n, 2] in document characters, word ids (-1: none)."""

    ids: np.ndarray
    offsets: np.ndarray
    word_ids: np.ndarray


def _encode(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]], list[int | None]]:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]], enc.word_ids()


def _cut_holds(tokenizer, text: str, cut: int) -> bool:
    """Whether tokenizing the text around `cut` whole gives the tokens of tokenizing each side."""
    lo, hi = max(0, cut - CUT_CHECK_CHARS), min(len(text), cut + CUT_CHECK_CHARS)
    whole_ids, whole_offsets, _ = _encode(tokenizer, text[lo:hi])
    left_ids, left_offsets, _ = _encode(tokenizer, text[lo:cut])
    right_ids, right_offsets, _ = _encode(tokenizer, text[cut:hi])
    shifted = [(a + cut - lo, b + cut - lo) for a, b in right_offsets]
    return whole_ids == left_ids + right_ids and whole_offsets == left_offsets + shifted


def _char_cuts(text: str, floor: int, target: int) -> Iterator[int]:
    """Cut candidates in text without whitespace, nearest `target` first: where a letter or digit meets another
    character (punctuation, CJK, a symbol), then any character."""
    tried = 0
    for cut in range(target, floor, -1):
        if text[cut - 1].isalnum() != text[cut].isalnum() or not text[cut].isascii():
            yield cut
            tried += 1
            if tried == CHAR_CUT_TRIES:
                break
    yield from range(target, max(floor, target - CHAR_CUT_TRIES), -1)


def _next_cut(tokenizer, text: str, lo: int, chunk_chars: int) -> tuple[int, bool]:
    """Where the piece starting at `lo` ends, and whether the cut was checked: the last checked cut in the piece's
    second half, before a whitespace character that a non-space follows; in text without one, at another
    character; where no cut holds, a hard cut at `lo + chunk_chars` (counted by the caller). The windows overlap
    by `stride` tokens across every cut, so only the tokens at a hard cut may differ from the whole document's."""
    target = lo + chunk_chars
    if target >= len(text):
        return len(text), True
    floor = lo + chunk_chars // 2
    # On a slice, not `finditer(text, pos, endpos)`: `text` may be a `FileText` (data.file_text), which slices.
    first = max(floor, lo + 1)
    candidates = [first + m.start() for m in _CUT.finditer(text[first:target])]
    for cut in reversed(candidates[-8:]):  # a handful of tries: a cut that fails here is rare
        if _cut_holds(tokenizer, text, cut):
            return cut, True
    for cut in _char_cuts(text, max(floor, lo + 1), target):
        if _cut_holds(tokenizer, text, cut):
            return cut, True
    return target, False


def token_pieces(
    tokenizer, text: str, chunk_chars: int = CHUNK_CHARS, tally: dict | None = None
) -> Iterator[TokenPiece]:
    """The document's tokens (no special tokens), a piece at a time, in order; `tally["hard_cuts"]` counts the
    cuts where tokenizing across them differs from tokenizing each side (text no tokenizer may cut, e.g. one long
    word)."""
    lo, word_base = 0, 0
    while lo < len(text):
        hi, checked = _next_cut(tokenizer, text, lo, chunk_chars)
        if not checked and tally is not None:
            tally["hard_cuts"] = tally.get("hard_cuts", 0) + 1
        ids, offsets, word_ids = _encode(tokenizer, text[lo:hi])
        words = np.array([-1 if w is None else w + word_base for w in word_ids], dtype=np.int64)
        if words.size and words.max() >= 0:
            word_base = int(words.max()) + 1
        yield TokenPiece(
            np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64).reshape(-1, 2) + lo, words
        )
        lo = hi


def count_tokens(tokenizer, text: str, chunk_chars: int = CHUNK_CHARS) -> int:
    """The document's tokens, without special tokens (what `fitted_max_length` takes)."""
    return sum(piece.ids.size for piece in token_pieces(tokenizer, text, chunk_chars))


def stream_windows(
    tokenizer,
    text: str,
    max_length: int,
    stride: int,
    doc: int = 0,
    chunk_chars: int = CHUNK_CHARS,
    tally: dict | None = None,
) -> Iterator[Window]:
    """The windows `make_windows(tokenizer, [text], max_length, stride)` makes, one at a time (`tally`: see
    `token_pieces`)."""
    before, after = special_tokens_around(tokenizer)
    room = max_length - len(before) - len(after)
    step = room - stride
    buffered = [np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)]
    start = 0  # the next window's first token, counted from the buffer's first

    def window(lo: int, hi: int) -> Window:
        ids, offsets, words = (part[lo:hi] for part in buffered)
        return Window(
            doc,
            before + ids.tolist() + after,
            [(0, 0)] * len(before) + [tuple(o) for o in offsets.tolist()] + [(0, 0)] * len(after),
            [None] * len(before) + [None if w < 0 else w for w in words.tolist()] + [None] * len(after),
        )

    for piece in token_pieces(tokenizer, text, chunk_chars, tally):
        buffered = [np.concatenate(pair) for pair in zip(buffered, (piece.ids, piece.offsets, piece.word_ids))]
        # A window whose end lies inside what is buffered is not the last: more tokens follow it.
        while start + room < buffered[0].size:
            yield window(start, start + room)
            start += step
        buffered = [part[start:] for part in buffered]
        start = 0
    yield window(start, start + room)  # the last window (the only one, empty but for its specials, for "")


class Stitcher:
    """`stitch_windows` over a stream of windows: each push returns the tokens no later window can hold."""

    def __init__(self) -> None:
        self.pending: list[WindowScores] = []
        self.settled_before = 0  # character: tokens starting before it are settled

    def push(self, windows: Sequence[WindowScores], final: bool) -> tuple[list, list, np.ndarray]:
        self.pending.extend(windows)
        keys, word_ids, scores = stitch_windows(self.pending)
        # Tokens before `settled_before` went out with an earlier push; windows kept for their later tokens hold them.
        lo = sum(1 for start, _ in keys if start < self.settled_before)
        if final:
            self.pending = []
            return keys[lo:], word_ids[lo:], scores[lo:]
        firsts = [_first_start(w) for w in self.pending]
        cut = next((s for s in reversed(firsts) if s is not None), None)
        if cut is None or cut <= self.settled_before:
            return [], [], scores[:0]
        hi = sum(1 for start, _ in keys if start < cut)
        self.settled_before = cut
        self.pending = [w for w in self.pending if _last_start(w) is not None and _last_start(w) >= cut]
        return keys[lo:hi], word_ids[lo:hi], scores[lo:hi]


def _real(w: WindowScores) -> np.ndarray:
    offsets = np.asarray(w.offsets, dtype=np.int64).reshape(-1, 2)
    return offsets[offsets[:, 1] > offsets[:, 0]]


def _first_start(w: WindowScores) -> int | None:
    real = _real(w)
    return int(real[0, 0]) if real.size else None


def _last_start(w: WindowScores) -> int | None:
    real = _real(w)
    return int(real[-1, 0]) if real.size else None


class SpanStream:
    """Stitched tokens -> spans, decoded in blocks that no span crosses (see the module's docstring)."""

    def __init__(self, text: str, space: LabelSpace, max_pending_tokens: int = MAX_PENDING_TOKENS):
        self.text, self.space, self.max_pending = text, space, max_pending_tokens
        self.offsets: list[tuple[int, int]] = []
        self.word_ids: list[int | None] = []
        self.probs: np.ndarray | None = None
        self.forced_cuts = 0
        tags = [t for label in space.labels for t in ("O", f"B-{label}", f"I-{label}")] if space.multi_label else None
        names = tags or space.tags
        self._begin = np.array([i for i, t in enumerate(names) if t.startswith("B-")])
        self._inside = np.array([names.index("I-" + names[i][2:], i) for i in self._begin])

    def push(self, offsets: list, word_ids: list, probs: np.ndarray, final: bool) -> list[PredictedSpan]:
        self.offsets += offsets
        self.word_ids += word_ids
        self.probs = probs if self.probs is None else np.concatenate([self.probs, probs])
        if final:
            return self._decode(len(self.offsets))
        cut = self._last_safe_start()
        if cut is None and len(self.offsets) > self.max_pending:
            cut = self._last_unit_start()
            self.forced_cuts += cut is not None
        return self._decode(cut) if cut else []

    def _unit_starts(self) -> np.ndarray:
        """Token indices (after the first) where a new decoding unit (a word, or a token) begins."""
        words = np.array([-1 if w is None else w for w in self.word_ids], dtype=np.int64)
        starts = np.arange(1, words.size)
        if self.space.label_all_subtokens:
            return starts
        return starts[(words[1:] != words[:-1]) | (words[1:] < 0)]

    def _last_unit_start(self) -> int | None:
        starts = self._unit_starts()
        return int(starts[-1]) if starts.size else None

    def _last_safe_start(self) -> int | None:
        starts = self._unit_starts()
        if not starts.size:
            return None
        probs = self.probs[starts]
        if self.space.decoding == "viterbi":
            safe = (probs[:, self._inside] < probs[:, self._begin]).all(1)
        elif self.space.multi_label:
            layers = probs.reshape(len(starts), -1, 3)
            safe = (layers.argmax(-1) != 2).all(1)
        else:
            safe = ~np.isin(probs.argmax(1), self._inside)
        hits = np.flatnonzero(safe)
        return int(starts[hits[-1]]) if hits.size else None

    def _decode(self, cut: int) -> list[PredictedSpan]:
        offsets, word_ids, probs = self.offsets[:cut], self.word_ids[:cut], self.probs[:cut]
        self.offsets, self.word_ids, self.probs = self.offsets[cut:], self.word_ids[cut:], self.probs[cut:]
        if not offsets:
            return []
        s = self.space
        if s.multi_label:
            return decode_multi_label(offsets, word_ids, probs, s.labels, s.label_all_subtokens, self.text, s.decoding)
        return decode_flat(offsets, word_ids, probs, s.tags, s.label_all_subtokens, self.text, s.decoding)


def groups_of(items: Iterable, n: int) -> Iterator[list]:
    """Consecutive lists of `n` items (the last may be shorter): itertools.batched, which Python 3.11 lacks."""
    group: list = []
    for item in items:
        group.append(item)
        if len(group) == n:
            yield group
            group = []
    if group:
        yield group


def with_last(items: Iterable) -> Iterator[tuple[object, bool]]:
    """Each item with whether it is the last."""
    iterator = iter(items)
    try:
        previous = next(iterator)
    except StopIteration:
        return
    for item in iterator:
        yield previous, False
        previous = item
    yield previous, True


def decode_stream(
    text: str,
    scored_groups: Iterable[tuple[Sequence[Window], Sequence[np.ndarray]]],
    space: LabelSpace,
    max_pending_tokens: int = MAX_PENDING_TOKENS,
) -> tuple[SpanColumns, int]:
    """The document's spans from its windows' logits, a group of windows at a time (what `decode_documents`
    gives for the whole document), and how many blocks had to be cut inside a span."""
    stitcher, stream = Stitcher(), SpanStream(text, space, max_pending_tokens)
    spans = SpanColumns()  # a long document's spans are many: as columns, not objects
    for (windows, logits), final in with_last(scored_groups):
        scores = [
            WindowScores(w.offsets, w.word_ids, logits_to_probs(np.asarray(x)[: len(w.offsets)], space.multi_label))
            for w, x in zip(windows, logits)
        ]
        spans.extend(stream.push(*stitcher.push(scores, final), final))
    return spans, stream.forced_cuts
