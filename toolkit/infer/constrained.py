"""Constrained decoding: a completion can only name what its window holds.

A transformers LogitsProcessor keeps every row of a batch inside its format's grammar
(`generation.target`, completions.py):

    text:      line := "<label>: " SPAN "\\n"                      SPAN := non-empty substring of the window
    anchors:   line := "<label>: " SPAN (" ... " SPAN)? "\\n"
    segments:  line := N ("-" M)? ": <label>\\n"                    1 <= N <= M <= the window's segments
    any:       line := "none\\n"

and allows end-of-sequence only at the start of a line, so a hallucinated span cannot be
produced (an anchor pair whose end cannot follow its start is still possible, and counted).
Checking a candidate token is a string test on the completion so far plus the token's text;
the `top_k` best-scoring tokens are tried first and the whole vocabulary only when none of
them fits (rare), which keeps the cost per step small.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from toolkit.infer.completions import ANCHOR_GAP, CompletionSpec, WindowView
from toolkit.infer.prompts import NONE


class LineGrammar:
    """Validity of a completion prefix for one window. Pure string logic, no torch."""

    def __init__(self, window: str, labels: Sequence[str]):
        self.window = window.replace("\n", " ")  # targets write newlines inside spans as spaces
        self.headers = [f"{lb}: " for lb in labels]
        self.none = NONE
        self.valid_prefix = lru_cache(maxsize=65536)(self._valid_prefix)

    def _complete_line(self, line: str) -> bool:
        if line == self.none:
            return True
        for h in self.headers:
            if line.startswith(h):
                span = line[len(h) :]
                if span and span in self.window:
                    return True
        return False

    def _partial_line(self, line: str) -> bool:
        if any(h.startswith(line) for h in self.headers) or self.none.startswith(line):
            return True
        for h in self.headers:
            if line.startswith(h) and line[len(h) :] in self.window:
                return True
        return False

    def _valid_prefix(self, text: str) -> bool:
        """Can `text` (a completion so far) still become a valid completion?"""
        *done, current = text.split("\n")
        return all(self._complete_line(line) for line in done) and self._partial_line(current)

    def at_line_start(self, text: str) -> bool:
        return text == "" or text.endswith("\n")


class AnchorGrammar(LineGrammar):
    """anchors: a line is a label header and a substring of the window, or two joined by ANCHOR_GAP."""

    def _span(self, rest: str, partial: bool) -> bool:
        head, gap, tail = rest.partition(ANCHOR_GAP)
        if gap:
            return (
                bool(head)
                and head in self.window
                and ((tail in self.window) if partial else (bool(tail) and tail in self.window))
            )
        if rest and rest in self.window:
            return True
        # A partial line may be in the middle of writing the gap.
        return partial and any(
            rest.endswith(ANCHOR_GAP[:i]) and rest[:-i] and rest[:-i] in self.window for i in range(1, len(ANCHOR_GAP))
        )

    def _complete_line(self, line: str) -> bool:
        return line == self.none or any(line.startswith(h) and self._span(line[len(h) :], False) for h in self.headers)

    def _partial_line(self, line: str) -> bool:
        if any(h.startswith(line) for h in self.headers) or self.none.startswith(line):
            return True
        return any(line.startswith(h) and (line == h or self._span(line[len(h) :], True)) for h in self.headers)


class SegmentGrammar:
    """segments: `N: label` or `N-M: label` with 1 <= N <= M <= n, or `none`."""

    def __init__(self, n_segments: int, labels: Sequence[str]):
        self.n = n_segments
        self.labels = [f": {lb}" for lb in labels]
        self.valid_prefix = lru_cache(maxsize=65536)(self._valid_prefix)

    def _number(self, digits: str, partial: bool, at_least: int = 1) -> bool:
        """Can `digits` be (or, when partial, begin) a number in [at_least, n]?"""
        if not digits.isdigit() or digits.startswith("0"):
            return False
        if not partial:
            return at_least <= int(digits) <= self.n
        return any(str(v).startswith(digits) for v in range(at_least, self.n + 1))

    def _line(self, line: str, partial: bool) -> bool:
        if line == NONE or (partial and NONE.startswith(line)):
            return True
        if partial and line == "":
            return True
        numbers, colon, rest = line.partition(":")
        first, dash, last = numbers.partition("-")
        if not colon:  # still writing the numbers
            if not partial:
                return False
            if not dash:
                return self._number(first, True)
            return self._number(first, False) and (last == "" or self._number(last, True, int(first)))
        numbers_ok = self._number(first, False) and (not dash or self._number(last, False, int(first)))
        label = f":{rest}"
        return numbers_ok and any((h.startswith(label) if partial else h == label) for h in self.labels)

    def _valid_prefix(self, text: str) -> bool:
        *done, current = text.split("\n")
        return all(self._line(line, False) for line in done) and self._line(current, True)

    def at_line_start(self, text: str) -> bool:
        return text == "" or text.endswith("\n")


def grammar_for(spec: CompletionSpec, view: WindowView, labels: Sequence[str]):
    """The grammar that keeps one window's completion to what the window holds."""
    if spec.target == "segments":
        return SegmentGrammar(len(view.segments), labels)
    return (AnchorGrammar if spec.target == "anchors" else LineGrammar)(view.text, labels)


def make_copy_processor(tokenizer, grammars: Sequence, prompt_width: int, top_k: int = 64):
    """A LogitsProcessor for a batch whose prompts (left-padded) all end at column `prompt_width`; one grammar a row."""
    import torch
    from transformers import LogitsProcessor

    pieces = _token_pieces(tokenizer)
    eos = tokenizer.eos_token_id
    specials = set(tokenizer.all_special_ids)

    class CopyProcessor(LogitsProcessor):
        def __call__(self, input_ids, scores):
            out = torch.full_like(scores, float("-inf"))
            for row in range(scores.shape[0]):
                done_ids = input_ids[row, prompt_width:].tolist()
                if eos in done_ids:  # finished rows are padded by generate(); leave them be
                    out[row] = scores[row]
                    continue
                text = tokenizer.decode(done_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                grammar = grammars[row]
                allowed = []
                ranked = torch.topk(scores[row], min(top_k, scores.shape[1])).indices.tolist()
                for candidates in (ranked, range(scores.shape[1])):
                    for tok in candidates:
                        if tok == eos:
                            if grammar.at_line_start(text) and text:
                                allowed.append(tok)
                        elif tok not in specials and pieces[tok] and grammar.valid_prefix(text + pieces[tok]):
                            allowed.append(tok)
                    if allowed:
                        break
                if not allowed:
                    allowed = [eos]  # nothing fits: end the completion rather than invent text
                out[row, allowed] = scores[row, allowed]
            return out

    return CopyProcessor()


def _token_pieces(tokenizer) -> list[str]:
    """Decoded text of every token id, cached on the tokenizer; pieces of a split UTF-8 character are empty."""
    pieces = getattr(tokenizer, "_toolkit_token_pieces", None)
    if pieces is None or len(pieces) != len(tokenizer):
        decoded = tokenizer.batch_decode(
            [[i] for i in range(len(tokenizer))], skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        pieces = ["" if "\ufffd" in p else p for p in decoded]
        tokenizer._toolkit_token_pieces = pieces
    return pieces
