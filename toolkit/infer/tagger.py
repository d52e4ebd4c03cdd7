"""token_classification inference: windows -> model -> stitched, decoded spans.

`toolkit eval`, the end-of-training evaluation and the serving endpoint all call
`Tagger.predict`, so the spans served are the spans scored.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from toolkit.models.runtimes import artifact_autocast, autocast_context, load_model_dir, runtime_of
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import Run, open_run
from toolkit.spans.decoding import PredictedSpan, decode_documents
from toolkit.spans.streaming import CHUNK_CHARS, count_tokens, decode_stream, groups_of, stream_windows
from toolkit.spans.windows import Window, fitted_max_length, make_fitted_windows, make_windows


class Tagger:
    """A trained token-classification model with its windowing and decoding settings."""

    # A document longer than this (characters) is read a group of windows at a time (`predict_long`), so
    # memory follows the windows in flight, not the document; shorter ones are batched together.
    long_document_chars = 100_000
    # Windows scored and decoded together in `predict_long`, and characters tokenized per call.
    group_windows = 64
    chunk_chars = CHUNK_CHARS
    # The long-document path only slices its text, so it reads a long .txt file as a `FileText` (from the file,
    # not held whole); `toolkit predict` gives other predictors `str(text)`.
    reads_file_text = True

    def __init__(self, model, tokenizer, meta: ModelMeta, device: str = "cpu"):
        # A torch module, or optimum's ORTModel (an exported artifact): both take the same call.
        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.meta = meta
        self.space = meta.space
        self.device = device
        # "bfloat16": run a PyTorch model under autocast (machines with bf16 units); None: as stored.
        self.autocast: str | None = None
        # True: one window per forward pass, on runtimes whose answers move with padding (Runtime.windows_alone).
        self.window_alone = False
        # An int: windows sized to each document up to this many tokens, a document that fits read in one pass
        # (export chooses it where it measured parity and speed); None: the trained max_length and stride.
        self.window_limit: int | None = None
        self.last_report: dict = {}

    @classmethod
    def load(cls, run: Run | Path, device: str | None = None) -> Tagger:
        run = run if isinstance(run, Run) else open_run(run)
        tagger = cls(*load_model_dir(run, "AutoModelForTokenClassification", device))
        # An exported PyTorch model runs as its export measured it: its precision, batch-invariant.
        tagger.autocast = artifact_autocast(run)
        tagger.window_alone = run.is_artifact and runtime_of(run).windows_alone
        tagger.window_limit = run.window_limit
        return tagger

    @classmethod
    def load_reference(cls, run: Run) -> Tagger:
        """The run's PyTorch model as trained (a run loads in fp32, unbatched windows batched)."""
        return cls.load(run)

    def parity_inputs(self, texts: Sequence[str]) -> list[Window]:
        return self.windows(texts)

    def parity_outputs(self, texts: Sequence[str], windows: Sequence[Window]) -> tuple[list, list]:
        """(per-window logits, decoded spans) on the parity windows, one forward pass."""
        logits = self.logits(windows)
        return logits, self.decode(texts, windows, logits)

    def decisions(self, logits: np.ndarray) -> np.ndarray:
        """Each token's tag; a multi-label model's outputs are an O/B/I softmax per label: a tag per label."""
        if self.space.multi_label:
            return logits.reshape(logits.shape[0], -1, 3).argmax(-1)
        return logits.argmax(-1)

    def windows(self, texts: Sequence[str]) -> list[Window]:
        if self.window_limit is not None:
            return make_fitted_windows(self.tokenizer, texts, self.window_limit, self.meta.stride)
        return make_windows(self.tokenizer, texts, self.meta.max_length, self.meta.stride)

    def warm_up(self) -> None:
        """Prepare the runtime for every window shape this tagger can send (OpenVINO compiles one model per
        padded width): a service calls it before it reports ready, so no request pays for a compilation."""
        if hasattr(self.model, "prepare"):
            self.model.prepare(self.window_limit or self.meta.max_length)

    def position_limit(self) -> int:
        """The most tokens one window can hold: the model's positions (less a padding offset, RoBERTa-style),
        and the tokenizer's stated maximum where it states one."""
        from toolkit.models.pretrained import position_limit

        limit = position_limit(self.model.config) or self.meta.max_length
        stated = getattr(self.tokenizer, "model_max_length", None)
        return min(limit, stated) if stated and stated < 10**6 else limit

    def logits(self, windows: Sequence[Window], batch_size: int = 16) -> list[np.ndarray]:
        """Per-window logits [tokens, outputs]; windows are batched by length to limit padding."""
        import torch

        if self.window_alone and hasattr(self.model, "logits_each"):
            # OpenVINO: every window alone, as many at once as there are threads.
            return self.model.logits_each([list(w.input_ids) for w in windows])
        batch_size = 1 if self.window_alone else batch_size
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].input_ids))
        out: list[np.ndarray | None] = [None] * len(windows)
        pad = self.tokenizer.pad_token_id or 0
        with torch.inference_mode(), autocast_context(self.device, self.autocast):
            for lo in range(0, len(order), batch_size):
                idx = order[lo : lo + batch_size]
                width = max(len(windows[i].input_ids) for i in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for row, i in enumerate(idx):
                    n = len(windows[i].input_ids)
                    ids[row, :n] = torch.tensor(windows[i].input_ids)
                    mask[row, :n] = 1
                # ORTModel answers torch inputs with torch tensors, like the PyTorch model.
                logits = (
                    self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
                    .logits.float()
                    .cpu()
                    .numpy()
                )
                for row, i in enumerate(idx):
                    out[i] = logits[row, : len(windows[i].input_ids)]
        return out  # type: ignore[return-value]

    def decode(
        self, texts: Sequence[str], windows: Sequence[Window], logits: Sequence[np.ndarray]
    ) -> list[list[PredictedSpan]]:
        """Per-window logits -> stitched character spans per document."""
        return decode_documents(
            texts,
            [w.doc for w in windows],
            [w.offsets for w in windows],
            [w.word_ids for w in windows],
            list(logits),
            self.space,
        )

    def predict(self, texts: Sequence[str], batch_size: int | None = None) -> list[list[PredictedSpan]]:
        batch_size = batch_size or 16
        start = time.perf_counter()
        short = [i for i, t in enumerate(texts) if len(t) <= self.long_document_chars]
        short_texts = [str(texts[i]) for i in short]  # a str is not copied
        windows = self.windows(short_texts)
        spans: list[list[PredictedSpan] | None] = [None] * len(texts)
        for i, doc_spans in zip(short, self.decode(short_texts, windows, self.logits(windows, batch_size))):
            spans[i] = doc_spans
        streamed = new_tally()
        cut: dict[int, int] = {}
        hard: dict[int, int] = {}
        for i in (i for i, t in enumerate(texts) if len(t) > self.long_document_chars):
            before, hard_before = streamed["forced_cuts"], streamed["hard_cuts"]
            spans[i] = self.predict_long(texts[i], batch_size, streamed)
            if streamed["forced_cuts"] > before:
                cut[i] = streamed["forced_cuts"] - before
            if streamed["hard_cuts"] > hard_before:
                hard[i] = streamed["hard_cuts"] - hard_before
        self.last_report = self.report_since(start, windows, streamed)
        if cut:  # document index -> spans cut where no place to end one came within the bound (toolkit predict's meta)
            self.last_report["spans_cut_in_long_documents"] = cut
        # document index -> text cut where no tokenizer-safe place came within a piece (toolkit predict's meta)
        if hard:
            self.last_report["text_cut_in_long_documents"] = hard
        return spans  # type: ignore[return-value]

    def long_windows(self, text: str, tally: dict | None = None) -> Iterator[Window]:
        """`windows([text])`, one at a time (`toolkit.spans.streaming`; `tally` counts its hard cuts)."""
        stride, max_length = self.meta.stride, self.meta.max_length
        if self.window_limit is not None:
            specials = self.tokenizer.num_special_tokens_to_add()
            content = count_tokens(self.tokenizer, text, self.chunk_chars)
            max_length = fitted_max_length(content, specials, self.window_limit, stride)
        return stream_windows(self.tokenizer, text, max_length, stride, chunk_chars=self.chunk_chars, tally=tally)

    def scored_groups(
        self, windows: Iterator[Window], batch_size: int, tally: dict
    ) -> Iterator[tuple[list[Window], list[np.ndarray]]]:
        """Groups of `group_windows` windows with their logits, counted into `tally`."""
        for group in groups_of(windows, self.group_windows):
            tally["windows"] += len(group)
            tally["tokens"] += sum(len(w.input_ids) for w in group)
            yield group, self.logits(group, batch_size)

    def predict_long(self, text: str, batch_size: int = 16, tally: dict | None = None) -> list[PredictedSpan]:
        """One long document's spans (what `predict` gives), in memory bounded by `group_windows`."""
        tally = new_tally() if tally is None else tally
        windows = self.long_windows(text, tally)
        spans, forced = decode_stream(text, self.scored_groups(windows, batch_size, tally), self.space)
        tally["forced_cuts"] += forced
        return spans

    def report_since(self, start: float, windows: Sequence[Window], streamed: dict | None = None) -> dict:
        """What reading `windows` (and `streamed` long documents' counts) cost since `start` (perf_counter):
        the predictor's last_report."""
        streamed = streamed or {}
        report = {
            "seconds": time.perf_counter() - start,
            "windows": len(windows) + streamed.get("windows", 0),
            "tokens": sum(len(w.input_ids) for w in windows) + streamed.get("tokens", 0),
            "autocast": self.autocast,
        }
        return report


def new_tally() -> dict:
    """What reading long documents counts: windows, tokens, spans cut at the memory bound, and text cut where no
    tokenizer-safe place came within a piece (`spans.streaming.token_pieces`)."""
    return {"windows": 0, "tokens": 0, "forced_cuts": 0, "hard_cuts": 0}
