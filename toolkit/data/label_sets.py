"""Label sets: parsing the user's `--labels` and suggesting close matches."""

from __future__ import annotations

import difflib
from pathlib import Path

from toolkit.errors import ToolkitError


def parse_label_set(value: str | None) -> frozenset[str] | None:
    """`"A,B,C"` or a path to a file with one label a line -> the label set; None means any label."""
    if value is None or value == "":
        return None
    path = Path(value)
    if path.is_file():
        labels = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
        labels = [lb for lb in labels if lb and not lb.startswith("#")]
        if not labels:
            raise ToolkitError(f"{path}: the label file is empty", fix="write one label a line")
        return frozenset(labels)
    labels = [lb.strip() for lb in value.split(",")]
    if any(not lb for lb in labels):
        raise ToolkitError(
            f"--labels {value!r} has an empty label",
            fix="separate labels with single commas, e.g. --labels Disease,Chemical",
        )
    return frozenset(labels)


def suggest_label(label: str, known: frozenset[str]) -> str:
    """A fix sentence for a label outside the label set."""
    close = difflib.get_close_matches(label, sorted(known), n=2, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? Otherwise add {label!r} to the label set."
    return f"use one of {sorted(known)!r}, or add {label!r} to the label set."
