"""`toolkit check`: validate span files and describe them (like `spacy debug data`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from toolkit.cli.common import console, span_files


def check(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Span JSONL files, or sample:NAME (e.g. train.jsonl dev.jsonl: leakage between them is checked)."
        ),
    ],
    labels: Annotated[str | None, typer.Option(help="Allowed labels: 'A,B,C' or a file with one label a line.")] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Fast tokenizer (hub id or path) for token statistics. Default: the default encoder."),
    ] = None,
    no_tokenizer: Annotated[bool, typer.Option("--no-tokenizer", help="Skip token statistics.")] = False,
    max_length: Annotated[
        int | None, typer.Option(help="Model max length in tokens (default: the tokenizer's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (every problem included).")] = False,
    strict: Annotated[bool, typer.Option(help="Exit 1 on warnings too.")] = False,
    max_problems: Annotated[int, typer.Option(help="Problems listed in the text report.")] = 100,
) -> None:
    """Validate span files and describe them. Exit 0 when clean, 1 when problems are found."""
    from toolkit.data.check import render_check, run_check
    from toolkit.data.label_sets import parse_label_set
    from toolkit.models.pretrained import default_encoder, load_tokenizer

    tok = None if no_tokenizer else (tokenizer or default_encoder())
    result = run_check(span_files(files), parse_label_set(labels), tok and load_tokenizer(tok), max_length)
    if as_json:
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
    else:
        render_check(result, console, max_problems)
    raise typer.Exit(result.exit_code(strict))
