"""`toolkit bento`: a BentoML bento of the service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.common import console


def bento(
    artifact: Annotated[Path, typer.Argument(metavar="DIR", help="Artifact directory made by `toolkit export`.")],
) -> None:
    """Build a BentoML bento of the service with DIR, its Python environment the project's lock (hash-checked, CPU
    torch). `bentoml serve TAG` serves it; `bentoml containerize TAG` makes its image."""
    from toolkit.deploy.bento import build_bento

    tag, path = build_bento(artifact)
    console.print(f"built bento {tag} at {path}", soft_wrap=True)
    console.print(f"serve it: bentoml serve {tag}    image: bentoml containerize {tag}", soft_wrap=True)
