"""The service's settings, typed both ways: `toolkit serve` (and the demo, tests and benchmarks) builds them and
hands them to the service's worker processes as TOOLKIT_* variables (`to_env`); the service module reads them
back (`from_env`). Each setting's default is written once, here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from toolkit.deploy.batcher import MAX_BATCH_DOCS


class ServeSettings(BaseModel):
    """The service's settings, each read from TOOLKIT_<NAME> (`toolkit serve` flags set some of them)."""

    artifact: Path = Field(description="The directory `toolkit export` wrote (a bento carries it in ./artifact).")
    max_batch_size: int = Field(
        default=MAX_BATCH_DOCS, ge=1, description="Documents per model call (1 turns batching off)."
    )
    max_queue_seconds: float = Field(
        default=30.0,
        gt=0,
        description="The admission bound, in seconds of work at the export's measured throughput; beyond it, 503.",
    )
    max_queue_chars: int | None = Field(
        default=None, ge=1, description="The same bound in characters (overrides max_queue_seconds)."
    )
    max_body_bytes: int = Field(default=4 * 2**20, ge=1, description="Largest request body (413 beyond it).")
    max_doc_chars: int = Field(default=500_000, ge=1, description="Longest document.")
    max_texts: int = Field(default=64, ge=1, description="Documents per request.")
    model_batch: int = Field(default=16, ge=1, description="Windows per forward pass.")
    # None: the runtime's default (every core), which served more documents a second under load than one
    # thread; on a machine where another process keeps a core busy, fewer threads avoid OpenMP waiting on it.
    model_threads: int | None = Field(
        default=None, ge=1, description="The model's intra-op threads (default: every core / workers)."
    )
    workers: int = Field(
        default=1, ge=1, description="Worker processes, each with its own model and batcher (`--workers`)."
    )
    api_key: str | None = Field(
        default=None, description="When set, requests need X-API-Key or Authorization: Bearer (constant-time check)."
    )
    open_metrics: bool = Field(
        default=False,
        description="With an API key set, answer /metrics without it too (for a scraper that cannot send the key).",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A request body not whole this many seconds after its headers gets 408, and its connection closes.",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServeSettings:
        """The settings in `env` (default: this process's environment), each TOOLKIT_<NAME>."""
        env = os.environ if env is None else env
        # A bento carries its artifact in ./artifact (toolkit.deploy.bento).
        from toolkit.rundir import MANIFEST  # here, not above: `toolkit` reads these settings' defaults at start-up

        artifact = env.get("TOOLKIT_ARTIFACT") or ("artifact" if (Path("artifact") / MANIFEST).is_file() else None)
        if not artifact:
            raise RuntimeError(
                "TOOLKIT_ARTIFACT is not set: point it at a directory made by `toolkit export` (or use `toolkit serve "
                "DIR`)"
            )
        values: dict[str, Any] = {"artifact": artifact, "api_key": env.get("TOOLKIT_API_KEY") or None}
        # Every other setting is TOOLKIT_<NAME>; pydantic turns the strings into numbers (and refuses bad ones).
        for name in cls.model_fields.keys() - values.keys():
            if env.get(f"TOOLKIT_{name.upper()}"):
                values[name] = env[f"TOOLKIT_{name.upper()}"]
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The TOOLKIT_<NAME> variables `from_env` reads back as these settings: how `toolkit serve` hands its typed
        settings to the service's worker processes. Only the settings given are written, so one left at its
        default can still come from the environment the service starts in."""
        env = {}
        for name, value in self.model_dump(exclude_unset=True).items():
            if value is None:
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            env[f"TOOLKIT_{name.upper()}"] = str(Path(value).resolve()) if name == "artifact" else text
        return env
