"""CLM examples: documents -> windows (same windowing as the MLM track) -> prompt + target. No torch."""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.features import FeatureReport, sample_negatives
from toolkit.prompts import build_prompt, build_target
from toolkit.schema import SpanRecord
from toolkit.windows import make_windows


@dataclass(frozen=True)
class TextWindow:
    doc: int
    start: int
    end: int


def text_windows(tokenizer, texts: list[str], max_length: int, stride: int) -> list[TextWindow]:
    """Character ranges of the token windows the MLM track uses (the tokenizer adds no special tokens here)."""
    out = []
    for w in make_windows(tokenizer, texts, max_length, stride):
        real = [(a, b) for a, b in w.offsets if b > a]
        if real:
            out.append(TextWindow(w.doc, real[0][0], real[-1][1]))
        elif not texts[w.doc]:
            out.append(TextWindow(w.doc, 0, 0))
    return out


def render_prompt(tokenizer, window_text: str, labels: list[str], chat_template: bool) -> str:
    prompt = build_prompt(window_text, labels)
    if chat_template:
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    return prompt


def build_examples(tokenizer, records: list[SpanRecord], labels: list[str], max_length: int, stride: int, chat_template: bool,
                   negative_ratio: float | None = None, seed: int = 0) -> tuple[list[dict], FeatureReport]:
    """input_ids = prompt + target + EOS; labels mask the prompt (-100) so the loss covers only the completion."""
    # spans_not_representable: spans never wholly inside one window
    report = FeatureReport(documents=len(records), spans=sum(len(r.spans) for r in records))
    windows = text_windows(tokenizer, [r.text for r in records], max_length, stride)
    covered: set[tuple[int, int, int, str]] = set()
    items = []
    for w in windows:
        rec = records[w.doc]
        inside = [s for s in rec.spans if w.start <= s.start and s.end <= w.end]
        covered |= {(w.doc, s.start, s.end, s.label) for s in inside}
        items.append((w, inside))
    report.spans_not_representable = report.spans - len(covered)
    report.windows = len(items)
    report.windows_with_spans = sum(bool(i) for _, i in items)
    keep, report.negative_windows_kept, report.negative_windows_dropped = sample_negatives([bool(i) for _, i in items], negative_ratio, seed)
    items = [items[k] for k in keep]
    examples = []
    for w, inside in items:
        text = records[w.doc].text[w.start : w.end]
        prompt_ids = tokenizer(render_prompt(tokenizer, text, labels, chat_template), add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(build_target(text, inside, w.start), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append({"input_ids": prompt_ids + target_ids, "labels": [-100] * len(prompt_ids) + target_ids})
        report.tokens += len(prompt_ids) + len(target_ids)
    return examples, report
