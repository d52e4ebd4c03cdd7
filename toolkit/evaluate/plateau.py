"""Pure: the plateau rule, read on learning curves at doubling budgets.

A curve point (a line of curve.jsonl) has `epoch`, `train_seconds`, `metrics` and `ci95` (key -> [low, high]).
The rule: a curve has plateaued when its last doubling of the budget added less to the score than half the
width of the newer point's 95% CI, i.e. less than the noise of reading it on these documents. Used to stop
training (`train.plateau`) and, on any curve, to say whether it had flattened (`scripts/results.py curve`).
"""

from __future__ import annotations


def is_doubling_epoch(epoch: float) -> bool:
    """Whether `epoch` (a whole number of epochs) is 1, 2, 4, 8, ..."""
    n = round(epoch)
    return abs(epoch - n) < 1e-6 and n >= 1 and n & (n - 1) == 0


def doubling_points(points: list[dict]) -> list[dict]:
    """The points at epochs 1, 2, 4, 8, ... (a curve read every epoch, as a segment classifier's), in order."""
    return [p for p in points if is_doubling_epoch(float(p.get("epoch", 0)))]


def last_doubling(points: list[dict], key: str) -> dict | None:
    """The last doubling's gain in `key` and half the CI width of its newer point (None: under two points)."""
    if len(points) < 2:
        return None
    before, after = points[-2], points[-1]
    low, high = after.get("ci95", {}).get(key, (after["metrics"][key], after["metrics"][key]))
    return {
        "from_epoch": before["epoch"],
        "to_epoch": after["epoch"],
        "gain": round(after["metrics"][key] - before["metrics"][key], 4),
        "half_ci_width": round((high - low) / 2, 4),
        "seconds": round(after["train_seconds"] - before["train_seconds"], 1),
    }


def plateau_reached(points: list[dict], key: str, min_epochs: float = 0) -> bool:
    """Whether the last doubling added less than half the newer point's CI width (or nothing: a curve flat at a
    perfect score has no CI width), at `min_epochs` or later. A doubling that starts at zero is the curve
    starting, not flattening: a few documents' CI is wide enough to hide a first rise."""
    step = last_doubling(points, key)
    if step is None or step["to_epoch"] < min_epochs or points[-2]["metrics"][key] <= 0:
        return False
    return step["gain"] < step["half_ci_width"] or step["gain"] <= 0
