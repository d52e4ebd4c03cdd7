"""`toolkit serve`: an artifact over HTTP with BentoML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.deploy.batcher import MAX_BATCH_DOCS
from toolkit.errors import ToolkitError


def serve(
    artifact: Annotated[Path, typer.Argument(metavar="DIR", help="Artifact directory made by `toolkit export`.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 3000,
    max_batch_size: Annotated[
        int, typer.Option(help="Batching: most documents per model call (1 turns batching off).")
    ] = MAX_BATCH_DOCS,
    max_queue_seconds: Annotated[
        float,
        typer.Option(
            help=(
                "Admission bound: work waiting for the model, in seconds at the throughput measured at export; past it "
                "503 + Retry-After."
            )
        ),
    ] = 30.0,
    model_threads: Annotated[
        int | None,
        typer.Option(
            help="The model's intra-op threads (default: every core; fewer where another process keeps cores busy)."
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Worker processes, each with its own model and batcher (threads split among them).")
    ] = 1,
) -> None:
    """Serve an artifact over HTTP with BentoML (POST /extract, GET /info, /healthz, /metrics). SIGTERM or Ctrl-C stops
    it within seconds."""
    from toolkit.deploy.launch import serve_artifact

    if workers < 1:
        raise ToolkitError("--workers must be at least 1", fix="e.g. --workers 2")
    limits = {
        "max_queue_seconds": max_queue_seconds,
        "workers": workers,
        **({"model_threads": model_threads} if model_threads else {}),
    }
    serve_artifact(artifact, host, port, max_batch_size, **limits)
