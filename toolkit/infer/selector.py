"""Candidate windows for span_generation: a cheap classifier decides which windows the decoder reads.

Generating over every window of a long contract costs minutes on a CPU, and most windows hold no
clause. The selector is TF-IDF + logistic regression (scikit-learn) over window text, fitted on the
training windows in seconds: positive when a window holds any part of a span. Its threshold is the
highest one that keeps `recall` of the positive training windows under 3-fold cross-validation, so it
is set without touching dev. Whatever it skips is lost to the decoder: the run reports the dev spans
it cost (`selector` in metrics.json), so the CLM's figures stay honest.

Stored with joblib (a pickle), like the linear baseline: load only models you trained yourself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SELECTOR_FILE = "selector.joblib"


def _pipeline(seed: int):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, lowercase=True),
        LogisticRegression(class_weight="balanced", max_iter=2000, random_state=seed),
    )


def recall_threshold(scores: Sequence[float], positive: Sequence[bool], recall: float) -> float:
    """The highest threshold at which `scores >= threshold` keeps at least `recall` of the positives."""
    pos = sorted((s for s, p in zip(scores, positive) if p), reverse=True)
    if not pos:
        return 0.0
    return float(pos[max(0, math.ceil(recall * len(pos)) - 1)])


@dataclass
class SelectorFit:
    pipeline: object | None  # None: too few windows of a kind to fit; every window is kept
    threshold: float
    cross_validated_flags: list[bool]  # per training window, from the folds that did not see it
    report: dict

    @property
    def selector(self) -> WindowSelector | None:
        """The fitted selector, or None when there was too little to fit (every window is read)."""
        return WindowSelector(self.pipeline, self.threshold) if self.pipeline is not None else None


def fit_window_selector(texts: Sequence[str], positive: Sequence[bool], recall: float, seed: int) -> SelectorFit:
    """Fit the selector on training windows and set its threshold by cross-validation (no dev data)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    n_pos = sum(positive)
    n_neg = len(positive) - n_pos
    folds = min(3, n_pos, n_neg)
    if folds < 2:
        report = {
            "kind": "linear",
            "fitted": False,
            "reason": f"{n_pos} windows with spans and {n_neg} without: too few to fit; every window is kept",
        }
        return SelectorFit(None, 0.0, [True] * len(texts), report)
    y = np.asarray(positive, dtype=int)
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    scores = cross_val_predict(_pipeline(seed), list(texts), y, cv=cv, method="predict_proba")[:, 1]
    threshold = recall_threshold(scores.tolist(), positive, recall)
    flags = (scores >= threshold).tolist()
    pipeline = _pipeline(seed).fit(list(texts), y)
    report = {
        "kind": "linear",
        "fitted": True,
        "threshold": round(threshold, 6),
        "target_recall": recall,
        "train_windows": len(texts),
        "train_windows_with_spans": n_pos,
        # Cross-validated on training windows: the share of windows with spans kept, and of all windows kept.
        "train_cv_window_recall": round(sum(f for f, p in zip(flags, positive) if p) / n_pos, 4),
        "train_cv_windows_kept": round(sum(flags) / len(flags), 4),
    }
    return SelectorFit(pipeline, threshold, flags, report)


class WindowSelector:
    """A fitted selector: which windows the decoder reads."""

    def __init__(self, pipeline, threshold: float):
        self.pipeline = pipeline
        self.threshold = threshold

    @classmethod
    def load(cls, model_dir: Path, info: dict | None) -> WindowSelector | None:
        """The fitted selector a model saved (its report: toolkit.json "selector"); None when it has none."""
        import joblib

        if not (info and info["fitted"]):
            return None
        return cls(joblib.load(Path(model_dir) / SELECTOR_FILE), float(info["threshold"]))

    def save(self, model_dir: Path) -> None:
        import joblib

        joblib.dump(self.pipeline, Path(model_dir) / SELECTOR_FILE)

    def flags(self, texts: Sequence[str]) -> list[bool]:
        if not texts:
            return []
        return (self.pipeline.predict_proba(list(texts))[:, 1] >= self.threshold).tolist()


def spans_reachable(
    windows: Sequence, kept: Sequence[bool], spans_per_doc: Sequence[Sequence], whole: bool
) -> tuple[int, int]:
    """(spans a kept window can produce, all spans): with `whole`, a kept window must hold the span whole
    (text and anchors); otherwise it must hold some of it (segments, where windows add up)."""
    reach = 0
    total = 0
    by_doc: dict[int, list] = {}
    for w, k in zip(windows, kept):
        if k:
            by_doc.setdefault(w.doc, []).append(w)
    for doc, spans in enumerate(spans_per_doc):
        for s in spans:
            total += 1
            inside = by_doc.get(doc, [])
            if any(
                (w.start <= s.start and s.end <= w.end) if whole else (w.start < s.end and s.start < w.end)
                for w in inside
            ):
                reach += 1
    return reach, total
