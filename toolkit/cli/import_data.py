"""`toolkit import`: another tool's annotations -> span JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import print_log


def import_(
    fmt: Annotated[
        str, typer.Argument(metavar="FORMAT", help="conll | brat | pubtator | cuad | labelstudio | docbin | jsonl")
    ],
    sources: Annotated[
        list[Path],
        typer.Argument(help="Source files or directories (cuad: master_clauses.csv then the .txt directory)."),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output span JSONL.")],
    scheme: Annotated[str | None, typer.Option(help="conll: auto | iob1 | iob2 | bioes | bilou.")] = None,
    discontinuous: Annotated[
        str | None, typer.Option(help="brat: report (leave out, listed) | split (one span per fragment).")
    ] = None,
    text_key: Annotated[str | None, typer.Option(help="labelstudio: the task data field holding the text.")] = None,
    spans_key: Annotated[str | None, typer.Option(help="docbin: read only doc.spans[KEY] (and doc.ents).")] = None,
    predictions: Annotated[
        bool,
        typer.Option("--predictions", help="labelstudio: read model predictions (pre-annotations), not annotations."),
    ] = False,
    map_label: Annotated[list[str] | None, typer.Option(help="OLD=NEW, repeatable; OLD= drops the label.")] = None,
    holdout: Annotated[
        list[Path] | None, typer.Option(help="Files of another split: documents also there are left out (leakage).")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the full import report (every problem) as JSON.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit 1 when anything was left out or reported.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Convert annotations to span JSONL. Everything left out is counted and listed."""
    from toolkit.data.importers import parse_label_map, run_import

    options = {
        "scheme": scheme,
        "discontinuous": discontinuous,
        "text_key": text_key,
        "spans_key": spans_key,
        "predictions": predictions,
    }
    _, log = run_import(fmt, sources, out, options, parse_label_map(map_label or []), holdout)
    if report:
        report.write_text(json.dumps(log.summary(), indent=2, ensure_ascii=False), encoding="utf-8")
    print_log(log, out, as_json)
    errors = sum(p.severity == "error" for p in log.problems)
    raise typer.Exit(1 if errors or (strict and log.problems) else 0)
