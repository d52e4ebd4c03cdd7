"""Loading span files for training and evaluation: validated first, refused with every problem listed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from toolkit.data.sample import SAMPLE_DIR
from toolkit.data.schema import Span, SpanRecord, sort_spans
from toolkit.data.validation import ValidationSummary, validate_files
from toolkit.errors import DataError, ToolkitError

SAMPLE_PREFIX = "sample:"


def resolve_data_path(ref: str) -> Path:
    """A path, or `sample:NAME` for the embedded sample (e.g. sample:contracts_train)."""
    if ref.startswith(SAMPLE_PREFIX):
        path = SAMPLE_DIR / f"{ref[len(SAMPLE_PREFIX) :]}.jsonl"
        if not path.is_file():
            names = sorted(p.stem for p in SAMPLE_DIR.glob("*.jsonl"))
            raise ToolkitError(
                f"no embedded sample {ref!r}", fix=f"use one of {', '.join(SAMPLE_PREFIX + n for n in names)}"
            )
        return path
    path = Path(ref)
    if not path.is_file():
        hint = (
            " (the public data lives in ../shared/data; run from the repository root)" if "shared/data" in ref else ""
        )
        raise ToolkitError(
            f"data file {ref!r} not found{hint}",
            fix="correct data.train / data.dev in the recipe, or override: data.train=PATH",
        )
    return path


def load_records(ref: str, max_docs: int | None = None) -> list[SpanRecord]:
    """All records of a span file; any validation error stops with the full list (warnings are allowed)."""
    path = resolve_data_path(ref)
    summary = ValidationSummary()
    records = [c.record for c in validate_files([path], None, summary)]
    if summary.errors:
        raise DataError(
            summary.errors, f"{path}: {len(summary.errors)} problem(s); run `toolkit check {path}` for the full report"
        )
    return records[:max_docs] if max_docs else records


def map_record_labels(rec: SpanRecord, mapping: dict[str, str]) -> tuple[SpanRecord, list[Span], int]:
    """Rename labels (OLD -> NEW; NEW "" drops). Returns the record, the spans dropped, and how many became
    duplicates."""
    spans, dropped = [], []
    for s in rec.spans:
        new = mapping.get(s.label, s.label)
        if new:
            spans.append(Span(start=s.start, end=s.end, label=new))
        else:
            dropped.append(s)
    merged = sort_spans(list(dict.fromkeys(spans)))
    return rec.model_copy(update={"spans": merged}), dropped, len(spans) - len(merged)


def load_splits(data, seed: int, sources: list[dict] | None = None) -> tuple[list[SpanRecord], list[SpanRecord]]:
    """A recipe's data section (`data`) as train and dev records, validated, capped and with data.label_map applied;
    the training corpora of data.extra_train mapped by their own label maps and drawn by their weights (with
    `seed`). `sources`, when given, receives one entry per training corpus: documents read and drawn, spans kept
    and dropped."""
    train = load_records(data.train, data.max_train_docs)
    dev = load_records(data.dev, data.max_dev_docs)
    if data.label_map:
        train = [map_record_labels(r, data.label_map)[0] for r in train]
        dev = [map_record_labels(r, data.label_map)[0] for r in dev]
    extra_train, train_weight = data.extra_corpora()
    if not extra_train and train_weight == 1.0:
        return train, dev
    corpora = [(data.train, train, train_weight, Counter())]
    dev_texts = {r.text for r in dev}
    for extra in extra_train:
        records, dropped = [], Counter()
        for r in load_records(extra.path):
            mapped, gone, _ = map_record_labels(r, extra.label_map or {})
            dropped.update(s.label for s in gone)
            records.append(mapped)
        leaked = [r.id for r in records if r.text in dev_texts]
        if leaked:
            # Another corpus may carry the target's dev documents (both drawn from PubMed, say): training on
            # them would inflate every dev score.
            raise ToolkitError(
                f"{extra.path}: {len(leaked)} document(s) also in data.dev ({data.dev}), e.g. ids {leaked[:5]}",
                fix="remove those documents from the extra corpus (dev must stay unseen)",
            )
        corpora.append((extra.path, records, extra.weight, dropped))
    combined = []
    for i, (path, records, weight, dropped) in enumerate(corpora):
        drawn = draw_documents(records, weight, seed + i)
        combined += drawn
        if sources is not None:
            sources.append(
                {
                    "path": path,
                    "documents": len(records),
                    "weight": weight,
                    "documents_per_epoch": len(drawn),
                    "spans_per_epoch": dict(Counter(s.label for r in drawn for s in r.spans)),
                    "spans_dropped_by_label_map": dict(dropped),
                }
            )
    return combined, dev


def draw_documents(records: list[SpanRecord], weight: float, seed: int) -> list[SpanRecord]:
    """round(weight x len(records)) documents: every one floor(weight) times, the rest drawn without replacement."""
    import random

    whole, share = divmod(weight, 1.0)
    extra = random.Random(seed).sample(records, round(share * len(records)))
    return records * int(whole) + extra


def filter_labels(records: list[SpanRecord], labels: Sequence[str], other: Counter | None = None) -> list[SpanRecord]:
    """Records with only the spans of `labels`; the spans of other labels are counted in `other`, never silently
    dropped."""
    keep = set(labels)
    out = []
    for r in records:
        dropped = [s for s in r.spans if s.label not in keep]
        if other is not None:
            other.update(s.label for s in dropped)
        out.append(r.model_copy(update={"spans": [s for s in r.spans if s.label in keep]}) if dropped else r)
    return out
