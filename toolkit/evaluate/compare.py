"""`toolkit compare`: several trained systems on the same documents, one scorer.

Writes compare.md / compare.csv / compare.json with recall at clause boundaries (start, end,
both; exact and within +/-k words), Jaccard recall, precision, F1, recall by span length,
hallucination rate, latency and throughput, 95% CIs, and a paired bootstrap test of every
recall difference; plus recall_by_length.png and, where systems give span scores, pr_curve.png.
"""

from __future__ import annotations

import csv
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.evaluate.scorer import document_counts, paired_bootstrap, point_summary, score
from toolkit.infer import load_predictor, predict_with_report
from toolkit.rundir import Run, open_run, records_for, saved_predictions
from toolkit.scoring_defaults import SCORING
from toolkit.spans.content import drop_contentless
from toolkit.spans.decoding import PredictedSpan

COLUMNS = [
    "span_recall",
    "boundary_start_recall",
    "boundary_end_recall",
    "boundary_both_recall",
    "jaccard_recall",
    "jaccard_precision",
    "jaccard_f1",
    "span_precision",
    "span_f1",
    "hallucination_rate",
]


@dataclass
class System:
    name: str
    path: Path
    task: str
    predictions: list
    unlocated: list
    seconds: float
    tokens_per_second: float | None
    tokens_measure: str


def saved_system(run: Run, ids: list[str]) -> System | None:
    """A run's own dev predictions (predictions.jsonl, hallucinations.jsonl, timing from metrics.json),
    when they cover every requested document; None otherwise."""
    saved_outputs = saved_predictions(run)
    if saved_outputs is None:
        return None
    spans, halluc, info = saved_outputs
    saved = {i: [PredictedSpan(s["start"], s["end"], s["label"], s["score"]) for s in doc] for i, doc in spans.items()}
    if not all(i in saved for i in ids):
        return None
    generates = run.spec.generates
    per_doc = info.get("eval_seconds", 0.0) / max(1, len(saved))
    tps = info.get("generated_tokens_per_second") if generates else None
    return System(
        run.path.name,
        run.path,
        run.task,
        [saved[i] for i in ids],
        [halluc.get(i, []) for i in ids],
        per_doc * len(ids),
        tps,
        "generated tokens/s (saved run)" if generates else "n/a (saved run)",
    )


def run_system(run: Run, texts: list[str]) -> System:
    predictor = load_predictor(run)
    started = time.perf_counter()
    predictions, unlocated, report = predict_with_report(predictor, texts)
    seconds = time.perf_counter() - started
    if run.spec.generates:
        tps, measure = report.get("generated_tokens_per_second"), "generated tokens/s"
    else:
        tps, measure = (
            (round(report["tokens"] / report["seconds"], 1) if report.get("seconds") else None),
            "input tokens/s",
        )
    return System(run.path.name, run.path, run.task, predictions, unlocated, seconds, tps, measure)


def compare(
    paths: list[Path],
    data: str,
    out: Path,
    bootstrap: int = SCORING.bootstrap,
    tolerances: list[int] | None = None,
    seed: int = 0,
    max_docs: int | None = None,
    reuse: bool = False,
    jaccard_threshold: float | None = None,
) -> dict:
    """Score trained runs (or artifacts) on the same documents; writes compare.md/.csv/.json and the plots.
    The Jaccard threshold is the one the runs were scored with (their eval.jaccard_threshold) unless given."""
    tolerances = tolerances or list(SCORING.boundary_tolerance)
    runs = [open_run(p) for p in paths]
    jaccard_threshold = jaccard_threshold or shared_jaccard_threshold(runs)
    labels = sorted(set.intersection(*(set(r.labels) for r in runs)))
    if not labels:
        raise ToolkitError("the systems share no label", fix="compare systems trained on the same labels")
    if any(r.label_map != runs[0].label_map for r in runs[1:]):
        raise ToolkitError(
            "the systems were trained with different data.label_map settings",
            fix="compare systems trained on the same label mapping",
        )
    other: Counter = Counter()
    # Scored on the labels the systems were trained with (their label map), shared labels only.
    records = records_for(runs[0], data, max_docs, labels=labels, other=other)
    texts, golds = [r.text for r in records], [r.spans for r in records]
    systems = []
    for run in runs:
        s = (saved_system(run, [r.id for r in records]) if reuse else None) or run_system(run, texts)
        # Score every system on the shared labels only.
        s.predictions = [[x for x in doc if x.label in labels] for doc in s.predictions]
        s.unlocated = [[lb for lb in doc if lb in labels] for doc in s.unlocated]
        systems.append(s)
    summary = summarize(systems, texts, golds, tolerances, bootstrap, seed, jaccard_threshold)
    summary.update(
        {
            "data": data + (f" (first {max_docs} documents)" if max_docs else ""),
            "documents": len(records),
            "label_map": runs[0].label_map,
            "labels": labels,
            "spans_of_other_labels_ignored": dict(other),
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    _write_table(summary, tolerances, out)
    _plot_length(summary, out / "recall_by_length.png")
    _plot_pr(texts, golds, dict(zip(summary["systems"], systems)), out / "pr_curve.png")
    return summary


def shared_jaccard_threshold(runs: list[Run]) -> float:
    """The eval.jaccard_threshold the runs were scored with (the default for runs without a recipe)."""
    recorded = {r.jaccard_threshold for r in runs}
    if len(recorded) > 1:
        raise ToolkitError(
            f"the systems were scored at different Jaccard thresholds ({sorted(recorded)})",
            fix="pass --jaccard-threshold to score them all at one",
        )
    return recorded.pop()


def summarize(
    systems: list[System],
    texts: list[str],
    golds: list,
    tolerances: list[int],
    bootstrap: int = SCORING.bootstrap,
    seed: int = 0,
    jaccard_threshold: float = SCORING.jaccard_threshold,
) -> dict:
    """Scores of every system (the one scorer) and the paired bootstrap of every pair (the observed
    differences alone with bootstrap 0). Pure."""
    names = _unique_names([s.name for s in systems])
    results, counts = {}, {}
    for name, s in zip(names, systems):
        m = score(texts, golds, s.predictions, tolerances, jaccard_threshold, bootstrap, seed, s.unlocated)
        m["timing"] = {
            "seconds": round(s.seconds, 2),
            "seconds_per_document": round(s.seconds / max(1, len(texts)), 3),
            "tokens_per_second": s.tokens_per_second,
            "tokens_measure": s.tokens_measure,
        }
        m["task"] = s.task
        m["run"] = str(s.path)
        results[name] = m
        # The scorer leaves out spans without a word; the paired test counts what it scored.
        scored = [drop_contentless(t, p)[0] for t, p in zip(texts, s.predictions)]
        counts[name] = document_counts(texts, golds, scored, tolerances, jaccard_threshold, s.unlocated)
    paired = {
        f"{a} - {b}": paired_bootstrap(counts[a], counts[b], tolerances, bootstrap, seed)
        for a, b in itertools.combinations(names, 2)
    }
    return {"boundary_tolerance_words": tolerances, "systems": results, "paired_bootstrap": paired}


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def table_rows(summary: dict, tolerances: list[int]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the side-by-side table; values straight from each system's scorer output."""
    cols = COLUMNS[:4] + [f"boundary_both_within_{k}_recall" for k in tolerances] + COLUMNS[4:]
    header = ["system", "task", *cols, "seconds/doc", "tokens/s"]
    rows = []
    for name, m in summary["systems"].items():
        s, ci = m["summary"], m["ci95"]
        cells = [name, m["task"]]
        for c in cols:
            cells.append(f"{s[c]:.4f}" + (f" ({ci[c][0]:.3f}-{ci[c][1]:.3f})" if c in ci else ""))
        cells += [
            f"{m['timing']['seconds_per_document']:.3f}",
            f"{m['timing']['tokens_per_second']} ({m['timing']['tokens_measure']})",
        ]
        rows.append(cells)
    return header, rows


def terminal_table(summary: dict, tolerances: list[int], metrics: list[str] | None = None):
    """The comparison for a terminal: metrics as rows, systems as columns, each value over its 95% CI on
    a second line (a wide systems x metrics table was cut to 5-character columns at 80 columns)."""
    from toolkit.evaluate.reporting import metric_name
    from toolkit.tables import SystemsTable, value_cell

    keys = metrics or (COLUMNS[:4] + [f"boundary_both_within_{k}_recall" for k in tolerances] + COLUMNS[4:])
    rows = [metric_name(k) for k in keys]
    systems = {}
    for name, m in summary["systems"].items():
        cells = [value_cell(m["summary"].get(key), m["ci95"].get(key)) for key in keys]
        systems[name] = [*cells, m["task"], f"{m['timing']['seconds_per_document']:.3f}"]
    return SystemsTable("compare (95% CIs)", [*rows, "task", "seconds per document"], systems)


def _write_table(summary: dict, tolerances: list[int], out: Path) -> None:
    header, rows = table_rows(summary, tolerances)
    with (out / "compare.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    lines = [
        f"# Compare on {summary['data']} ({summary['documents']} documents; labels: {', '.join(summary['labels'])})",
        "",
        "Values with 95% bootstrap CIs over documents. Boundary recall: a gold span whose start/end (or both) a "
        "same-label",
        "prediction matches, exactly or within +/-k words. Hallucinated (unlocatable) generated spans count as false "
        "positives.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += [
        "",
        "## Paired bootstrap (same resampled documents)",
        "",
        "| pair | metric | difference | 95% CI | p |",
        "|---|---|---|---|---|",
    ]
    for pair, metrics in summary["paired_bootstrap"].items():
        for key, v in metrics.items():
            if key.endswith(("recall", "f1")):
                ci = f"{v['ci95'][0]:+.3f} to {v['ci95'][1]:+.3f}" if v["ci95"] else "n/a (--bootstrap 0)"
                p = f"{v['p_value']:.3f}" if v["p_value"] is not None else "n/a"
                lines.append(f"| {pair} | {key} | {v['difference']:+.4f} | {ci} | {p} |")
    lines += ["", "## Recall by gold span length (words)", ""]
    for name, m in summary["systems"].items():
        lines.append(
            f"- {name}: " + ", ".join(f"{b['words']}: {b['recall']:.2f} (n={b['gold']})" for b in m["length_buckets"])
        )
    (out / "compare.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _plot_length(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, m in summary["systems"].items():
        b = m["length_buckets"]
        ax.plot([x["words"] for x in b], [x["recall"] for x in b], marker="o", label=f"{name} (exact)")
        ax.plot(
            [x["words"] for x in b],
            [x["jaccard_recall"] for x in b],
            marker="x",
            linestyle="--",
            label=f"{name} (Jaccard)",
        )
    ax.set_xlabel("gold span length (words)")
    ax.set_ylabel("recall")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("Recall by span length")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_pr(texts, golds, systems: dict[str, System], path: Path) -> None:
    """Precision-recall from thresholding span scores (systems whose spans all score 1.0 give one point)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, s in systems.items():
        scores = sorted({round(x.score, 3) for doc in s.predictions for x in doc})
        points = []
        for t in scores if len(scores) <= 50 else list(np.quantile(scores, np.linspace(0, 1, 50))):
            kept = [[x for x in doc if x.score >= t] for doc in s.predictions]
            m = point_summary(texts, golds, kept, unlocated=s.unlocated)
            points.append((m["span_recall"], m["span_precision"]))
        if points:
            ax.plot(*zip(*points), marker=".", label=name)
    ax.set_xlabel("recall (exact)")
    ax.set_ylabel("precision (exact)")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
