"""`toolkit serve`: an artifact over HTTP with BentoML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.deploy.settings import ServeSettings

DEFAULT = {name: field.default for name, field in ServeSettings.model_fields.items()}  # one default per setting


def serve(
    artifact: Annotated[Path, typer.Argument(metavar="DIR", help="Artifact directory made by `toolkit export`.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 3000,
    max_batch_size: Annotated[
        int, typer.Option(help="Batching: most documents per model call (1 turns batching off).")
    ] = DEFAULT["max_batch_size"],
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
    ] = DEFAULT["model_threads"],
    workers: Annotated[
        int, typer.Option(help="Worker processes, each with its own model and batcher (threads split among them).")
    ] = DEFAULT["workers"],
) -> None:
    """Serve an artifact over HTTP with BentoML (POST /extract, GET /info, /healthz, /metrics). SIGTERM or Ctrl-C stops
    it within seconds."""
    from toolkit.deploy.launch import serve_artifact

    limits = {
        "max_queue_seconds": max_queue_seconds,
        "workers": workers,
        **({"model_threads": model_threads} if model_threads else {}),
    }
    serve_artifact(artifact, host, port, max_batch_size, **limits)
