"""span_generation inference: windows -> (selector) -> prompts -> generate -> read -> offsets.

`toolkit eval`, the end-of-training evaluation, the training curve and `toolkit compare` all call
`SpanGenerator.predict`; the completion format (`generation.target`) is saved with the model
(completions.py). What a completion names that cannot be located in its window is a hallucinated span,
counted as a false positive and listed.
"""

from __future__ import annotations

import copy
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from toolkit.infer.completions import (
    CompletionSpec,
    WindowReading,
    document_spans,
    document_views,
    prompt_body,
    read_completion,
)
from toolkit.infer.prompts import render_prompt
from toolkit.infer.selector import WindowSelector
from toolkit.models.runtimes import (
    artifact_autocast,
    default_device,
    load_model_dir,
    preferred_autocast,
    runtime_named,
)
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import Run, open_run
from toolkit.spans.decoding import PredictedSpan

# Shorter shared prefixes are read with each prompt: a cache copy per batch would cost more than it saves.
MIN_CACHED_PREFIX = 8


def inference_autocast(meta: ModelMeta, device: str, precision: str | None = None) -> str | None:
    """ "bfloat16" when the model asks for it (generation.precision=prefer_bf16, or `precision`) and the device
    has bf16 units; None for fp32. An ONNX artifact runs as exported."""
    if meta.export is not None and not runtime_named(meta.export.runtime).torch:
        return None
    return preferred_autocast(precision or meta.generation.precision, device)


class SpanGenerator:
    """A trained span-generation model: generates each window's spans and maps them back to character offsets."""

    def __init__(self, model, tokenizer, meta: ModelMeta, device: str = "cpu", selector: WindowSelector | None = None):
        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.meta = meta
        self.labels = list(meta.labels)
        self.spec = CompletionSpec.of(meta.generation)
        self.device = device
        self.selector = selector
        # "bfloat16": generate with bf16 weights (generation.precision=prefer_bf16 on a machine with bf16 units).
        # Not autocast: autocast re-casts every fp32 weight at every decoding step, which doubled decoding time.
        self.autocast: str | None = inference_autocast(meta, device)
        self.last_report: dict = {}
        self.last_selection: tuple[list, list[bool]] = ([], [])  # (windows, read by the decoder) of the last predict
        self.reuse_prefix = True  # read the prompts' shared prefix once (False: every prompt whole; for benchmarks)
        self._prefix: tuple | None = None  # (shared prompt prefix ids, its KV cache, the model that made it)

    @classmethod
    def load(cls, run: Run | Path, device: str | None = None, precision: str | None = None) -> SpanGenerator:
        """The saved model, its weights loaded in the precision it generates in (`precision`, "fp32" or
        "prefer_bf16", overrides the run's generation.precision)."""
        run = run if isinstance(run, Run) else open_run(run)
        dtype = artifact_autocast(run) or inference_autocast(run.meta, device or default_device(), precision)
        model, tokenizer, meta, device = load_model_dir(run, "AutoModelForCausalLM", device, dtype)
        generator = cls(model, tokenizer, meta, device, WindowSelector.load(run.model_dir, meta.selector))
        generator.autocast = dtype
        return generator

    @classmethod
    def load_reference(cls, run: Run) -> SpanGenerator:
        """The run's model in fp32, whatever its generation.precision."""
        return cls.load(run, precision="fp32")

    def warm_up(self) -> None:
        """Nothing is compiled per shape."""

    def parity_inputs(self, texts: Sequence[str]) -> list:
        return self.views(texts)[0]

    def parity_outputs(self, texts: Sequence[str], views: Sequence) -> tuple[list, list]:
        """(next-token logits of every view's prompt, generated spans)."""
        import torch

        logits = []
        for view in views:
            prompt = self.prompt(texts, view)
            enc = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False, return_token_type_ids=False)
            with torch.inference_mode():
                logits.append(self.model(**enc).logits[0, -1:].float().numpy())
        return logits, self.predict(texts)

    def decisions(self, logits):
        """The next token."""
        return logits.argmax(-1)

    def runner(self):
        """The model that generates: the model itself when it is stored in the precision asked for, else (a
        model lent by training, for a curve point) a bf16 copy with any LoRA adapter merged, leaving
        training's weights untouched."""
        import torch

        if self.autocast is None or not isinstance(self.model, torch.nn.Module):
            return self.model
        dtype = getattr(torch, self.autocast)
        if next(self.model.parameters()).dtype == dtype:
            return self.model
        model = copy.deepcopy(self.model)
        if hasattr(model, "merge_and_unload"):
            model = model.merge_and_unload()
        return model.to(dtype).eval()

    def prompt(self, texts: Sequence[str], view) -> str:
        """One window's prompt as the model sees it (export parity reads the same)."""
        return render_prompt(
            self.tokenizer,
            prompt_body(self.spec, view, texts[view.doc], self.labels),
            self.meta.generation.chat_template,
        )

    def views(self, texts: Sequence[str]) -> tuple[list, list[list[tuple[int, int]]]]:
        """Every window of every document as the decoder reads it, and each document's segments (segments target)."""
        return document_views(self.tokenizer, list(texts), self.spec, self.meta.max_length, self.meta.stride)

    def generate(
        self, prompts: Sequence[str], grammars: Sequence | None, model=None
    ) -> tuple[list[tuple[str, bool]], int]:
        """Greedy completions for a batch of prompts: (text, ended with EOS) each, and the generated-token count.

        The prompts' shared token prefix (the instruction) is read once and its KV cache reused by every batch:
        each row is the prefix, left padding, then the row's own tokens, so every prompt ends at one column."""
        import torch

        from toolkit.infer.constrained import make_copy_processor

        model = model if model is not None else self.runner()
        rows = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        prefix, cache = self._prefix_cache(model, rows)
        tails = [r[len(prefix) :] for r in rows]
        width = len(prefix) + max(len(t) for t in tails)
        pad = self.tokenizer.pad_token_id
        ids = [list(prefix) + [pad] * (width - len(prefix) - len(t)) + t for t in tails]
        mask = [[1] * len(prefix) + [0] * (width - len(prefix) - len(t)) + [1] * len(t) for t in tails]
        enc = {
            "input_ids": torch.tensor(ids, device=self.device),
            "attention_mask": torch.tensor(mask, device=self.device),
        }
        if cache is not None:
            cache = copy.deepcopy(cache)  # generate() appends to the cache it is given
            cache.batch_repeat_interleave(len(rows))
            enc["past_key_values"] = cache
        processors = [make_copy_processor(self.tokenizer, grammars, width)] if grammars is not None else None
        with torch.inference_mode():
            out = model.generate(
                **enc,
                max_new_tokens=self.meta.generation.max_new_tokens,
                do_sample=False,
                logits_processor=processors,
                eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=pad,
            )
        texts, count = [], 0
        for row in out[:, width:].tolist():
            finished = self.tokenizer.eos_token_id in row
            if finished:
                row = row[: row.index(self.tokenizer.eos_token_id) + 1]
            row = [t for t in row if t != pad]
            count += len(row)
            texts.append(
                (self.tokenizer.decode(row, skip_special_tokens=True, clean_up_tokenization_spaces=False), finished)
            )
        return texts, count

    def _prefix_cache(self, model, rows: list[list[int]]) -> tuple[tuple[int, ...], object | None]:
        """The token prefix every row shares and its KV cache, kept for the next batches while they share it;
        ((), None) where the model cannot take a cache (an ONNX Runtime graph) or the prefix is short."""
        import torch

        if not self.reuse_prefix or not isinstance(model, torch.nn.Module):
            return (), None
        if self._prefix is not None and self._prefix[2] is model:
            prefix, cache, _ = self._prefix
            if all(len(r) > len(prefix) and tuple(r[: len(prefix)]) == prefix for r in rows):
                return prefix, cache
        shared = min(len(os.path.commonprefix(rows)), min(len(r) for r in rows) - 1)  # a token of its own each
        if shared < MIN_CACHED_PREFIX:
            return (), None
        prefix = tuple(rows[0][:shared])
        with torch.inference_mode():
            ids = torch.tensor([prefix], device=self.device)
            cache = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True).past_key_values
        self._prefix = (prefix, cache, model)
        return prefix, cache

    def predict(
        self, texts: Sequence[str], constrained: bool | None = None, batch_size: int | None = None
    ) -> list[list[PredictedSpan]]:
        from toolkit.infer.constrained import grammar_for

        constrained = self.meta.generation.constrained if constrained is None else constrained
        batch_size = batch_size or self.meta.generation.batch_size
        started = time.perf_counter()
        texts = list(texts)
        views, segments = self.views(texts)
        read = self.selector.flags([v.text for v in views]) if self.selector else [True] * len(views)
        self.last_selection = (views, read)
        readings = [WindowReading() for _ in views]
        truncated, generated_tokens = 0, 0
        order = sorted((i for i in range(len(views)) if read[i]), key=lambda i: views[i].end - views[i].start)
        model = self.runner()
        for lo in range(0, len(order), batch_size):
            batch = order[lo : lo + batch_size]
            prompts = [self.prompt(texts, views[i]) for i in batch]
            grammars = [grammar_for(self.spec, views[i], self.labels) for i in batch] if constrained else None
            outputs, n = self.generate(prompts, grammars, model)
            generated_tokens += n
            for i, (output, finished) in zip(batch, outputs):
                if not finished:
                    # Cut off by max_new_tokens: the last line may be incomplete; it is dropped and counted.
                    output, _, tail = output.rpartition("\n")
                    truncated += 1 if tail.strip() else 0
                readings[i] = read_completion(self.spec, views[i], output, self.labels)
        if model is not self.model:
            self._prefix = None  # release the bf16 copy of a lent model with its cache
        by_doc: list[list[int]] = [[] for _ in texts]
        for i, v in enumerate(views):
            by_doc[v.doc].append(i)
        spans = [
            document_spans(self.spec, [views[i] for i in idx], [readings[i] for i in idx], self.labels, segments[d])
            for d, idx in enumerate(by_doc)
        ]
        seconds = time.perf_counter() - started
        hallucinated = [
            {"doc": views[i].doc, "label": h.label, "text": h.text}
            for i, r in enumerate(readings)
            for h in r.hallucinated
        ]
        methods = Counter(m for r in readings for m in r.methods)
        self.last_report = {
            "seconds": round(seconds, 2),
            "target": self.spec.target,
            "windows": len(views),
            "windows_read": sum(read),
            "generated_tokens": generated_tokens,
            "generated_tokens_per_second": round(generated_tokens / seconds, 2) if seconds else None,
            "constrained": constrained,
            "autocast": self.autocast,
            "recovered_by": dict(methods),
            "hallucinated_spans": len(hallucinated),
            "hallucinated": hallucinated,
            "unknown_label_lines": sum(len(r.unknown_labels) for r in readings),
            "malformed_lines": sum(len(r.malformed) for r in readings),
            "truncated_outputs": truncated,
            "repeated_spans": sum(r.duplicates for r in readings),
        }
        return spans
