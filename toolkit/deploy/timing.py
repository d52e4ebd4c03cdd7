"""How fast an export path runs on this machine: each path one document at a time, in turns (the figure
`--precision auto` chooses by), the chosen artifact's batched throughput (the service sizes its admission queue
from it), and windows sized to each document measured against the trained windows."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from toolkit.deploy.parity import span_f1


def throughput(predictor, texts: list[str]) -> dict:
    """The artifact's batched speed on the parity documents (after a warm-up pass over them): the service
    sizes its admission queue from chars_per_second."""
    predictor.predict(texts)  # warm-up: every input shape seen once, as in a running service
    started = time.perf_counter()
    predictor.predict(texts)
    seconds = time.perf_counter() - started
    chars = sum(len(t) for t in texts)
    return {
        "documents": len(texts),
        "characters": chars,
        "seconds": round(seconds, 3),
        "docs_per_second": round(len(texts) / seconds, 2),
        "chars_per_second": round(chars / seconds, 1),
    }


# Documents a path reads in a row when the paths are timed in turn (see single_document_speeds).
SPEED_BLOCK = 8


def single_document_speeds(predictors: dict, texts: list[str]) -> dict[str, dict]:
    """Each path's documents per second, sent one at a time (as one client sees a running service).

    After a warm-up pass of every path over the documents (a runtime that prepares kernels per input shape,
    OpenVINO, is timed in its steady state, not on its first sight of each shape), the paths take turns: each
    reads a block of SPEED_BLOCK documents, in an order shuffled per block, so a host whose speed drifts during
    the export slows every path alike. Timed one path after another, a drift made onnx_fused outrun OpenVINO in
    one `make demo`; turns of one document each slowed ONNX Runtime and PyTorch beside the other runtimes'
    threads (issue 30)."""
    for predictor in predictors.values():
        for text in texts:
            predictor.predict([text])
    order, rng = list(predictors), random.Random(0)
    seconds = dict.fromkeys(order, 0.0)
    for lo in range(0, len(texts), SPEED_BLOCK):
        rng.shuffle(order)
        for name in order:
            started = time.perf_counter()
            for text in texts[lo : lo + SPEED_BLOCK]:
                predictors[name].predict([text])
            seconds[name] += time.perf_counter() - started
    return {
        name: {"speed_documents": len(texts), "docs_per_second": round(len(texts) / seconds[name], 2)}
        for name in predictors
    }


@dataclass
class _AtWindowLimit:
    """A tagger read at one window limit (None: the trained windows), so that `single_document_speeds` can time
    limits of one tagger in turns: the limit is set before each call."""

    tagger: object
    limit: int | None

    def predict(self, texts: list[str]) -> list:
        self.tagger.window_limit = self.limit
        return self.tagger.predict(texts)


def window_limits(trained: int, position_limit: int) -> list[int]:
    """Pure: the window limits to measure for windows sized to each document, largest first: the model's
    positions (a document that fits is read in one pass), and halfway from the trained length, where fewer
    positions lie beyond what fine-tuning saw. Empty when the model has no positions beyond the trained length."""
    if position_limit <= trained:
        return []
    return sorted({position_limit, trained + (position_limit - trained) // 2} - {trained}, reverse=True)


def fitted_windows(predictor, records, timed: list[str], reference_f1: float, trained_f1: float, budgets) -> dict:
    """A tagger read with windows sized to each document (`window_limits`) instead of the trained windows:
    each limit's span F1 on the parity documents and single-document speed. The fastest limit is kept that is
    faster than the trained windows, costs at most max_window_f1_drop against their span F1 (`trained_f1`) and
    keeps the path within max_f1_drop of the reference. The context a window sees differs from training, so
    parity is measured, never assumed. The trained windows are timed again in turns with the limits, so a
    drifting host slows them alike."""
    texts = [r.text for r in records]
    trained = predictor.window_limit
    limits = window_limits(predictor.meta.max_length, predictor.position_limit())
    f1s, speeds = {}, {}
    try:
        for limit in limits:
            predictor.window_limit = limit
            f1s[limit] = span_f1(records, predictor.predict(texts))
        if limits:
            views = {limit: _AtWindowLimit(predictor, limit) for limit in (trained, *limits)}
            speeds = {limit: s["docs_per_second"] for limit, s in single_document_speeds(views, timed).items()}
    finally:
        predictor.window_limit = trained
    trained_speed = speeds.get(trained)
    measured = []
    for limit in limits:
        f1, speed = f1s[limit], speeds[limit]
        problems = [
            f"span F1 drop {drop:.4f} > {budget} ({against})"
            for drop, budget, against in (
                (trained_f1 - f1, budgets.max_window_f1_drop, "against the trained windows"),
                (reference_f1 - f1, budgets.max_f1_drop, "against PyTorch fp32"),
            )
            if drop > budget
        ]
        if not problems and speed <= trained_speed:
            problems.append(f"not faster ({speed} vs {trained_speed} docs/s)")
        measured.append({"window_limit": limit, "span_f1": f1, "docs_per_second": speed, "problems": problems})
    passing = [m for m in measured if not m["problems"]]
    best = max(passing, key=lambda m: m["docs_per_second"], default=None)
    return {
        "kept": best is not None,
        "window_limit": best["window_limit"] if best else None,
        "trained_docs_per_second": trained_speed,
        "why": "the fastest limit within the F1 budgets and faster than the trained windows"
        if best
        else "; ".join(f"{m['window_limit']}: {', '.join(m['problems'])}" for m in measured)
        or "the model has no positions beyond its trained windows",
        "measured": measured,
    }
