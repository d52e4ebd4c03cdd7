"""A segment model over one long document in bounded memory: segments, their inputs, their logits and the
runs merged into spans are all made a block at a time, and each gives what the whole-document path gives.
Pure: numpy only, no torch, no I/O (the tokenizer and the per-block scoring are passed in).

- Segments never cross a line, so the text is segmented a run of whole lines at a time.
- A segment's logit is the mean of its tokens' logits over every window (`segment_logits`); a segment is
  settled once a window starts after its end, since no later window can hold its tokens. Sums are added in
  the same order as the whole-document path adds them.
- A run of segments at or above a label's threshold cannot cross a segment below every label's threshold,
  so spans are merged in blocks cut after such a segment. A block can only outgrow `max_pending` inside
  one run that long; it is then cut anyway, and the cut is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain

import numpy as np

from toolkit.spans.segment_decoding import NO_SEGMENT, merge_segments, token_segments
from toolkit.spans.segment_windows import NO_OFFSET, special_tokens_around
from toolkit.spans.segments import segment_text
from toolkit.spans.streaming import CHUNK_CHARS, token_pieces, with_last
from toolkit.spans.windows import Window

ScoreBlock = Callable[
    [list[tuple[int, int]], np.ndarray, tuple[int, int] | None, tuple[int, int] | None],
    tuple[np.ndarray, np.ndarray | None],
]
# Segments a block of runs may hold while none falls below every threshold before it is cut anyway.
MAX_PENDING_SEGMENTS = 50_000


def segment_blocks(text: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[list[tuple[int, int]]]:
    """`segment_text(text)`, a run of whole lines (about `chunk_chars` characters, or one longer line) at a time,
    never copying the text."""
    lo = 0
    while lo < len(text):
        newline = text.find("\n", lo + chunk_chars)
        hi = len(text) if newline < 0 else newline + 1
        yield segment_text(text, lo, hi)
        lo = hi


def stream_segment_windows(
    tokenizer,
    text: str,
    segment_tokens: int,
    context_tokens: int,
    chunk_chars: int = CHUNK_CHARS,
    tally: dict | None = None,
) -> Iterator[Window]:
    """The inputs `make_segment_windows(tokenizer, [text], [segment_text(text)], ...)` makes, one at a time
    (`tally`: see `streaming.token_pieces`)."""
    lead, tail = special_tokens_around(tokenizer)
    pieces = token_pieces(tokenizer, text, chunk_chars, tally)
    ids, offsets, words = np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    base, exhausted = 0, False  # base: the document index of the buffer's first token

    def pull() -> None:
        nonlocal ids, offsets, words, exhausted
        piece = next(pieces, None)
        if piece is None:
            exhausted = True
            return
        ids, offsets = np.concatenate([ids, piece.ids]), np.concatenate([offsets, piece.offsets])
        words = np.concatenate([words, piece.word_ids])

    for a, b in chain.from_iterable(segment_blocks(text, chunk_chars)):
        while not exhausted and (not ids.size or offsets[-1, 0] < a):
            pull()
        first = base + int(np.searchsorted(offsets[:, 0], a, "left"))
        # Only the segment's first segment_tokens tokens and the context after them are read: a segment longer than
        # that (text without a sentence end or a line break) is never buffered whole.
        while not exhausted and offsets[-1, 0] < b and base + ids.size < first + segment_tokens + context_tokens:
            pull()
        last = base + int(np.searchsorted(offsets[:, 0], b, "left"))
        if first >= last:
            continue
        own_end = min(last, first + segment_tokens)
        while not exhausted and base + ids.size < own_end + context_tokens:
            pull()
        lo, hi = max(0, first - context_tokens), min(base + ids.size, own_end + context_tokens)
        own = np.arange(lo, hi)
        inside = (own >= first) & (own < own_end)
        body_offsets = [tuple(o) if k else NO_OFFSET for o, k in zip(offsets[lo - base : hi - base].tolist(), inside)]
        body_words = [int(w) if k and w >= 0 else None for w, k in zip(words[lo - base : hi - base].tolist(), inside)]
        yield Window(
            0,
            lead + ids[lo - base : hi - base].tolist() + tail,
            [NO_OFFSET] * len(lead) + body_offsets + [NO_OFFSET] * len(tail),
            [None] * len(lead) + body_words + [None] * len(tail),
        )
        keep = lo - base  # later segments start no earlier than this one: their context does not reach further back
        ids, offsets, words, base = ids[keep:], offsets[keep:], words[keep:], lo


class SegmentLogitStream:
    """`segment_logits` over a stream of windows: each push returns the segments no later window reaches,
    with their mean token logits [segments x labels] (NaN for a segment no token fell in)."""

    def __init__(self, text: str, labels: int, chunk_chars: int = CHUNK_CHARS):
        self._blocks = segment_blocks(text, chunk_chars)
        self._exhausted = False
        self.segments: list[tuple[int, int]] = []
        self.sums = np.zeros((0, labels))
        self.counts = np.zeros(0)

    def _pull_until(self, char: int) -> None:
        """Segment the text until a segment ends after `char` (or the text ends)."""
        while not self._exhausted and (not self.segments or self.segments[-1][1] <= char):
            block = next(self._blocks, None)
            if block is None:
                self._exhausted = True
                return
            self.segments += block
            self.sums = np.concatenate([self.sums, np.zeros((len(block), self.sums.shape[1]))])
            self.counts = np.concatenate([self.counts, np.zeros(len(block))])

    def push(
        self, windows: Sequence[Window], logits: Sequence[np.ndarray], final: bool
    ) -> tuple[list[tuple[int, int]], np.ndarray]:
        for w, window_logits in zip(windows, logits):
            real = [a for a, b in w.offsets if b > a]
            if real:
                self._pull_until(max(real))
            ids = np.asarray(token_segments(w.offsets, self.segments), dtype=np.int64)
            keep = ids != NO_SEGMENT
            np.add.at(self.sums, ids[keep], np.asarray(window_logits, dtype=float)[: len(ids)][keep])
            np.add.at(self.counts, ids[keep], 1)
        if final:
            self._pull_until(10**18)
            settled = len(self.segments)
        else:
            firsts = [next((a for a, b in w.offsets if b > a), None) for w in windows]
            cut = next((a for a in reversed(firsts) if a is not None), None)
            settled = 0 if cut is None else sum(1 for _, end in self.segments if end <= cut)
        segments, sums, counts = self.segments[:settled], self.sums[:settled], self.counts[:settled]
        self.segments, self.sums, self.counts = self.segments[settled:], self.sums[settled:], self.counts[settled:]
        with np.errstate(invalid="ignore", divide="ignore"):
            return segments, sums / counts[:, None]


class RunStream:
    """`merge_segments` over a stream of scored segments (see the module's docstring)."""

    def __init__(self, labels: Sequence[str], thresholds: Sequence[float], max_pending: int = MAX_PENDING_SEGMENTS):
        self.labels, self.thresholds, self.max_pending = list(labels), np.asarray(thresholds, dtype=float), max_pending
        self.segments: list[tuple[int, int]] = []
        self.probs = np.zeros((0, len(self.labels)))
        self.starts: np.ndarray | None = None
        self.forced_cuts = 0

    def push(self, segments: list, probs: np.ndarray, starts: np.ndarray | None, final: bool) -> list:
        self.segments += segments
        self.probs = np.concatenate([self.probs, probs])
        if starts is not None:
            self.starts = starts if self.starts is None else np.concatenate([self.starts, starts])
        if final:
            cut = len(self.segments)
        else:
            below = np.flatnonzero((self.probs < self.thresholds).all(1))
            cut = int(below[-1]) + 1 if below.size else 0
            if not cut and len(self.segments) > self.max_pending:
                cut = len(self.segments)
                self.forced_cuts += 1
        if not cut:
            return []
        starts = None if self.starts is None else self.starts[:cut]
        out = merge_segments(self.segments[:cut], self.probs[:cut], self.labels, self.thresholds, starts)
        self.segments, self.probs = self.segments[cut:], self.probs[cut:]
        self.starts = None if self.starts is None else self.starts[cut:]
        return out


def scored_blocks(
    text: str,
    scored_groups: Iterable[tuple[Sequence[Window], Sequence[np.ndarray]]],
    n_labels: int,
    score_block: ScoreBlock,
    chunk_chars: int = CHUNK_CHARS,
) -> Iterator[tuple[list[tuple[int, int]], np.ndarray, np.ndarray | None, bool]]:
    """One document's settled segments, a block at a time, with their probabilities and clause-start
    probabilities, and whether the block is the last. `score_block(segments, encoder_logits, before, after)`
    turns settled segments' encoder logits into those (starts None without them); `before` and `after` are the
    segments either side of the block (None at the document's ends), which a linear prior reads as context.
    The last settled segment waits for the next group, so `after` is known."""
    logits_stream = SegmentLogitStream(text, n_labels, chunk_chars)
    held: list[tuple[int, int]] = []
    held_logits = np.zeros((0, n_labels))
    before: tuple[int, int] | None = None

    def step(windows: Sequence[Window], logits: Sequence[np.ndarray], final: bool) -> tuple:
        nonlocal held, held_logits, before
        segments, encoder = logits_stream.push(windows, logits, final)
        segments, encoder = held + segments, np.concatenate([held_logits, encoder])
        cut = len(segments) if final else max(0, len(segments) - 1)
        block, held, held_logits = segments[:cut], segments[cut:], encoder[cut:]
        if not block:
            return [], np.zeros((0, n_labels)), None, final
        probs, starts = score_block(block, encoder[:cut], before, held[0] if held else None)
        before = block[-1]
        return block, probs, starts, final

    pushed = False
    for (windows, logits), final in with_last(scored_groups):
        pushed = True
        yield step(windows, logits, final)
    if not pushed:  # a document with no input at all (no segment holds a token): its segments still count
        yield step([], [], True)


def merge_stream(
    text: str,
    scored_groups: Iterable[tuple[Sequence[Window], Sequence[np.ndarray]]],
    labels: Sequence[str],
    thresholds: Sequence[float],
    score_block: ScoreBlock,
    chunk_chars: int = CHUNK_CHARS,
    max_pending: int = MAX_PENDING_SEGMENTS,
) -> tuple[list[tuple[int, int, str, float]], int]:
    """One document's merged spans from its windows' logits, a group of windows at a time (`scored_blocks`),
    and how many blocks had to be cut inside a run."""
    runs = RunStream(labels, thresholds, max_pending)
    spans: list[tuple[int, int, str, float]] = []
    for block, probs, starts, final in scored_blocks(text, scored_groups, len(labels), score_block, chunk_chars):
        spans += runs.push(block, probs, starts, final)
    return spans, runs.forced_cuts


def score_stream(
    text: str,
    scored_groups: Iterable[tuple[Sequence[Window], Sequence[np.ndarray]]],
    n_labels: int,
    score_block: ScoreBlock,
    chunk_chars: int = CHUNK_CHARS,
) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray | None]:
    """One document's segments with their probabilities [segments x labels] (and clause-start probabilities),
    what `SegmentClassifier.score` gives for it: what threshold sweeps read. Proportional to the segments,
    not to the windows or their tokens."""
    segments: list[tuple[int, int]] = []
    probs, starts = [np.zeros((0, n_labels))], []
    for block, block_probs, block_starts, _ in scored_blocks(text, scored_groups, n_labels, score_block, chunk_chars):
        segments += block
        probs.append(block_probs)
        if block_starts is not None:
            starts.append(block_starts)
    return segments, np.concatenate(probs), np.concatenate(starts) if starts else None
