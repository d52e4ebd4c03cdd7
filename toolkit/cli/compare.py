"""`toolkit compare`: runs side by side on the same documents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console
from toolkit.errors import ToolkitError
from toolkit.scoring_defaults import SCORING


def compare_(
    systems: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_OR_RECIPE...", help="Run directories or recipes (trained first when their run is missing)."
        ),
    ],
    data: Annotated[
        str | None, typer.Option(help="Span JSONL every system is scored on (or sample:NAME); not with --curves.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("runs/compare"),
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples for CIs and the paired test (0: none).")
    ] = SCORING.bootstrap,
    jaccard_threshold: Annotated[
        float | None,
        typer.Option(help="Word Jaccard for a match (default: the runs' eval.jaccard_threshold).", min=0.01, max=1.0),
    ] = None,
    tolerance: Annotated[
        list[int] | None, typer.Option(help="k for boundary recall within +/-k words (repeatable).")
    ] = None,
    max_docs: Annotated[
        int | None, typer.Option(help="Score the first N documents only (CLM generation is slow on CPU).")
    ] = None,
    reuse_predictions: Annotated[
        bool, typer.Option(help="Use a run's saved dev predictions when they cover these documents (no new inference).")
    ] = False,
    curves: Annotated[
        bool,
        typer.Option(
            help=(
                "Compare the runs' learning curves (recall at each checkpoint against training seconds; runs trained "
                "with eval.curve_docs)."
            )
        ),
    ] = False,
) -> None:
    """Compare systems (e.g. MLM vs CLM) on the same documents with the one scorer."""
    from toolkit.evaluate.compare import compare, terminal_table
    from toolkit.tasks import ensure_run

    if curves:
        from toolkit.evaluate.curve_comparison import compare_curves, curves_table

        summary = compare_curves([Path(s) for s in systems], out, tolerance or [3])
        console.print(curves_table(summary, tolerance or [3]))
        console.print(f"wrote {out}/curves.md, curves.json, curves.png")
        return
    if data is None:
        raise ToolkitError(
            "toolkit compare needs --data (the documents every system is scored on)",
            fix="add --data FILE, or --curves to compare learning curves",
        )

    # Recipes are trained first when their run is missing.
    tolerances = tolerance or list(SCORING.boundary_tolerance)
    summary = compare(
        [ensure_run(s) for s in systems],
        data,
        out,
        bootstrap,
        tolerances,
        max_docs=max_docs,
        reuse=reuse_predictions,
        jaccard_threshold=jaccard_threshold,
    )
    console.print(f"compare on {data}")
    console.print(terminal_table(summary, tolerances))
    for pair, metrics in summary["paired_bootstrap"].items():
        v = metrics["jaccard_f1"]
        ci = f", 95% CI {v['ci95'][0]:+.4f} to {v['ci95'][1]:+.4f}, p = {v['p_value']:.3f}" if v["ci95"] else ""
        console.print(f"{pair}: Jaccard F1 difference {v['difference']:+.4f}{ci} (paired bootstrap over documents)")
    console.print(f"wrote {out}/compare.md, compare.csv, compare.json, recall_by_length.png, pr_curve.png")
