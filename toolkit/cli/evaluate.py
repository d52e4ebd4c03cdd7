"""`toolkit eval`: score a run or artifact on labeled documents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console
from toolkit.scoring_defaults import SCORING


def eval_(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="Run directory made by `toolkit run`.")],
    data: Annotated[str, typer.Option(help="Span JSONL to score on (or sample:NAME).")],
    out: Annotated[Path | None, typer.Option(help="Output directory (default RUN/eval/<data name>).")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for 95% CIs (0: none).")] = SCORING.bootstrap,
    jaccard_threshold: Annotated[
        float | None,
        typer.Option(help="Word Jaccard for a match (default: the run's eval.jaccard_threshold).", min=0.01, max=1.0),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the headline metrics as one JSON line instead of tables.")
    ] = False,
) -> None:
    """Score a trained run on any span file with the toolkit's one scorer."""
    from toolkit.evaluate.evaluation import evaluate_run, summary_line
    from toolkit.evaluate.reporting import per_label_table, score_table

    metrics, where = evaluate_run(run_path, data, out, bootstrap, jaccard_threshold=jaccard_threshold)
    if as_json:
        print(summary_line(metrics))
        return
    console.print(score_table(f"{run_path.name} on {data}", metrics))
    console.print(per_label_table(metrics))
    console.print(f"wrote {where}/metrics.json, report.md, predictions.jsonl")
