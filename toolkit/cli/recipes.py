"""`toolkit recipes`: the packaged recipes, listed or copied to edit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from toolkit.cli.common import console
from toolkit.errors import ToolkitError

app = typer.Typer(
    help="The recipes shipped with the package: list them, or copy one to edit.", invoke_without_command=True
)


@app.callback()
def recipes_(ctx: typer.Context) -> None:
    """List the packaged recipes, one line each (`toolkit run NAME` runs one)."""
    if ctx.invoked_subcommand is not None:
        return
    from toolkit.recipes import describe_recipe, packaged_recipes

    table = Table("recipe", "what it trains", box=None, pad_edge=False)
    for name, path in packaged_recipes().items():
        table.add_row(name, describe_recipe(path))
    console.print(table)
    console.print("Run one with `toolkit run NAME`; copy one to edit with `toolkit recipes cp NAME DEST`.")


@app.command("cp")
def recipes_cp(
    name: Annotated[str, typer.Argument(help="A packaged recipe's name.")],
    dest: Annotated[Path, typer.Argument(help="File or directory to copy it to.")],
) -> None:
    """Copy a packaged recipe to edit it, then `toolkit run DEST`."""
    import shutil

    from toolkit.recipes import packaged_recipe

    source = packaged_recipe(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists():
        raise ToolkitError(f"{target} already exists", fix="choose another destination, or remove it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    console.print(f"copied {source.stem} to {target}")
