"""`toolkit choose-thresholds`: choose a saved segment model's per-label thresholds again (`toolkit tune`, its
old name, still runs it and says the new one)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console, err_console

RunPath = Annotated[Path, typer.Argument(metavar="RUN", help="A finished segment_classification run directory.")]
Data = Annotated[
    str | None, typer.Option(help="Labeled documents to choose the thresholds on (default: the run's dev file).")
]


def choose_thresholds(run_path: RunPath, data: Data = None) -> None:
    """Choose a segment run's per-label thresholds again (saved with its model) and rescore it."""
    from toolkit.tasks import flow_for
    from toolkit.tasks.segments.thresholding import choose_thresholds_again

    recipe, result = choose_thresholds_again(run_path, data)
    console.print("thresholds: " + ", ".join(f"{label} {t}" for label, t in result.metrics["thresholds"].items()))
    console.print(flow_for(recipe).summary(recipe, result))


def tune(run_path: RunPath, data: Data = None) -> None:
    """Old name of `toolkit choose-thresholds` (it tunes no hyperparameter): runs it."""
    err_console.print("`toolkit tune` is now `toolkit choose-thresholds`; running that.")
    choose_thresholds(run_path, data)
