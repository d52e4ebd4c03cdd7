"""`toolkit tune`: choose a saved segment model's thresholds again."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console


def tune(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="A finished segment_classification run directory.")],
    data: Annotated[
        str | None, typer.Option(help="Labeled documents to choose the thresholds on (default: the run's dev file).")
    ] = None,
) -> None:
    """Choose a segment run's per-label thresholds again (saved with its model) and rescore it."""
    from toolkit.tasks import flow_for
    from toolkit.tasks.segment_scoring import retune

    recipe, result = retune(run_path, data)
    console.print("thresholds: " + ", ".join(f"{label} {t}" for label, t in result.metrics["thresholds"].items()))
    console.print(flow_for(recipe).summary(recipe, result))
