"""A stack that shrinks a useless encoder by itself: what `combination.py` fits per label. No torch, no I/O
(scikit-learn fits).

Per label, over out-of-fold training segments (every segment scored by models that did not train on its
document):
- `fit_stack`: a penalized logistic regression over the linear and encoder scores, each standardized so the
  penalty weighs what they say rather than their scales, its penalty chosen by cross-validation grouped by
  document (segments of one document are not independent);
- `encoder_gain`: whether the encoder adds to the linear model, as a one-sided test at 5%: the stack's
  out-of-fold log-loss against the linear score recalibrated alone, per document, with a bootstrap over
  documents shifted to the null of no gain. Unlike a likelihood-ratio bound on a held-out slice, it reads every
  training document, and it refits nothing on the documents it scores.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# Penalties the grouped cross-validation chooses among (C, the inverse strength): from a stack squeezed near
# the base rate to one that barely shrinks.
PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
FOLDS = 5
SIGNIFICANCE = 0.05
RESAMPLES = 2000


@dataclass(frozen=True)
class Stack:
    """sigmoid(coef . (scores - mean) / scale + intercept) over the (linear, encoder) scores of a segment."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    penalty: float  # the C the grouped cross-validation chose

    def logits(self, *scores: np.ndarray) -> np.ndarray:
        x = (_features(*scores) - np.asarray(self.mean)) / np.asarray(self.scale)
        return x @ np.asarray(self.coef) + self.intercept

    @property
    def raw_weights(self) -> tuple[float, ...]:
        """The same model over the unstandardized scores: one weight per score, then the bias."""
        weights = np.asarray(self.coef) / np.asarray(self.scale)
        return (*weights.tolist(), float(self.intercept - weights @ np.asarray(self.mean)))


def _features(*scores: np.ndarray) -> np.ndarray:
    return np.column_stack([np.asarray(s, dtype=float) for s in scores])


def _folds(documents: np.ndarray, y: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Document-grouped folds, each training part holding both classes (a fold that cannot fit is left out)."""
    from sklearn.model_selection import GroupKFold

    k = min(folds, len(np.unique(documents)))
    splits = GroupKFold(n_splits=k).split(np.zeros(len(y)), y, documents) if k >= 2 else []
    return [(tr, te) for tr, te in splits if len(np.unique(y[tr])) == 2]


def fit_stack(
    y: np.ndarray, documents: np.ndarray, *scores: np.ndarray, folds: int = FOLDS, seed: int = 0
) -> Stack | None:
    """The penalized logistic regression over the standardized `scores` (linear first, then the encoder's), its
    penalty chosen among PENALTIES by log-loss under document-grouped folds. None when `y` holds one class."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

    y, documents = np.asarray(y, dtype=int), np.asarray(documents)
    if len(np.unique(y)) < 2:
        return None
    x = _features(*scores)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    splits = _folds(documents, y, folds)
    if splits:
        with warnings.catch_warnings():  # scikit-learn 1.9 announces 1.10's changes of defaults we do not use
            warnings.simplefilter("ignore", FutureWarning)
            fit = LogisticRegressionCV(
                Cs=list(PENALTIES), cv=splits, scoring="neg_log_loss", max_iter=1000, random_state=seed
            ).fit(z, y)
        penalty = float(np.atleast_1d(fit.C_)[0])
    else:  # too few documents to cross-validate: the middle penalty
        penalty = 1.0
        fit = LogisticRegression(C=penalty, max_iter=1000, random_state=seed).fit(z, y)
    return Stack(
        tuple(mean.tolist()), tuple(scale.tolist()), tuple(fit.coef_[0].tolist()), float(fit.intercept_[0]), penalty
    )


def out_of_fold_logits(
    y: np.ndarray, documents: np.ndarray, *scores: np.ndarray, folds: int = FOLDS, seed: int = 0
) -> np.ndarray:
    """Each segment's stacked logit from a stack fitted (penalty chosen inside) on the other folds' documents;
    NaN where a fold could not be fitted."""
    y, documents = np.asarray(y, dtype=int), np.asarray(documents)
    out = np.full(len(y), np.nan)
    for train, test in _folds(documents, y, folds):
        stack = fit_stack(y[train], documents[train], *(np.asarray(s)[train] for s in scores), folds=folds, seed=seed)
        out[test] = stack.logits(*(np.asarray(s)[test] for s in scores))
    return out


def _log_loss_per_segment(y: np.ndarray, logits: np.ndarray) -> np.ndarray:
    # log(1 + e^-z) for positives, log(1 + e^z) for negatives, computed stably
    signed = np.where(y == 1, -logits, logits)
    return np.logaddexp(0.0, signed)


def encoder_gain(
    y: np.ndarray,
    documents: np.ndarray,
    linear: np.ndarray,
    encoder: np.ndarray,
    folds: int = FOLDS,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict:
    """Whether the encoder's score adds to the linear score for one label (`gain_test` of the out-of-fold logits
    of the linear score recalibrated alone and of the stack)."""
    y, documents = np.asarray(y, dtype=int), np.asarray(documents)
    alone = out_of_fold_logits(y, documents, linear, folds=folds, seed=seed)
    both = out_of_fold_logits(y, documents, linear, encoder, folds=folds, seed=seed)
    return gain_test(y, documents, alone, both, resamples, seed)


def gain_test(
    y: np.ndarray, documents: np.ndarray, alone: np.ndarray, both: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> dict:
    """The out-of-fold log-loss per segment of `alone` less that of `both` (positive: the encoder helps), and its
    one-sided p-value from a bootstrap over documents shifted to no gain. `keep` is p < SIGNIFICANCE."""
    y, documents = np.asarray(y, dtype=int), np.asarray(documents)
    scored = np.isfinite(alone) & np.isfinite(both)
    if not scored.any() or len(np.unique(y[scored])) < 2:
        return {"gain": 0.0, "p_value": 1.0, "keep": False, "documents": 0, "positives": int(y.sum())}
    difference = _log_loss_per_segment(y[scored], alone[scored]) - _log_loss_per_segment(y[scored], both[scored])
    names, index = np.unique(documents[scored], return_inverse=True)
    totals = np.bincount(index, weights=difference, minlength=len(names))
    sizes = np.bincount(index, minlength=len(names)).astype(float)
    gain = float(totals.sum() / sizes.sum())
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names)))
    resampled = totals[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    # Shifted to the null (no gain): how often a resample's gain exceeds the observed one by at least the gain.
    p_value = float((1 + np.sum(resampled - gain >= gain)) / (resamples + 1))
    return {
        "gain": round(gain, 6),
        "p_value": round(p_value, 4),
        "keep": p_value < SIGNIFICANCE and gain > 0,
        "documents": len(names),
        "positives": int(y[scored].sum()),
    }
