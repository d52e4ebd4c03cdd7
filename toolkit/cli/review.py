"""`toolkit review`: a run's errors, for a reader."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console


def review(
    predictions: Annotated[
        Path,
        typer.Argument(
            metavar="PREDICTIONS", help="Span JSONL from `toolkit predict`, or `predictions.jsonl` of a run or eval."
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="The HTML page to write.")],
    gold: Annotated[
        str | None,
        typer.Option(help="Gold span JSONL (or sample:NAME): colour misses, false positives and boundary errors."),
    ] = None,
    map_label: Annotated[
        list[str] | None, typer.Option(help="OLD=NEW for gold labels, repeatable (a run's data.label_map).")
    ] = None,
) -> None:
    """Render documents with highlighted spans as one self-contained HTML page."""
    from toolkit.data.importers import parse_label_map
    from toolkit.evaluate.review import write_review

    summary = write_review(predictions, out, gold, parse_label_map(map_label or []))
    console.print(
        f"wrote {summary['out']} ({summary['documents']} documents){'; ' + summary['note'] if summary['note'] else ''}"
    )
