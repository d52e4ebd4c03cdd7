"""`toolkit predict`: extract spans from a collection of documents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolkit.cli.common import console, err_console


def predict(
    model: Annotated[
        Path, typer.Argument(metavar="MODEL", help="A run directory (`toolkit run`) or an artifact (`toolkit export`).")
    ],
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT...", help="Span JSONL (spans ignored), .txt, .pdf, .docx files, or folders of them."
        ),
    ],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="Output: span JSONL with the extracted text (or Label Studio JSON).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="spans | labelstudio (tasks with pre-annotations and their scores).")
    ] = "spans",
    batch_size: Annotated[
        int,
        typer.Option(help="Most documents per model call; a call also holds at most about this many windows of text."),
    ] = 16,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Run on Ray Data: local (start Ray here), auto (the cluster this machine is in) or ray://HEAD:10001.",
            metavar="ADDRESS",
        ),
    ] = None,
    ray_actors: Annotated[
        int | None, typer.Option(help="Model actors on Ray (default: as many as the cluster's CPUs allow).")
    ] = None,
    ray_cpus_per_actor: Annotated[int, typer.Option(help="CPUs (and threads) of each model actor on Ray.")] = 1,
) -> None:
    """Extract spans from a collection of documents. Streams to OUT; run it again to resume after a crash."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from toolkit.data.documents import display_name
    from toolkit.infer.collection import predict_collection

    columns = (TextColumn("predict"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("predict", total=None)
        summary = predict_collection(
            model,
            inputs,
            out,
            fmt,
            batch_size,
            ray,
            ray_actors,
            ray_cpus_per_actor,
            progress=lambda n, total: bar.update(task, total=total, advance=n),
        )
    # The summary goes to stdout; each problem with one document goes to stderr as one unwrapped line
    # (a path and its reason stay greppable whatever the terminal's width), so a pipe of stdout holds
    # only the summary and every failure stays visible on the console.
    console.print(
        f"{summary['predicted']} documents predicted in {summary['seconds']} s ({summary['documents_per_second']} "
        f"docs/s, {summary['engine']}); "
        f"{summary['already_done']} already in {display_name(summary['stream'])}; {summary['failed']} failed "
        f"({summary['entries']} entries in the inputs)",
        soft_wrap=True,
    )
    if summary["repaired_torn_line"]:
        err_console.print(
            f"removed a last line cut off mid-write in {summary['stream']} (its document was predicted again)",
            soft_wrap=True,
        )
    for source, pages in summary["pages_without_text"].items():
        err_console.print(
            f"{escape(display_name(source))}: no text layer on page(s) {', '.join(map(str, pages))}; those pages were "
            f"not read (OCR them to include them)",
            soft_wrap=True,
        )
    for failure in summary["failures"]:
        doc = f" [{failure['id']}]" if failure["id"] else ""
        err_console.print(
            f"[red]failed[/red] {escape(display_name(failure['source']))}{escape(display_name(doc))}: "
            f"{escape(display_name(failure['reason']))}. Fix: "
            f"{escape(failure['fix'])}",
            soft_wrap=True,
        )
    if summary["files_skipped"]:
        err_console.print(
            f"skipped {len(summary['files_skipped'])} entries (other types, hidden, or read already), e.g. "
            f"{escape(summary['files_skipped'][0])}",
            soft_wrap=True,
        )
    console.print(
        f"wrote {display_name(str(out))}"
        + (f" (failures: {display_name(summary['failures_file'])})" if summary["failed"] else ""),
        soft_wrap=True,
    )
    raise typer.Exit(1 if summary["failed"] else 0)
