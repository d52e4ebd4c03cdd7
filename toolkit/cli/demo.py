"""`toolkit demo`: the main job on the embedded sample."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console


def demo(
    overrides: Annotated[list[str] | None, typer.Argument(help="key=value overrides for the demo recipe.")] = None,
    workdir: Annotated[Path, typer.Option(help="Where the demo writes its outputs.")] = Path("runs/demo"),
) -> None:
    """The main job on the embedded sample: check the data, round-trip it through every format, train demo_mlm and score
    it."""
    from toolkit.demo import run_demo

    raise typer.Exit(run_demo(workdir, console, overrides or []))
