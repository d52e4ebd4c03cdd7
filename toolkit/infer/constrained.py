"""Constrained copy decoding: generated span text can only be a substring of its window.

A transformers LogitsProcessor keeps every row of a batch inside the output grammar

    line := "<label>: " SPAN "\\n"  |  "none\\n"        SPAN := non-empty substring of the window

and allows end-of-sequence only at the start of a line, so a hallucinated span cannot be
produced. Checking a candidate token is a string test on the completion so far plus the
token's text; the `top_k` best-scoring tokens are tried first and the whole vocabulary
only when none of them fits (rare), which keeps the cost per step small.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

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


def make_copy_processor(tokenizer, windows: Sequence[str], labels: Sequence[str], prompt_width: int, top_k: int = 64):
    """A LogitsProcessor for a batch whose prompts (left-padded) all end at column `prompt_width`."""
    import torch
    from transformers import LogitsProcessor

    pieces = _token_pieces(tokenizer)
    eos = tokenizer.eos_token_id
    specials = set(tokenizer.all_special_ids)
    grammars = [LineGrammar(w, labels) for w in windows]

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
        decoded = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        pieces = ["" if "\ufffd" in p else p for p in decoded]
        tokenizer._toolkit_token_pieces = pieces
    return pieces
