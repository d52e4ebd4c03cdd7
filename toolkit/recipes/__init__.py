"""The recipes that ship with the package (the repository's `recipes/` links here).

`toolkit recipes` lists them, `toolkit recipes cp NAME DEST` copies one to edit, and `toolkit run NAME`
runs one by name, as torchtune's `tune ls` / `tune cp` / `tune run` do.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from toolkit.errors import ToolkitError

RECIPES_DIR = Path(__file__).resolve().parent


def packaged_recipes() -> dict[str, Path]:
    """Name (file stem) -> path of every packaged recipe."""
    return {p.stem: p for p in sorted(RECIPES_DIR.glob("*.yaml"))}


def describe_recipe(path: Path) -> str:
    """The recipe's one-line summary: its first comment line."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return first.removeprefix("#").strip() if first.startswith("#") else ""


def packaged_recipe(name: str) -> Path:
    """The packaged recipe called `name` (with or without .yaml); an error naming the closest ones."""
    recipes = packaged_recipes()
    stem = name.removesuffix(".yaml").removesuffix(".yml")
    if stem in recipes:
        return recipes[stem]
    close = difflib.get_close_matches(stem, list(recipes), n=3)
    raise ToolkitError(
        f"{name}: no such recipe file, and no packaged recipe of that name",
        fix=(f"did you mean {', '.join(close)}? " if close else "") + "`toolkit recipes` lists the packaged ones",
    )


def resolve_recipe(ref: str | Path) -> Path:
    """A recipe file: `ref` itself when it exists, else the packaged recipe of that name (also as
    recipes/NAME.yaml, the repository path of a packaged recipe)."""
    path = Path(ref)
    if path.is_file():
        return path
    if len(path.parts) > 1 and path.parts[-2] != "recipes":
        raise ToolkitError(
            f"{ref}: no such recipe file",
            fix="check the path, or pass a packaged recipe's name (`toolkit recipes` lists them)",
        )
    return packaged_recipe(path.name)
