"""`toolkit compare --curves`: several runs' learning curves against their training budget.

Each run trained with `eval.curve_docs` scored its own checkpoints on the first N dev documents
(toolkit/tasks/learning_curve.py). This puts the curves side by side: a table and a plot of clause-boundary
recall (both ends exact, and within +/-k words) against seconds of training steps, with 95% bootstrap
CIs, each system's inference seconds per document, and every system's figure at the largest budget all
of them reached. The runs must have scored the same documents; otherwise the comparison says nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.rundir import CURVE_FILE, open_run, read_curve


def curve_metrics(tolerances: list[int]) -> list[str]:
    return [
        "boundary_both_recall",
        *(f"boundary_both_within_{k}_recall" for k in tolerances),
        "jaccard_recall",
        "span_precision",
    ]


def at_budget(points: list[dict], seconds: float) -> dict | None:
    """The last point a run had reached by `seconds` of training (its checkpoint then). A step is never cut,
    so a run stopped by a time budget checkpoints up to one step after it: a point whose last step began
    by `seconds` (its seconds less its mean step time) counts as reached."""
    reached = [p for p in points if p["train_seconds"] - p["train_seconds"] / max(1, p["step"]) <= seconds + 1e-6]
    return reached[-1] if reached else None


def _precision(point: dict) -> str:
    """The precision a point's inference ran at ("fp32" for points written before it was recorded)."""
    return "bf16" if point.get("inference_autocast") == "bfloat16" else "fp32"


def summarize_curves(curves: dict[str, dict], tolerances: list[int]) -> dict:
    """Pure: the common budget and each system's point at it. `curves`: name -> {"points", "task", ...}."""
    budget = min(c["points"][-1]["train_seconds"] for c in curves.values())
    keys = curve_metrics(tolerances)
    common = {}
    for name, c in curves.items():
        p = at_budget(c["points"], budget)
        common[name] = (
            None
            if p is None
            else {
                "step": p["step"],
                "train_seconds": p["train_seconds"],
                "inference_seconds_per_document": p["inference_seconds_per_document"],
                "inference_precision": _precision(p),
                **{k: p["metrics"].get(k) for k in keys},
                "ci95": p["ci95"],
            }
        )
    return {"common_budget_seconds": budget, "at_common_budget": common}


def compare_curves(paths: list[Path], out: Path, tolerances: list[int]) -> dict:
    """Read each run's curve.jsonl; write curves.json, curves.md and curves.png to `out`."""
    curves: dict[str, dict] = {}
    for path in paths:
        run = open_run(path)
        points = read_curve(run.path)
        if not points:
            raise ToolkitError(
                f"{run.path}: no {CURVE_FILE}: the run was trained without a learning curve",
                fix="train it with eval.curve_docs=N (e.g. `toolkit run RECIPE eval.curve_docs=10`)",
            )
        name = run.path.name if run.path.name not in curves else str(run.path)
        curves[name] = {
            "run": str(run.path),
            "task": run.task,
            "model": (run.recipe.model.name if run.recipe else None),
            "points": points,
        }
    documents = {(c["points"][0]["documents"], c["points"][0]["gold_spans"]) for c in curves.values()}
    if len(documents) > 1:
        raise ToolkitError(
            "the runs' curves scored different documents: "
            + ", ".join(
                f"{n}: {c['points'][0]['documents']} documents, {c['points'][0]['gold_spans']} spans"
                for n, c in curves.items()
            ),
            fix="train every run on the same dev file and labels with the same eval.curve_docs",
        )
    summary = {"boundary_tolerance_words": tolerances, "systems": curves, **summarize_curves(curves, tolerances)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "curves.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "curves.md").write_text(curves_markdown(summary, tolerances), encoding="utf-8")
    _plot(summary, tolerances, out / "curves.png")
    return summary


def _cell(point: dict, key: str) -> str:
    value = point["metrics"].get(key)
    if value is None:
        return "-"
    ci = point["ci95"].get(key)
    return f"{value:.3f}" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else "")


def curves_table(summary: dict, tolerances: list[int]):
    """Each run's point at the common training budget, runs as columns (for a terminal)."""
    from toolkit.evaluate.reporting import metric_name
    from toolkit.tables import SystemsTable, value_cell

    keys = curve_metrics(tolerances)
    rows = ["train seconds", "step", *map(metric_name, keys), "inference s/doc"]
    systems = {}
    for name, p in summary["at_common_budget"].items():
        if p is None:
            systems[name] = ["no checkpoint yet", *[""] * (len(rows) - 1)]
            continue
        cells = [value_cell(p.get(k), (p.get("ci95") or {}).get(k)) for k in keys]
        speed = f"{p['inference_seconds_per_document']:.2f} ({p['inference_precision']})"
        systems[name] = [f"{p['train_seconds']:.0f}", str(p["step"]), *cells, speed]
    return SystemsTable(f"recall at {summary['common_budget_seconds']:.0f} s of training (95% CIs)", rows, systems)


def curves_markdown(summary: dict, tolerances: list[int]) -> str:
    keys = curve_metrics(tolerances)
    first = next(iter(summary["systems"].values()))["points"][0]
    lines = [
        f"# Learning curves against training time ({first['documents']} dev documents, {first['gold_spans']} gold "
        f"spans)",
        "",
        "Training seconds count training steps only (no evaluations). Values with 95% bootstrap CIs over documents.",
        f"At the largest budget every run reached ({summary['common_budget_seconds']:.0f} s):",
        "",
    ]
    for name, p in summary["at_common_budget"].items():
        lines.append(
            f"- {name}: "
            + (
                "no checkpoint yet"
                if p is None
                else ", ".join(f"{k} {p[k]:.3f}" for k in keys if p.get(k) is not None)
                + f" (step {p['step']}; {p['inference_seconds_per_document']:.2f} s/doc in {p['inference_precision']})"
            )
        )
    for name, c in summary["systems"].items():
        lines += [
            "",
            f"## {name} ({c['task']}, {c['model']})",
            "",
            "| step | train s | " + " | ".join(keys) + " | inference s/doc |",
            "|---" * (len(keys) + 3) + "|",
        ]
        for p in c["points"]:
            lines.append(
                f"| {p['step']} | {p['train_seconds']:.0f} | "
                + " | ".join(_cell(p, k) for k in keys)
                + f" | {p['inference_seconds_per_document']:.2f} ({_precision(p)}) |"
            )
    return "\n".join(lines) + "\n"


def _plot(summary: dict, tolerances: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["boundary_both_recall", *(f"boundary_both_within_{k}_recall" for k in tolerances)]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for name, c in summary["systems"].items():
            pts = [p for p in c["points"] if key in p["metrics"]]
            x = [p["train_seconds"] / 60 for p in pts]
            y = [p["metrics"][key] for p in pts]
            line = ax.plot(
                x,
                y,
                marker="o",
                label=f"{name} ({pts[-1]['inference_seconds_per_document']:.2f} s/doc)" if pts else name,
            )[0]
            lo = [p["ci95"].get(key, [v, v])[0] for p, v in zip(pts, y)]
            hi = [p["ci95"].get(key, [v, v])[1] for p, v in zip(pts, y)]
            ax.fill_between(x, lo, hi, alpha=0.15, color=line.get_color())
        ax.set_xlabel("training minutes (steps only)")
        ax.set_ylabel("recall")
        ax.set_ylim(0, 1.02)
        ax.set_title(
            key.replace("boundary_both_", "both ends ")
            .replace("_recall", "")
            .replace("within_", "within +/-")
            .replace("recall", "exact")
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
