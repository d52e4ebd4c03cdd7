"""Learning-curve and comparison records for the results page (issue 62: MLM vs CLM on clause boundaries).

- A curve record is one run read at its plateau: its whole-dev boundary recall (both ends within +/-3 words as
  the headline; exact both ends, start, end, Jaccard recall and Jaccard F1 beside it, with CIs), its learning
  curve on the curve documents, whether the plateau rule or the budget ended it (with the last doubling's
  slope), its training seconds to the plateau and its inference seconds per document.
- A compare record is one pair of systems from `toolkit compare`: the paired-bootstrap difference of each
  recall on the same documents, its CI and p-value.

`scripts/results.py curve|compare` write them; `render_section` and `render_curves` turn them into the page's
table and plot. Everything but the two readers is pure.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.evaluate.plateau import doubling_points, is_doubling_epoch, last_doubling, plateau_reached
from toolkit.rundir import read_curve

HEADLINE = "boundary_both_within_3_recall"
HEADLINE_NAME = "both ends within ±3 words"
# The recalls shown beside the headline, and Jaccard F1.
SHOWN = {
    "boundary_both_recall": "both ends exact",
    "boundary_start_recall": "start",
    "boundary_end_recall": "end",
    "jaccard_recall": "Jaccard recall",
    "jaccard_f1": "Jaccard F1",
}
# What a compare record can lead with (`results.py compare --metric`), its name on the page, and the figures
# shown beside it: boundary recall for clause systems, span F1 for entity taggers (a distilled student against
# the tagger it should beat).
PAIR_METRICS = {
    HEADLINE: (HEADLINE_NAME, SHOWN),
    "span_f1": ("span F1", {"span_precision": "P", "span_recall": "R"}),
}
# The practitioners' claim under test (the mission's, not measured here): on legal clause boundaries an MLM tagger
# reached recall 0.65 and an auto-regressive fine-tune 0.78. The headline compare record's a and b are set beside it.
CLAIM = (0.65, 0.78)
# bench/boundary_curves.sh's rule (train.plateau.min_epochs), applied to curves read every epoch as well.
PLATEAU_MIN_EPOCHS = 4


def summarize_curve(points: list[dict], run: dict, key: str = HEADLINE) -> dict:
    """What a record keeps of a run's curve: its points, where the plateau rule first held on the doubling
    points, the last doubling's slope, and what ended training. Pure."""
    # A run whose last point lies between doublings ended by its budget (runs made before the rule read doubling
    # points only have stopped_at_plateau set by that point as well).
    at_doubling = bool(points) and is_doubling_epoch(float(points[-1]["epoch"]))
    if run.get("stopped_at_plateau") and (at_doubling or not run.get("stopped_by_time_budget")):
        ended_by = "plateau rule"
    elif run.get("stopped_by_time_budget"):
        ended_by = "time budget"
    else:
        ended_by = (run.get("encoder_training") or {}).get("ended_by") or "epoch cap"
    if not points:  # a linear model fitted in one pass, or a segment encoder read on held-out training documents
        return {"metric": key, "points": [], "ended_by": ended_by if run.get("encoder_training") else "one pass"}
    doubling = doubling_points(points)
    plateau = next(
        (doubling[i] for i in range(1, len(doubling)) if plateau_reached(doubling[: i + 1], key, PLATEAU_MIN_EPOCHS)),
        None,
    )
    return {
        "metric": key,
        "documents": points[-1]["documents"],
        "points": [
            {
                "epoch": p["epoch"],
                "train_seconds": p["train_seconds"],
                "value": p["metrics"][key],
                "ci95": p.get("ci95", {}).get(key),
            }
            for p in points
        ],
        "plateau_epoch": plateau["epoch"] if plateau else None,
        "seconds_to_plateau": plateau["train_seconds"] if plateau else None,
        "last_doubling": last_doubling(doubling, key),
        "ended_by": ended_by,
        "epochs": run.get("epochs_completed"),
    }


def curve_fields(run_dir: Path) -> dict:
    """The fields of a curve record, from a finished run's metrics.json and curve.jsonl (nothing re-scored)."""
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    points = read_curve(run_dir)
    summary, ci, run = metrics["summary"], metrics.get("ci95", {}), metrics["run"]
    documents = metrics["counts"]["documents"]
    seconds = run.get("eval_seconds")
    return {
        "metric": HEADLINE_NAME,
        "value": summary[HEADLINE],
        "ci95": tuple(ci[HEADLINE]) if ci.get(HEADLINE) else None,
        "others": {name: summary[k] for k, name in SHOWN.items() if summary.get(k) is not None},
        "others_ci95": {name: tuple(ci[k]) for k, name in SHOWN.items() if ci.get(k)},
        "documents": documents,
        # A cross-fitted encoder's folds are part of what it cost to train.
        "train_seconds": (run.get("train_step_seconds") or run.get("train_seconds") or 0)
        + ((run.get("cross_fitting") or {}).get("seconds") or 0),
        "inference_seconds": seconds,
        "curve": summarize_curve(points, run),
    }


def compare_fields(compare: dict, a: str, b: str, metric: str = HEADLINE) -> dict:
    """The fields of a compare record: system a minus system b on the same documents, led by `metric` (a key
    of PAIR_METRICS). Pure."""
    pair = compare["paired_bootstrap"].get(f"{a} - {b}")
    reverse = compare["paired_bootstrap"].get(f"{b} - {a}")
    if pair is None and reverse is not None:  # compare tests each pair once, in the order the runs were given
        pair = {
            k: {
                "difference": -v["difference"],
                "ci95": [-v["ci95"][1], -v["ci95"][0]] if v["ci95"] else None,
                "p_value": v["p_value"],
            }
            for k, v in reverse.items()
        }
    if pair is None:
        raise SystemExit(f"compare.json has no pair {a!r} - {b!r}: its pairs are {sorted(compare['paired_bootstrap'])}")
    if metric not in PAIR_METRICS:
        raise SystemExit(f"--metric {metric!r}: one of {sorted(PAIR_METRICS)}")
    name, shown = PAIR_METRICS[metric]
    head = pair[metric]
    timing = {system: compare["systems"][system]["timing"]["seconds_per_document"] for system in (a, b)}
    return {
        "metric": f"{name}: difference",
        "value": head["difference"],
        "ci95": tuple(head["ci95"]) if head["ci95"] else None,
        "others": {"p": head["p_value"], **{shown[k]: pair[k]["difference"] for k in shown if k in pair}},
        "documents": compare["documents"],
        "paired": {
            "a": a,
            "b": b,
            "headline": metric,
            "metrics": {k: pair[k] for k in (metric, *shown) if k in pair},
            "seconds_per_document": timing,
        },
    }


def _p(p: float) -> str:
    """A bootstrap p-value: 0 of the resamples on the other side reads as under 0.001 (1000 resamples), not 0."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _ci(ci) -> str:
    if not ci:
        return ""
    # A negative bound reads badly after a hyphen ("-0.031--0.003"): signed bounds and "to".
    return f" ({ci[0]:+.3f} to {ci[1]:+.3f})" if min(ci) < 0 else f" ({ci[0]:.3f}-{ci[1]:.3f})"


def seconds_text(s: float | None) -> str:
    """Seconds as the page shows them: whole seconds under 10 minutes, minutes above. Pure."""
    if s is None:
        return ""
    return f"{s:.0f} s" if s < 600 else f"{s / 60:.0f} min"


def _curve_cell(c: dict) -> str:
    if not c["points"]:
        return f"no dev curve; ended by {c['ended_by']}"
    cell = f"{c['epochs']:g} epochs, ended by {c['ended_by']}" if c.get("epochs") else f"ended by {c['ended_by']}"
    step = c.get("last_doubling")
    if step:
        cell += (
            f"; last doubling (epoch {step['from_epoch']:g} to {step['to_epoch']:g}) {step['gain']:+.3f}, "
            f"half CI {step['half_ci_width']:.3f}"
        )
    return cell


def _plateau_cell(c: dict) -> str:
    if not c["points"]:
        return "n/a"
    if c.get("plateau_epoch") is None:
        return "not reached"
    return f"epoch {c['plateau_epoch']:g}, after {seconds_text(c['seconds_to_plateau'])} of training"


def _differences(paired: dict, keys: tuple[str, ...]) -> str:
    return " / ".join(
        f"{paired[k]['difference']:+.3f} ({_p(paired[k]['p_value'])})"
        for k in keys
        if k in paired and paired[k]["p_value"] is not None
    )


def render_section(rows: list) -> list[str]:
    """A curve table's page lines: per system its whole-dev recalls at the plateau and its cost, how its curve
    ended; then every paired difference. `rows` are Records (curve or paired set). Pure."""
    systems = [r for r in rows if r.curve is not None]
    pairs = [r for r in rows if r.paired is not None]
    lines = []
    if systems:
        documents = sorted({r.curve["documents"] for r in systems if r.curve.get("documents")})
        lines += [
            f"Whole dev set ({systems[0].documents} documents) scored once per system, by the model it ended with; "
            f"the curve is read on the first {', '.join(map(str, documents))} of them at epochs 1, 2, 4, 8, .... "
            f"Plateau: the first doubling, ending at epoch {PLATEAU_MIN_EPOCHS} or later, that added less to "
            f"{HEADLINE_NAME} recall than half the width of its newer point's 95% CI.",
            "",
            "| system | both ends ±3 words (95% CI) | both ends exact / start / end | Jaccard recall | "
            "Jaccard F1 (95% CI) | training; inference |",
            "|---|---|---|---|---|---|",
        ]
        for i, r in enumerate(systems, start=1):
            o, ci = r.others, r.others_ci95 or {}
            ends = " / ".join(f"{o[n]:.3f}" for n in ("both ends exact", "start", "end") if n in o)
            jf1 = f"{o['Jaccard F1']:.3f}{_ci(ci.get('Jaccard F1'))}" if "Jaccard F1" in o else ""
            per_doc = f"; {r.inference_seconds / r.documents:.2f} s/doc" if r.inference_seconds and r.documents else ""
            lines.append(
                f"| {i}. {r.system} | {r.value:.3f}{_ci(r.ci95)} | {ends} | {o.get('Jaccard recall', 0):.3f} | {jf1} "
                f"| {seconds_text(r.train_seconds)}{per_doc} |"
            )
        lines += ["", "Curves:", ""]
        lines += [
            f"{i}. {r.system}: {_curve_cell(r.curve)}; plateau: {_plateau_cell(r.curve)}."
            for i, r in enumerate(systems, start=1)
        ]
        lines.append("")
    return lines + render_pairs(pairs)


# A pair table per headline metric: its column title, and the columns of differences beside it (title, keys).
PAIR_TABLES = {
    "span_f1": ("span F1", (("P / R (p)", ("span_precision", "span_recall")),)),
    HEADLINE: (
        "both ends ±3 words",
        (
            (
                "both ends exact / start / end (p)",
                ("boundary_both_recall", "boundary_start_recall", "boundary_end_recall"),
            ),
            ("Jaccard recall (p)", ("jaccard_recall",)),
        ),
    ),
}


def render_pairs(pairs: list) -> list[str]:
    """The page lines of a table's compare records: one table per headline metric (PAIR_TABLES). Pure."""
    lines: list[str] = []
    for metric, (title, columns) in PAIR_TABLES.items():
        rows = [r for r in pairs if r.paired.get("headline", HEADLINE) == metric]
        if not rows:
            continue
        lines += [
            "Paired differences on the same documents (bootstrap over documents; p two-sided):",
            "",
            f"| difference | {title} (95% CI) | p | {' | '.join(c for c, _ in columns)} | s/doc |",
            "|" + "---|" * (len(columns) + 4),
        ]
        for r in rows:
            timing = r.paired["seconds_per_document"]
            differences = " | ".join(_differences(r.paired["metrics"], keys) for _, keys in columns)
            per_doc = " vs ".join(f"{timing[n]:.2f}" for n in (r.paired["a"], r.paired["b"]))
            lines.append(
                f"| {r.system} | {r.value:+.3f}{_ci(r.ci95)} | {_p(r.others['p'])} | {differences} | {per_doc} |"
            )
        lines.append("")
    return lines


# The plot: boundary recall on the curve documents against training seconds (log scale: the budgets double), one
# line per system, its 95% CIs as whiskers. SVG text, so the same records give the same bytes everywhere.
WIDTH, HEIGHT, LEFT, TOP, PLOT_W, PLOT_H = 720, 360, 60, 20, 460, 280
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def escape(text: str) -> str:
    """Text for SVG markup. Pure."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render_curves(title: str, rows: list) -> str:
    """The curves plot of a curve table. Pure."""
    import math

    systems = [r for r in rows if r.curve and r.curve["points"]]
    seconds = [p["train_seconds"] for r in systems for p in r.curve["points"] if p["train_seconds"] > 0]
    low = math.floor(math.log2(min(seconds))) if seconds else 0
    high = math.ceil(math.log2(max(seconds))) if seconds else 1
    high = max(high, low + 1)

    def x(s: float) -> float:
        return round(LEFT + (math.log2(max(s, 2.0**low)) - low) / (high - low) * PLOT_W, 1)

    def y(v: float) -> float:
        return round(TOP + (1 - v) * PLOT_H, 1)

    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>',
        f'<text x="{LEFT + PLOT_W / 2}" y="{HEIGHT - 8}" text-anchor="middle">training seconds (log scale)</text>',
        f'<text x="14" y="{TOP + PLOT_H / 2}" transform="rotate(-90 14 {TOP + PLOT_H / 2})" text-anchor="middle">'
        f"{escape(HEADLINE_NAME)} recall</text>",
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{LEFT - 6}" y="{y(v) + 4}" text-anchor="end">{v:g}</text>')
    for e in range(low, high + 1):
        parts.append(f'<text x="{x(2.0**e)}" y="{TOP + PLOT_H + 16}" text-anchor="middle">{2**e:g}</text>')
    for i, r in enumerate(systems):
        colour = COLOURS[i % len(COLOURS)]
        pts = r.curve["points"]
        path = " ".join(f"{x(p['train_seconds'])},{y(p['value'])}" for p in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for p in pts:
            if p.get("ci95"):
                px = x(p["train_seconds"])
                parts.append(f'<path d="M{px} {y(p["ci95"][0])}V{y(p["ci95"][1])}" stroke="{colour}" opacity="0.5"/>')
        ly = TOP + 14 + 18 * i
        parts.append(f'<rect x="{LEFT + PLOT_W + 12}" y="{ly - 9}" width="12" height="4" fill="{colour}"/>')
        name = r.system if len(r.system) <= 28 else r.system[:27] + "…"
        parts.append(f'<text x="{LEFT + PLOT_W + 30}" y="{ly}">{escape(name)}</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'font-family="sans-serif" font-size="12" role="img"><title>{escape(title)}</title>'
        + "".join(parts)
        + "</svg>\n"
    )


def answer_sentence(rows: list) -> str | None:
    """The one-sentence answer of a curve table: its headline compare record (the MLM tagger against the CLM
    generator), with both systems' recall at their plateaus and their cost. Pure; None without one."""
    pair = next((r for r in rows if r.paired is not None and r.headline), None)
    if pair is None:
        return None
    by_name = {r.run_name: r for r in rows if r.curve is not None and r.run_name}
    a, b = pair.paired["a"], pair.paired["b"]
    ra, rb = by_name.get(a), by_name.get(b)
    if ra is None or rb is None:
        return None
    winner, loser = (ra, rb) if pair.value > 0 else (rb, ra)
    low, high = pair.ci95 if pair.value > 0 else (-pair.ci95[1], -pair.ci95[0])  # winner minus loser
    timing = pair.paired["seconds_per_document"]
    if pair.others["p"] < 0.05:
        head = f"{winner.system} finds more clauses' both ends within ±3 words than {loser.system}"
    else:
        head = f"{winner.system} is not told apart from {loser.system} on both ends within ±3 words"
    unfinished = " ".join(
        f"{r.system} had not reached its plateau: its {r.curve['ended_by']} ended it while its last doubling still "
        f"added {r.curve['last_doubling']['gain']:+.3f} (half a CI: {r.curve['last_doubling']['half_ci_width']:.3f})."
        for r in (ra, rb)
        if r.curve["points"] and r.curve["ended_by"] != "plateau rule" and r.curve.get("last_doubling")
    )
    return (
        f"{head}: {winner.value:.3f} against {loser.value:.3f} ({abs(pair.value):.3f} apart, 95% CI "
        f"{low:+.3f} to {high:+.3f}, paired bootstrap p {_p(pair.others['p'])}, {pair.documents} "
        f"dev documents), at {seconds_text(ra.train_seconds)} of training and "
        f"{timing[a]:.2f} s per document for {ra.system} against {seconds_text(rb.train_seconds)} and "
        f"{timing[b]:.2f} s for {rb.system}. "
        + (unfinished + " " if unfinished else "")
        + f"The claim (an MLM tagger's clause-boundary recall {CLAIM[0]:.2f}, an auto-regressive fine-tune's "
        f"{CLAIM[1]:.2f}) reads here as {ra.value:.3f} for {ra.system} and {rb.value:.3f} for {rb.system}."
    )
