"""span_generation's `text` format (the others are in completions.py) and the line parsing every
format shares. Pure: no torch, no I/O.

Prompt (one per window of a document):

    Extract the spans of these labels, copied verbatim from the text: Disease, Chemical.
    Text:
    <window text>
    Spans:

Target: one line per span, in order of appearance, `label: verbatim text`; `none` when the
window has no span; then the tokenizer's end-of-sequence token. With a chat template the
prompt is the user turn and the target the assistant turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.spans.overlaps import SpanLike

NONE = "none"


def build_prompt(window_text: str, labels: Sequence[str]) -> str:
    return (
        f"Extract the spans of these labels, copied verbatim from the text: "
        f"{', '.join(labels)}.\nText:\n{window_text}\nSpans:\n"
    )


def build_target(window_text: str, spans: Sequence[SpanLike], offset: int = 0) -> str:
    """Spans (document offsets; `offset` is the window's start) -> target lines, in order of appearance."""
    ordered = sorted(spans, key=lambda s: (s.start, s.end, s.label))
    lines = [f"{s.label}: {window_text[s.start - offset : s.end - offset]}" for s in ordered]
    # One line a span: newlines inside a span are written as spaces (recovery matches them back).
    lines = [" ".join(line.split("\n")) for line in lines]
    return "\n".join(lines) + "\n" if lines else f"{NONE}\n"


@dataclass(frozen=True)
class GeneratedLine:
    label: str
    text: str


@dataclass
class ParsedOutput:
    spans: list[GeneratedLine]
    unknown_labels: list[str]
    malformed: list[str]


def parse_output(output: str, labels: Sequence[str]) -> ParsedOutput:
    """Generated text -> (label, text) pairs; lines with unknown labels or no `label:` are kept for the report."""
    known = {lb.lower(): lb for lb in labels}
    spans, unknown, malformed = [], [], []
    for raw in output.split("\n"):
        line = raw.strip()
        if not line or line.lower() == NONE:
            continue
        label, sep, text = line.partition(":")
        if not sep or not text.strip():
            malformed.append(line)
            continue
        canonical = known.get(label.strip().lower())
        if canonical is None:
            unknown.append(line)
            continue
        spans.append(GeneratedLine(canonical, text.strip()))
    return ParsedOutput(spans, unknown, malformed)


def render_prompt(tokenizer, prompt: str, chat_template: bool) -> str:
    """A prompt (`completions.prompt_body`) as the model sees it: plain, or wrapped in the tokenizer's chat template."""
    if chat_template:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    # Prompts are tokenized without special tokens (a chat template writes its own); a base model trained
    # with BOS first (Gemma) reads a prompt without it as noise, so it is written here.
    if getattr(tokenizer, "add_bos_token", False) and tokenizer.bos_token:
        return tokenizer.bos_token + prompt
    return prompt
