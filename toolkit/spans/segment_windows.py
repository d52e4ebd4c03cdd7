"""segments.encoder_input=segments: one short input per segment instead of long windows over the document.

Each input is the segment's first `segment_tokens` tokens with up to `context_tokens` tokens of the text on
either side. Context tokens get the offsets of special tokens, (0, 0), so they belong to no segment: a
segment's logit is the mean over its own tokens in its own input, and every consumer of windows (the
segment targets, `segment_logits`, export parity, the service) reads these inputs unchanged.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from toolkit.spans.windows import Window

NO_OFFSET = (0, 0)


def segment_token_range(starts: Sequence[int], segment: tuple[int, int]) -> tuple[int, int]:
    """[first, last) indices of the tokens whose first character lies in `segment` (token starts ascending)."""
    a, b = segment
    first = bisect_left(starts, a)
    last = bisect_left(starts, b, lo=first)
    return first, last


def make_segment_windows(
    tokenizer,
    texts: Sequence[str],
    segments: Sequence[Sequence[tuple[int, int]]],
    segment_tokens: int,
    context_tokens: int,
) -> tuple[list[Window], list[int]]:
    """One input per segment that holds a token, in document and segment order, and the document's index of
    each input's segment. A segment longer than `segment_tokens` is read from its start (the rest of it is
    context on the right); a segment without tokens has no input (its score is the empty one: NaN)."""
    windows: list[Window] = []
    index: list[int] = []
    lead, tail = special_tokens_around(tokenizer)
    for doc, (text, segs) in enumerate(zip(texts, segments)):
        if not segs:
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        ids, offsets, words = enc["input_ids"], enc["offset_mapping"], enc.word_ids()
        starts = [a for a, _ in offsets]
        for k, segment in enumerate(segs):
            first, last = segment_token_range(starts, segment)
            if first >= last:
                continue
            own_end = min(last, first + segment_tokens)
            lo, hi = max(0, first - context_tokens), min(len(ids), own_end + context_tokens)
            body = list(ids[lo:hi])
            body_offsets = [
                (int(offsets[i][0]), int(offsets[i][1])) if first <= i < own_end else NO_OFFSET for i in range(lo, hi)
            ]
            body_words = [words[i] if first <= i < own_end else None for i in range(lo, hi)]
            windows.append(
                Window(
                    doc,
                    lead + body + tail,
                    [NO_OFFSET] * len(lead) + body_offsets + [NO_OFFSET] * len(tail),
                    [None] * len(lead) + body_words + [None] * len(tail),
                )
            )
            index.append(k)
    return windows, index


def special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a text ([CLS] and [SEP] for BERT, <s> and </s> for
    RoBERTa), read from how it encodes one word: `build_inputs_with_special_tokens` of a generic fast tokenizer
    adds none, while its post-processor (what windows get) does."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for lead in range(len(full) - len(bare) + 1):
        if full[lead : lead + len(bare)] == bare:
            return list(full[:lead]), list(full[lead + len(bare) :])
    raise ValueError(f"{type(tokenizer).__name__} does not keep a text whole between its special tokens")
