"""`toolkit schema`: the span record's JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console


def schema(
    write: Annotated[Path | None, typer.Option(help="Write the JSON Schema files into this directory.")] = None,
) -> None:
    """Print (or write) the JSON Schema of the span record."""
    from toolkit.data.schema import json_schemas, write_json_schemas

    if write:
        for path in write_json_schemas(write):
            console.print(f"wrote {path}")
        return
    print(json.dumps(json_schemas(), indent=2, ensure_ascii=False))
