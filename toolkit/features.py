"""Training and evaluation features: documents -> windows with targets (no torch)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from toolkit.alignment import IGNORE, flat_targets, multi_label_targets, representable, tag_names
from toolkit.schema import SpanRecord
from toolkit.windows import Window, make_windows


@dataclass
class LabelSpace:
    """Labels and how the model's outputs map to them."""

    labels: list[str]
    multi_label: bool

    @property
    def tags(self) -> list[str]:
        return tag_names(self.labels)

    @property
    def num_outputs(self) -> int:
        return 3 * len(self.labels) if self.multi_label else len(self.tags)

    def output_names(self) -> list[str]:
        """Flat: O, B-X, I-X, ...; multi-label: an O/B/I group of three per label."""
        if self.multi_label:
            return [f"{p}-{lb}" for lb in self.labels for p in ("O", "B", "I")]
        return self.tags


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

    def to_dict(self) -> dict:
        return {**self.__dict__, "spans_other_labels": dict(self.spans_other_labels)}


def sample_negatives(positive: list[bool], ratio: float | None, seed: int) -> tuple[list[int], int, int]:
    """Indices to keep: every positive window plus `ratio` x as many sampled negatives (all when ratio is None).
    Returns (kept indices, negatives kept, negatives dropped)."""
    negatives = [i for i, p in enumerate(positive) if not p]
    if ratio is None:
        return list(range(len(positive))), len(negatives), 0
    n_keep = min(len(negatives), int(round(ratio * (len(positive) - len(negatives)))))
    chosen = set(random.Random(seed).sample(negatives, n_keep))
    return [i for i, p in enumerate(positive) if p or i in chosen], n_keep, len(negatives) - n_keep


def filter_labels(records: list[SpanRecord], labels: list[str], report: FeatureReport) -> list[SpanRecord]:
    keep = set(labels)
    out = []
    for r in records:
        dropped = [s for s in r.spans if s.label not in keep]
        report.spans_other_labels.update(s.label for s in dropped)
        out.append(r.model_copy(update={"spans": [s for s in r.spans if s.label in keep]}) if dropped else r)
    return out


def build_features(
    tokenizer,
    records: list[SpanRecord],
    space: LabelSpace,
    max_length: int,
    stride: int,
    label_all_subtokens: bool,
    negative_ratio: float | None = None,
    seed: int = 0,
) -> tuple[list[Window], list[list], FeatureReport]:
    """Windows and their targets. Spans the label space cannot hold are counted, never silently dropped."""
    report = FeatureReport(documents=len(records))
    records = filter_labels(records, space.labels, report)
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
            t = multi_label_targets(w.offsets, w.word_ids, kept_spans[w.doc], space.labels, label_all_subtokens)
            positive = any(v > 0 for row in t for v in row)
        else:
            t = flat_targets(w.offsets, w.word_ids, kept_spans[w.doc], tag_to_id, label_all_subtokens)
            positive = any(v not in (IGNORE, 0) for v in t)
        targets.append((t, positive))
    report.windows = len(windows)
    report.windows_with_spans = sum(p for _, p in targets)
    keep, report.negative_windows_kept, report.negative_windows_dropped = sample_negatives([p for _, p in targets], negative_ratio, seed)
    windows = [windows[i] for i in keep]
    report.tokens = sum(len(w.input_ids) for w in windows)
    return windows, [targets[i][0] for i in keep], report
