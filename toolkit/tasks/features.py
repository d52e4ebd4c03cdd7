"""Training and evaluation features for both tracks, from the same windows (no torch).

token_classification: documents -> token windows with per-token targets (`token_features`).
span_generation: documents -> text windows (`generation_windows`) -> prompt + completion examples
(`generation_examples`).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

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


@dataclass
class SegmentWindows:
    """segment_classification features: token windows, each token's window-local segment index
    (NO_SEGMENT outside segments) and each window-local segment's multi-hot labels."""

    windows: list[Window]
    local_ids: list[list[int]]  # window-local segment index per token
    segment_labels: list[list[list[int]]]  # per window: [local segments][labels]
    segment_index: list[list[int]]  # per window: the document's index of each local segment
    priors: list[list[list[float]]] | None = None  # segments.linear_prior: per window, [local segments][labels]

    def subset(self, indices: list[int]) -> SegmentWindows:
        return SegmentWindows(
            [self.windows[i] for i in indices],
            [self.local_ids[i] for i in indices],
            [self.segment_labels[i] for i in indices],
            [self.segment_index[i] for i in indices],
            None if self.priors is None else [self.priors[i] for i in indices],
        )

    def __add__(self, other: SegmentWindows) -> SegmentWindows:
        if (self.priors is None) != (other.priors is None):
            raise ValueError("windows with and without prior logits cannot be joined")
        return SegmentWindows(
            self.windows + other.windows,
            self.local_ids + other.local_ids,
            self.segment_labels + other.segment_labels,
            self.segment_index + other.segment_index,
            None if self.priors is None else self.priors + other.priors,
        )

    def with_priors(self, document_logits: list[np.ndarray]) -> SegmentWindows:
        """These windows with each local segment's prior logits, read from per-document [segments x labels]."""
        priors = [
            np.asarray(document_logits[w.doc])[index].tolist() for w, index in zip(self.windows, self.segment_index)
        ]
        return dataclasses.replace(self, priors=priors)


def segment_features(
    tokenizer,
    records: list[SpanRecord],
    labels: list[str],
    max_length: int,
    stride: int,
    min_overlap: float,
    negative_ratio: float | None = None,
    seed: int = 0,
) -> tuple[SegmentWindows, FeatureReport, SegmentWindows]:
    """Windows over whole documents (never truncated), their segments and targets. Windows without a
    positive segment are sampled by `negative_ratio` (training only). Returns (kept windows, report,
    the negative windows left out: the pool hard-negative mining draws from)."""
    from toolkit.spans.segment_decoding import NO_SEGMENT, segment_targets, token_segments
    from toolkit.spans.segments import segment_text

    report = FeatureReport(documents=len(records))
    records = filter_labels(records, labels, report.spans_other_labels)
    report.spans = sum(len(r.spans) for r in records)
    segments = [segment_text(r.text) for r in records]
    targets = [segment_targets(segs, r.spans, labels, min_overlap) for segs, r in zip(segments, records)]
    windows = make_windows(tokenizer, [r.text for r in records], max_length, stride)
    local_ids, seg_labels, index, positive = [], [], [], []
    for w in windows:
        ids = token_segments(w.offsets, segments[w.doc])
        order = list(dict.fromkeys(i for i in ids if i != NO_SEGMENT))
        local = {g: k for k, g in enumerate(order)}
        local_ids.append([local.get(i, NO_SEGMENT) for i in ids])
        rows = [targets[w.doc][g] for g in order]
        seg_labels.append(rows)
        index.append(order)
        positive.append(any(any(row) for row in rows))
    report.windows = len(windows)
    report.windows_with_spans = sum(positive)
    keep, report.negative_windows_kept, report.negative_windows_dropped = sample_negatives(
        positive, negative_ratio, seed
    )
    every = SegmentWindows(windows, local_ids, seg_labels, index)
    kept = every.subset(keep)
    kept_set = set(keep)
    left_out = every.subset([i for i in range(len(windows)) if i not in kept_set])
    report.tokens = sum(len(w.input_ids) for w in kept.windows)
    report.segment_tokens = sum(sum(i != NO_SEGMENT for i in kept.local_ids[n]) for n in range(len(kept.windows)))
    report.positive_segment_tokens = sum(
        sum(i != NO_SEGMENT and any(rows[i]) for i in ids) for ids, rows in zip(kept.local_ids, kept.segment_labels)
    )
    report.spans_not_representable = uncarried_spans(records, segments, targets, labels)
    return kept, report, left_out


def uncarried_spans(records: list[SpanRecord], segments: list, targets: list, labels: list[str]) -> int:
    """Spans no segment carries (every segment they touch is mostly outside them): counted, not dropped silently."""
    carried = [{(k, j) for k, row in enumerate(t) for j, v in enumerate(row) if v} for t in targets]
    index = {label: j for j, label in enumerate(labels)}
    return sum(
        not any((k, index[s.label]) in c for k, (a, b) in enumerate(segs) if a < s.end and s.start < b)
        for r, segs, c in zip(records, segments, carried)
        for s in r.spans
    )


def segment_input_features(
    tokenizer,
    records: list[SpanRecord],
    labels: list[str],
    segment_tokens: int,
    context_tokens: int,
    min_overlap: float,
) -> tuple[SegmentWindows, FeatureReport]:
    """segments.encoder_input=segments: one input per segment of every document (`make_segment_windows`), its
    targets the segment's. Nothing is sampled here: training draws its negatives anew each epoch
    (`SegmentEpochSampler`). The report counts inputs as windows, the ones with a positive segment as
    windows_with_spans, and the tokens of context and of segments cut at segment_tokens."""
    from toolkit.spans.segment_decoding import NO_SEGMENT, segment_targets
    from toolkit.spans.segment_windows import make_segment_windows
    from toolkit.spans.segments import segment_text

    report = FeatureReport(documents=len(records))
    records = filter_labels(records, labels, report.spans_other_labels)
    report.spans = sum(len(r.spans) for r in records)
    segments = [segment_text(r.text) for r in records]
    targets = [segment_targets(segs, r.spans, labels, min_overlap) for segs, r in zip(segments, records)]
    windows, index = make_segment_windows(
        tokenizer, [r.text for r in records], segments, segment_tokens, context_tokens
    )
    local_ids = [[NO_SEGMENT if b <= a else 0 for a, b in w.offsets] for w in windows]
    rows = [[targets[w.doc][k]] for w, k in zip(windows, index)]
    report.windows = len(windows)
    report.windows_with_spans = sum(any(r[0]) for r in rows)
    report.tokens = sum(len(w.input_ids) for w in windows)
    report.segment_tokens = sum(sum(i == 0 for i in ids) for ids in local_ids)
    report.positive_segment_tokens = sum(sum(i == 0 for i in ids) for ids, r in zip(local_ids, rows) if any(r[0]))
    report.spans_not_representable = uncarried_spans(records, segments, targets, labels)
    return SegmentWindows(windows, local_ids, rows, [[k] for k in index]), report


def choose_hard_negatives(
    scores: list[float], min_score: float, limit: int, choose: str = "hardest", seed: int = 0
) -> list[int]:
    """Indices of the windows whose best segment score reaches `min_score`, highest first, at most `limit`;
    with choose="random", as many indices drawn at random from all the scored windows (the control)."""
    fired = sorted((i for i, v in enumerate(scores) if v >= min_score), key=lambda i: (-scores[i], i))[:limit]
    return sorted(random.Random(seed).sample(range(len(scores)), len(fired))) if choose == "random" else fired


class SegmentEpochSampler:
    """Training order for segments.encoder_input=segments: each epoch, every positive input and `ratio` x as
    many clause-free ones drawn anew, cut into batches of inputs of similar length (sorted within pools of 50
    batches), the batches shuffled. Our own because transformers' LengthGroupedSampler orders a fixed
    dataset: it cannot draw a fresh sample of negatives each epoch."""

    POOL_BATCHES = 50

    def __init__(self, positive: list[bool], lengths: list[int], ratio: float | None, batch_size: int, seed: int):
        self.positives = [i for i, p in enumerate(positive) if p]
        self.negatives = [i for i, p in enumerate(positive) if not p]
        wanted = len(self.negatives) if ratio is None else int(round(ratio * len(self.positives)))
        self.draw = min(len(self.negatives), wanted)
        self.lengths, self.batch_size, self.seed = lengths, batch_size, seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.positives) + self.draw

    def __iter__(self):
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        self.epoch += 1
        chosen = self.positives + rng.sample(self.negatives, self.draw)
        rng.shuffle(chosen)
        pool = self.batch_size * self.POOL_BATCHES
        batches = []
        for lo in range(0, len(chosen), pool):
            part = sorted(chosen[lo : lo + pool], key=self.lengths.__getitem__)
            batches += [part[i : i + self.batch_size] for i in range(0, len(part), self.batch_size)]
        rng.shuffle(batches)
        return iter([i for batch in batches for i in batch])
