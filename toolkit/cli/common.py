"""What every command shares: its consoles, and reading span files and conversion logs."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def span_files(refs: list[str]) -> list[Path]:
    """Paths as given, and sample:NAME as the embedded sample's file (a missing one is an error with the names)."""
    from toolkit.data.records import SAMPLE_PREFIX, resolve_data_path

    return [resolve_data_path(r) if r.startswith(SAMPLE_PREFIX) else Path(r) for r in refs]


def print_log(log, out: Path | None, as_json: bool) -> None:
    summary = log.summary()
    if as_json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    console.print(
        f"{summary['format']}: {summary['documents']} documents, {summary['spans']} spans written"
        + (f" to {out}" if out else "")
        + f"; left out: {summary['documents_dropped']} documents, {summary['spans_dropped']} spans."
    )
    for what, n in summary["ignored"].items():
        console.print(f"Not imported (outside the span model): {n} {what}")
    by_kind = summary["problems"]["by_kind"]
    if by_kind:
        table = Table("kind", "count", "first example", title="Reported")
        for kind, n in by_kind.items():
            first = next(p for p in log.problems if p.kind == kind)
            table.add_row(kind, str(n), escape(first.render()[:160]))
        console.print(table)
