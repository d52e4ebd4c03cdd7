"""Loading fast tokenizers and measuring texts and spans in tokens."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from toolkit.errors import ToolkitError


@dataclass(frozen=True)
class TokenOffsets:
    """Character offsets of a text's tokens (no special tokens), for span arithmetic."""

    starts: list[int]
    ends: list[int]

    def __len__(self) -> int:
        return len(self.starts)

    def span_tokens(self, start: int, end: int) -> int:
        """How many tokens overlap the character span [start, end)."""
        first = bisect_right(self.ends, start)
        last = bisect_left(self.starts, end) - 1
        return max(0, last - first + 1)

    def aligned(self, start: int, end: int) -> bool:
        """True when the span starts at a token start and ends at a token end."""
        i = bisect_left(self.starts, start)
        j = bisect_left(self.ends, end)
        return i < len(self.starts) and self.starts[i] == start and j < len(self.ends) and self.ends[j] == end


def load_tokenizer(name_or_path: str):
    """A Hugging Face *fast* tokenizer (offsets are required), by hub id or local path."""
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise ToolkitError(
            f"cannot load tokenizer {name_or_path!r}: {exc}".splitlines()[0],
            fix="pass a local model directory or a hub id reachable from this machine (--tokenizer), or --no-tokenizer to skip token statistics.",
        ) from None
    if not getattr(tokenizer, "is_fast", False):
        raise ToolkitError(
            f"tokenizer {name_or_path!r} is not a fast tokenizer, so it has no character offsets",
            fix="use a model that ships tokenizer.json (a fast tokenizer).",
        )
    # Some tokenizer.json files carry a truncation setting (all-MiniLM-L6-v2's cuts
    # at 128 tokens); the backend would then silently drop the rest of a document.
    tokenizer.backend_tokenizer.no_truncation()
    tokenizer.backend_tokenizer.no_padding()
    return tokenizer


def token_offsets(tokenizer, text: str) -> TokenOffsets:
    """Offsets of `text`'s tokens without special tokens; uses the Rust backend (no length warnings)."""
    enc = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    pairs = [(s, e) for s, e in enc.offsets if e > s]
    return TokenOffsets([s for s, _ in pairs], [e for _, e in pairs])


def special_tokens_count(tokenizer) -> int:
    """Tokens the model adds around a single sequence ([CLS] ... [SEP] is 2)."""
    return tokenizer.num_special_tokens_to_add(pair=False)
