"""Training and evaluation features for both tracks, from the same windows (no torch).

token_classification: documents -> token windows with per-token targets (`token_features`).
span_generation: documents -> text windows (`generation_windows`) -> prompt + completion examples
(`generation_examples`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from toolkit.data.records import filter_labels
from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.infer.prompts import render_prompt
from toolkit.registry import RecipeBase
from toolkit.spans.alignment import IGNORE, flat_targets, multi_label_targets, representable
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.windows import Window, make_windows


@dataclass
class FeatureReport:
    """What building features kept and left out; saved in the run directory."""

    documents: int = 0
    spans: int = 0
    spans_not_representable: int = 0
    spans_other_labels: Counter = field(default_factory=Counter)
    windows: int = 0
    windows_with_spans: int = 0
    negative_windows_kept: int = 0
    negative_windows_dropped: int = 0
    tokens: int = 0
    # segment models: tokens inside a segment, and inside a segment positive for some label (what the loss reads
    # for clauses), out of `tokens`
    segment_tokens: int | None = None
    positive_segment_tokens: int | None = None

    def to_dict(self) -> dict:
        return {**self.__dict__, "spans_other_labels": dict(self.spans_other_labels)}


def labels_to_learn(recipe: RecipeBase, train_records: list[SpanRecord]) -> list[str]:
    """data.labels, or every label in the training data; no label at all is a user error."""
    labels = recipe.data.labels or sorted({s.label for r in train_records for s in r.spans})
    if not labels:
        raise ToolkitError(f"{recipe.data.train}: no spans to learn from", fix="label some spans, or check data.labels")
    return list(labels)


def sample_negatives(positive: list[bool], ratio: float | None, seed: int) -> tuple[list[int], int, int]:
    """Indices to keep: every positive window plus `ratio` x as many sampled negatives (all when ratio is None).
    Returns (kept indices, negatives kept, negatives dropped)."""
    negatives = [i for i, p in enumerate(positive) if not p]
    if ratio is None:
        return list(range(len(positive))), len(negatives), 0
    n_keep = min(len(negatives), int(round(ratio * (len(positive) - len(negatives)))))
    chosen = set(random.Random(seed).sample(negatives, n_keep))
    return [i for i, p in enumerate(positive) if p or i in chosen], n_keep, len(negatives) - n_keep


def token_features(
    tokenizer,
    records: list[SpanRecord],
    space: LabelSpace,
    max_length: int,
    stride: int,
    negative_ratio: float | None = None,
    seed: int = 0,
) -> tuple[list[Window], list[list], FeatureReport]:
    """Windows and their targets. Spans the label space cannot hold are counted, never silently dropped."""
    report = FeatureReport(documents=len(records))
    records = filter_labels(records, space.labels, report.spans_other_labels)
    tag_to_id = {t: i for i, t in enumerate(space.tags)}
    kept_spans = []
    for r in records:
        kept, lost = representable(r.spans, space.multi_label)
        kept_spans.append(kept)
        report.spans += len(r.spans)
        report.spans_not_representable += len(lost)
    windows = make_windows(tokenizer, [r.text for r in records], max_length, stride)
    targets = []
    for w in windows:
        if space.multi_label:
            t = multi_label_targets(w.offsets, w.word_ids, kept_spans[w.doc], space.labels, space.label_all_subtokens)
            positive = any(v > 0 for row in t for v in row)
        else:
            t = flat_targets(w.offsets, w.word_ids, kept_spans[w.doc], tag_to_id, space.label_all_subtokens)
            positive = any(v not in (IGNORE, 0) for v in t)
        targets.append((t, positive))
    report.windows = len(windows)
    report.windows_with_spans = sum(p for _, p in targets)
    keep, report.negative_windows_kept, report.negative_windows_dropped = sample_negatives(
        [p for _, p in targets], negative_ratio, seed
    )
    windows = [windows[i] for i in keep]
    report.tokens = sum(len(w.input_ids) for w in windows)
    return windows, [targets[i][0] for i in keep], report


@dataclass
class GenerationWindows:
    """span_generation's windows of a set of documents, as the decoder reads them (completions.WindowView),
    each document's segments (segments target) and whether each window holds any part of a span."""

    views: list
    segments: list[list[tuple[int, int]]]
    positive: list[bool]


def generation_windows(
    tokenizer, records: list[SpanRecord], spec, max_length: int, stride: int
) -> tuple[GenerationWindows, FeatureReport]:
    """Every window of every document. spans_not_representable: for text and anchors, spans never wholly
    inside one window; for segments, spans no segment of their label carries."""
    from toolkit.infer.completions import document_views
    from toolkit.spans.segment_decoding import segment_targets

    report = FeatureReport(documents=len(records), spans=sum(len(r.spans) for r in records))
    views, segments = document_views(tokenizer, [r.text for r in records], spec, max_length, stride)
    positive = [any(v.start < s.end and s.start < v.end for s in records[v.doc].spans) for v in views]
    if spec.target == "segments":
        for r, segs in zip(records, segments):
            labels = sorted({s.label for s in r.spans})
            carried = segment_targets(segs, r.spans, labels, spec.min_overlap)
            for s in r.spans:
                j = labels.index(s.label)
                report.spans_not_representable += not any(
                    carried[k][j] for k, (a, b) in enumerate(segs) if a < s.end and s.start < b
                )
    else:
        covered = {
            (v.doc, s.start, s.end, s.label)
            for v in views
            for s in records[v.doc].spans
            if v.start <= s.start and s.end <= v.end
        }
        report.spans_not_representable = report.spans - len(covered)
    report.windows = len(views)
    report.windows_with_spans = sum(positive)
    return GenerationWindows(views, segments, positive), report


def generation_examples(
    tokenizer,
    records: list[SpanRecord],
    labels: list[str],
    spec,
    windows: GenerationWindows,
    keep: list[int],
    chat_template: bool,
) -> tuple[list[dict], int]:
    """Examples for the windows `keep` indexes: input_ids = prompt + completion + EOS; labels mask the prompt
    (-100) so the loss covers only the completion. Returns (examples, their tokens)."""
    from toolkit.infer.completions import build_completion, prompt_body

    examples, tokens = [], 0
    for i in keep:
        view = windows.views[i]
        rec = records[view.doc]
        prompt = render_prompt(tokenizer, prompt_body(spec, view, rec.text, labels), chat_template)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        completion = build_completion(spec, view, rec.spans, labels, windows.segments[view.doc])
        target_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append({"input_ids": prompt_ids + target_ids, "labels": [-100] * len(prompt_ids) + target_ids})
        tokens += len(prompt_ids) + len(target_ids)
    return examples, tokens
