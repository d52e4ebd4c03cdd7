"""`toolkit check`: validate span files and describe them, like `spacy debug data`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from toolkit.data.stats import CorpusStats, special_tokens_count, token_offsets
from toolkit.data.validation import CheckedRecord, collect
from toolkit.errors import Problem

RARE_LABEL_COUNT = 20


@dataclass
class CheckResult:
    report: dict
    problems: list[Problem]

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.errors or (strict and self.warnings) else 0


def run_check(
    paths: list[Path],
    labels: frozenset[str] | None = None,
    tokenizer=None,
    max_length: int | None = None,
) -> CheckResult:
    """Validate every file (streamed) and gather corpus statistics over the valid records; `tokenizer` (a loaded
    one: the data layer reads no models) adds token counts."""
    tok = tokenizer
    if tok is not None and max_length is None:
        model_max = getattr(tok, "model_max_length", None)
        max_length = model_max if isinstance(model_max, int) and model_max < 1_000_000 else None
    specials = special_tokens_count(tok) if tok is not None else 0
    stats = CorpusStats(max_length=max_length)
    per_file_spans: Counter = Counter()

    def on_record(checked: CheckedRecord) -> None:
        rec = checked.record
        offsets = token_offsets(tok, rec.text) if tok is not None else None
        stats.add(rec.id, rec.text, checked.spans, offsets, specials)
        per_file_spans[checked.file] += len(rec.spans)

    summary = collect(paths, labels, on_record)
    report = stats.to_dict()
    report["tokenizer"] = tokenizer
    report["files"] = [
        {
            "path": name,
            "records": summary.records[name],
            "records_rejected": summary.records_rejected[name],
            "spans_rejected": summary.spans_rejected[name],
        }
        for name in summary.records
    ]
    report["label_set"] = sorted(labels) if labels is not None else None
    report["rare_labels"] = [lb for lb, n in report["labels"].items() if n < RARE_LABEL_COUNT]
    by_kind = Counter(p.kind for p in summary.problems)
    report["problems"] = {
        "errors": sum(p.severity == "error" for p in summary.problems),
        "warnings": sum(p.severity == "warning" for p in summary.problems),
        "by_kind": dict(by_kind.most_common()),
        "items": [p.to_dict() for p in summary.problems],
    }
    return CheckResult(report, summary.problems)


def _dist_row(name: str, d: dict) -> list[str]:
    if not d.get("count"):
        return [name, "-", "-", "-", "-", "-", "-"]
    return [name] + [str(d[k]) for k in ("count", "min", "median", "p90", "p99", "max")]


def render_check(result: CheckResult, console: Console, max_problems: int = 100) -> None:
    """Human-readable report. `--json` prints `result.report` instead."""
    r = result.report
    console.rule("[bold]toolkit check")
    # Names fold onto more lines rather than being cut: a reader must see the whole path and label.
    files = Table(Column("file", overflow="fold"), "records", "rejected records", "rejected spans", title="Files")
    for f in r["files"]:
        files.add_row(f["path"], str(f["records"]), str(f["records_rejected"]), str(f["spans_rejected"]))
    console.print(files)
    console.print(f"Documents: {r['documents']} ({r['documents_without_spans']} without spans)   Spans: {r['spans']}")

    labels = Table(Column("label", overflow="fold"), "spans", title="Spans per label")
    for lb, n in r["labels"].items():
        labels.add_row(lb, str(n))
    console.print(labels)
    if r["rare_labels"]:
        console.print(
            f"[yellow]Labels with fewer than {RARE_LABEL_COUNT} spans (hard to learn): {', '.join(r['rare_labels'])}"
        )

    dists = Table("length", "count", "min", "median", "p90", "p99", "max", title="Length distributions")
    dists.add_row(*_dist_row("document (chars)", r["doc_chars"]))
    dists.add_row(*_dist_row("span (chars)", r["span_chars"]))
    if r["tokenizer"]:
        dists.add_row(*_dist_row("document (tokens)", r["doc_tokens"]))
        dists.add_row(*_dist_row("span (tokens)", r["span_tokens"]))
    console.print(dists)
    if r["tokenizer"]:
        over = r["docs_over_max_length"]
        console.print(f"Tokenizer: {r['tokenizer']}", soft_wrap=True, highlight=False)
        console.print(
            f"Documents longer than max length {r['max_length']}: {over['count']}"
            + (" (they will be split into sliding windows, never truncated)" if over["count"] else "")
        )
        if r["spans_misaligned_with_tokens"]:
            console.print(
                f"[yellow]Spans whose edges fall inside a token: {r['spans_misaligned_with_tokens']} (token tags "
                f"cannot reproduce their exact offsets)"
            )
    ov = r["overlaps"]
    console.print(
        f"Overlaps: {ov['spans_overlapping']} spans overlap another; pairs: "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in ov["pairs"].items())
    )
    console.print(
        f"A flat BIO scheme (one tag per token) must drop at least {ov['flat_bio_loss']} spans; "
        f"per-label BIO layers (multi_label mode) drop {ov['per_label_bio_loss']}."
    )
    ceiling = Table(
        Column("label", overflow="fold"),
        "spans",
        "both ends",
        "end",
        "Jaccard >= 0.5",
        title="Segment boundaries (the ceiling of segment_classification)",
    )
    for lb, c in r["segment_ceiling"].items():
        ceiling.add_row(
            "all labels" if lb == "__all__" else lb,
            str(c["spans"]),
            f"{c['both_ends']:.2f}",
            f"{c['end']:.2f}",
            f"{c['jaccard_05']:.2f}",
        )
    if r["segment_ceiling"]:
        console.print(ceiling)
    pr = r["problems"]
    console.rule(f"Problems: {pr['errors']} errors, {pr['warnings']} warnings")
    if pr["by_kind"]:
        kinds = Table(Column("kind", overflow="fold"), "count", title="Problems by kind")
        for k, n in pr["by_kind"].items():
            kinds.add_row(k, str(n))
        console.print(kinds)
    for p in result.problems[:max_problems]:
        style = "red" if p.severity == "error" else "yellow"
        console.print(f"[{style}]{p.severity}[/{style}] " + escape(p.render()), highlight=False, soft_wrap=True)
    if len(result.problems) > max_problems:
        console.print(f"... {len(result.problems) - max_problems} more (--max-problems N, or --json for all)")
    if not result.problems:
        console.print("[green]No problems found.")
