"""span_generation inference: windows -> prompts -> generate -> parse -> offsets.

`toolkit eval`, the end-of-training evaluation and `toolkit compare` all call
`SpanGenerator.predict`; generated text that cannot be located in its window is a
hallucinated span, counted as a false positive and listed.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from toolkit.infer.backend import load_model_dir
from toolkit.infer.prompts import parse_output, render_prompt
from toolkit.infer.recovery import recover_offsets
from toolkit.rundir import Run
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.windows import text_windows


class SpanGenerator:
    """A trained span-generation model: generates each window's spans and maps them back to character offsets."""

    def __init__(self, model, tokenizer, meta: dict, device: str = "cpu"):
        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.meta = meta
        self.labels = list(meta["labels"])
        self.device = device
        self.last_report: dict = {}

    @classmethod
    def load(cls, run: Run | Path, device: str | None = None) -> SpanGenerator:
        return cls(*load_model_dir(run, "AutoModelForCausalLM", device))

    def generate(self, prompts: Sequence[str], windows: Sequence[str], constrained: bool) -> tuple[list[tuple[str, bool]], int]:
        """Greedy completions for a batch of prompts (left-padded): (text, ended with EOS) each, and the generated-token count."""
        import torch

        from toolkit.infer.constrained import make_copy_processor

        self.tokenizer.padding_side = "left"
        enc = self.tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False, return_token_type_ids=False).to(self.device)
        width = enc["input_ids"].shape[1]
        processors = [make_copy_processor(self.tokenizer, windows, self.labels, width)] if constrained else None
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=self.meta["max_new_tokens"],
                do_sample=False,
                logits_processor=processors,
                eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        texts, count = [], 0
        for row in out[:, width:].tolist():
            finished = self.tokenizer.eos_token_id in row
            if finished:
                row = row[: row.index(self.tokenizer.eos_token_id) + 1]
            row = [t for t in row if t != self.tokenizer.pad_token_id]
            count += len(row)
            texts.append((self.tokenizer.decode(row, skip_special_tokens=True, clean_up_tokenization_spaces=False), finished))
        return texts, count

    def predict(self, texts: Sequence[str], constrained: bool | None = None, batch_size: int | None = None) -> list[list[PredictedSpan]]:
        constrained = self.meta.get("constrained", False) if constrained is None else constrained
        batch_size = batch_size or self.meta.get("batch_size", 8)
        started = time.perf_counter()
        windows = text_windows(self.tokenizer, list(texts), self.meta["max_length"], self.meta["stride"])
        spans: list[dict[tuple[int, int, str], PredictedSpan]] = [{} for _ in texts]
        methods: Counter = Counter()
        hallucinated, unknown, malformed, truncated, duplicates, generated_tokens = [], 0, 0, 0, 0, 0
        order = sorted(range(len(windows)), key=lambda i: windows[i].end - windows[i].start)
        for lo in range(0, len(order), batch_size):
            batch = [windows[i] for i in order[lo : lo + batch_size]]
            window_texts = [texts[w.doc][w.start : w.end] for w in batch]
            prompts = [render_prompt(self.tokenizer, t, self.labels, self.meta.get("chat_template", False)) for t in window_texts]
            outputs, n = self.generate(prompts, window_texts, constrained)
            generated_tokens += n
            for w, window_text, (output, finished) in zip(batch, window_texts, outputs):
                if not finished:
                    # Cut off by max_new_tokens: the last line may be incomplete; it is dropped and counted.
                    output, _, tail = output.rpartition("\n")
                    truncated += 1 if tail.strip() else 0
                parsed = parse_output(output, self.labels)
                unknown += len(parsed.unknown_labels)
                malformed += len(parsed.malformed)
                found = recover_offsets(window_text, parsed.spans, self.meta.get("min_similarity", 90.0))
                hallucinated += [{"doc": w.doc, "label": h.label, "text": h.text} for h in found.hallucinated]
                duplicates += len(found.duplicates)
                for s in found.spans:
                    methods[s.method] += 1
                    key = (w.start + s.start, w.start + s.end, s.label)
                    # Windows overlap: a span found twice is one span.
                    spans[w.doc].setdefault(key, PredictedSpan(key[0], key[1], s.label, s.similarity / 100.0))
        seconds = time.perf_counter() - started
        self.last_report = {
            "seconds": round(seconds, 2),
            "windows": len(windows),
            "generated_tokens": generated_tokens,
            "generated_tokens_per_second": round(generated_tokens / seconds, 2) if seconds else None,
            "constrained": constrained,
            "recovered_by": dict(methods),
            "hallucinated_spans": len(hallucinated),
            "hallucinated": hallucinated,
            "unknown_label_lines": unknown,
            "malformed_lines": malformed,
            "truncated_outputs": truncated,
            "repeated_spans": duplicates,
        }
        return [sorted(d.values(), key=lambda s: (s.start, s.end, s.label)) for d in spans]
