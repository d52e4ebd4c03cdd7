"""`toolkit export-data`: span JSONL -> another tool's format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import print_log, span_files
from toolkit.errors import ToolkitError


def export_data(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="conll | brat | pubtator | labelstudio | docbin")],
    files: Annotated[list[str], typer.Argument(help="Span JSONL files, or sample:NAME (the embedded sample).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output file (brat: a directory).")],
    scheme: Annotated[str | None, typer.Option(help="conll: iob1 | iob2 | bioes | bilou (default iob2).")] = None,
    spans_key: Annotated[str | None, typer.Option(help="docbin: the doc.spans key (default sc).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write span JSONL in another format; what the format cannot hold is reported."""
    from toolkit.data.importers import run_export, run_import

    records, read_log = run_import("jsonl", span_files(files), None)
    if read_log.documents_dropped or read_log.spans_dropped:
        raise ToolkitError(
            f"{read_log.documents_dropped} records and {read_log.spans_dropped} spans of the input are invalid",
            fix=f"run `toolkit check {' '.join(map(str, files))}` and fix them first",
        )
    log = run_export(fmt, records, out, {"scheme": scheme, "spans_key": spans_key})
    print_log(log, out, as_json)
