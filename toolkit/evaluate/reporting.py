"""Writing a run's outputs: metrics.json, predictions.jsonl and a short Markdown report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolkit.data.jsonl import write_jsonl
from toolkit.data.schema import SpanRecord
from toolkit.rundir import REPORT_FILE, Metrics, write_metrics_file
from toolkit.spans.content import drop_contentless
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.error_analysis import KINDS

HEADLINE = [
    ("span_precision", "span precision (exact)"),
    ("span_recall", "span recall (exact)"),
    ("span_f1", "span F1 (exact)"),
    ("span_macro_f1", "span macro F1"),
    ("seqeval_f1", "seqeval strict IOB2 F1"),
    ("jaccard_recall", "Jaccard >= {t} recall"),
    ("jaccard_f1", "Jaccard >= {t} F1"),
    ("boundary_start_recall", "boundary recall: start exact"),
    ("boundary_end_recall", "boundary recall: end exact"),
    ("boundary_both_recall", "boundary recall: both exact"),
]


# Short names for the terminal tables of compare and curves.
METRIC_NAMES = {
    "span_recall": "recall (exact span)",
    "boundary_start_recall": "boundary recall: start",
    "boundary_end_recall": "boundary recall: end",
    "boundary_both_recall": "boundary recall: both",
    "jaccard_recall": "recall (word Jaccard match)",
    "jaccard_precision": "precision (word Jaccard match)",
    "jaccard_f1": "F1 (word Jaccard match)",
    "span_precision": "precision (exact span)",
    "span_f1": "F1 (exact span)",
    "hallucination_rate": "hallucination rate",
}


def metric_name(key: str) -> str:
    """A metric's name for a table row: `boundary_both_within_3_recall` -> `boundary recall: both within 3 words`."""
    return METRIC_NAMES.get(key) or key.replace("boundary_both_within_", "boundary recall: both within ").replace(
        "_recall", " words"
    )


def write_predictions(
    path: Path, records: Sequence[SpanRecord], predictions: Sequence[Sequence[PredictedSpan]]
) -> None:
    """Each record's predicted spans, those without a word left out (as predict and the service leave them out;
    the scorer counts them)."""
    write_jsonl(
        path,
        (
            {"id": r.id, "spans": [p.to_dict(r.text) for p in drop_contentless(r.text, preds)[0]]}
            for r, preds in zip(records, predictions)
        ),
    )


def markdown_report(title: str, metrics: dict, extra: dict | None = None) -> str:
    s, ci = metrics["summary"], metrics.get("ci95", {})
    t = metrics["settings"]
    lines = [
        f"# {title}",
        "",
        f"{metrics['counts']['documents']} documents, {metrics['counts']['gold_spans']} gold spans, "
        f"{metrics['counts']['predicted_spans']} predicted. 95% CIs: bootstrap over documents ({t['bootstrap']} "
        f"resamples).",
        "",
        "| metric | value | 95% CI |",
        "|---|---|---|",
    ]
    rows = list(HEADLINE) + [
        (f"boundary_both_within_{k}_recall", f"boundary recall: both within +/-{k} words")
        for k in t["boundary_tolerance_words"]
    ]
    for key, name in rows:
        if key in s:
            lo_hi = ci.get(key)
            interval = f"{lo_hi[0]:.4f} - {lo_hi[1]:.4f}" if lo_hi else ""
            lines.append(f"| {name.format(t=t['jaccard_threshold'])} | {s[key]:.4f} | {interval} |")
    lines += [
        "",
        "## Per label",
        "",
        "| label | support | predicted | P | R | F1 | Jaccard R |",
        "|---|---|---|---|---|---|---|",
    ]
    for lb, v in metrics["per_label"].items():
        lines.append(
            f"| {lb} | {v['support']} | {v['predicted']} | {v['precision']:.3f} | {v['recall']:.3f} | {v['f1']:.3f} | "
            f"{v['jaccard_recall']:.3f} |"
        )
    lines += [
        "",
        "## Recall by gold span length (words)",
        "",
        "| words | gold | recall (exact) | recall (Jaccard) |",
        "|---|---|---|---|",
    ]
    for b in metrics["length_buckets"]:
        lines.append(f"| {b['words']} | {b['gold']} | {b['recall']:.3f} | {b['jaccard_recall']:.3f} |")
    if "ranking" in metrics:
        lines += ranking_lines(metrics["ranking"])
    if "models" in metrics:
        lines += model_lines(metrics["models"])
    if "errors" in metrics:
        lines += error_lines(metrics["errors"])
    if extra:
        lines += ["", "## Run", ""] + [f"- {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def ranking_lines(ranking: dict) -> list[str]:
    """CUAD's ranking metrics (toolkit/evaluate/ranking.py) as a markdown section."""
    ci = ranking.get("ci95", {})

    def cell(scope: str, key: str) -> str:
        value = ranking[scope].get(key)
        if value is None:
            return ""
        interval = ci.get(f"{scope}_{key}")
        return f"{value:.3f}" + (f" ({interval[0]:.3f}-{interval[1]:.3f})" if interval else "")

    lines = [
        "",
        f"## Ranking (CUAD's metrics: spans ranked by score, Jaccard >= {ranking['settings']['jaccard_threshold']})",
        "",
        "| scope | AUPR | P@80R | P@90R |",
        "|---|---|---|---|",
    ]
    for scope in ("macro", "micro"):
        lines.append(
            f"| {scope} | {cell(scope, 'aupr')} | {cell(scope, 'precision_at_80_recall')} | "
            f"{cell(scope, 'precision_at_90_recall')} |"
        )
    lines += ["", "| label | support | proposed | AUPR | P@80R | P@90R | max recall |", "|---|---|---|---|---|---|---|"]
    for lb, v in ranking["per_label"].items():
        lines.append(
            f"| {lb} | {v['support']} | {v['predicted']} | {v['aupr']:.3f} | {v['precision_at_80_recall']:.3f} | "
            f"{v['precision_at_90_recall']:.3f} | {v['max_recall']:.3f} |"
        )
    return lines


def model_lines(models: dict) -> list[str]:
    """A segment run's three models on dev (linear alone, encoder alone, final), each at thresholds chosen on
    training documents, as a markdown section."""

    def cell(figures: dict, key: str) -> str:
        value, interval = figures.get(key), figures.get(f"{key}_ci95")
        if value is None:
            return ""
        return f"{value:.3f}" + (f" ({interval[0]:.3f}-{interval[1]:.3f})" if interval else "")

    lines = [
        "",
        "## Three models on dev (thresholds chosen on training documents)",
        "",
        "| model | Jaccard F1 (95% CI) | P | R | macro AUPR (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for name, figures in models.items():
        lines.append(
            f"| {name} | {cell(figures, 'jaccard_f1')} | {figures['jaccard_precision']:.3f} | "
            f"{figures['jaccard_recall']:.3f} | {cell(figures, 'macro_aupr')} |"
        )
    return lines


def write_metrics(directory: Path, metrics: dict, title: str, extra: dict | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_metrics_file(directory, Metrics(**metrics, **({"run": extra} if extra else {})))
    (directory / REPORT_FILE).write_text(markdown_report(title, metrics, extra), encoding="utf-8")


def score_table(title: str, metrics: dict):
    """The headline dev metrics with their 95% CIs, as a rich table (CLI and demo)."""
    from rich.table import Table

    table = Table("metric", "dev", "95% CI", title=title)
    t = metrics["settings"]["jaccard_threshold"]
    for key, name in HEADLINE:
        if metrics["summary"].get(key) is None:
            continue
        ci = metrics["ci95"].get(key)
        table.add_row(name.format(t=t), f"{metrics['summary'][key]:.4f}", f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "")
    return table


def per_label_table(metrics: dict):
    """Support, predictions, P, R and F1 per label (full label names, folded where long)."""
    from rich.table import Column, Table

    table = Table(
        Column("label", overflow="fold", max_width=36),
        "gold",
        "predicted",
        "precision",
        "recall",
        "F1",
        title="per label (exact spans)",
    )
    for label, m in metrics.get("per_label", {}).items():
        if "support" not in m:  # ranking metrics (segment runs) have their own shape
            continue
        table.add_row(
            label,
            str(m["support"]),
            str(m.get("predicted", "")),
            f"{m['precision']:.3f}",
            f"{m['recall']:.3f}",
            f"{m['f1']:.3f}",
        )
    return table


def error_lines(analysis: dict) -> list[str]:
    """Markdown for report.md."""
    kinds = analysis["kinds"]
    lines = [
        "",
        "## Errors by kind",
        "",
        f"{analysis['exact_matches']} exact matches. Each other prediction or gold span has one kind "
        "(see `toolkit/spans/error_analysis.py`); boundary kinds show how many were off by one word.",
        "",
        "| kind | count | off by 1 word |",
        "|---|---|---|",
    ]
    for k in KINDS:
        v = kinds[k]
        lines.append(f"| {k} | {v['count']} | {v.get('one_word', '')} |")
    for key, title in (
        ("top_false_positives", "Most frequent false positives"),
        ("top_missed", "Most frequently missed"),
        ("top_boundary_words", "Words most often missing or extra at a boundary"),
    ):
        if analysis[key]:
            lines += ["", f"### {title}", "", "| text | count |", "|---|---|"]
            lines += [f"| {t.replace('|', '/')} | {n} |" for t, n in analysis[key]]
    return lines
