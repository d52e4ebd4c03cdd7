"""One stack over every label: the linear score recalibrated per label, and the encoder's score at a weight
pooled across labels, each label's departure from it shrunk toward 0. What `combination.py` fits. No torch, no
I/O (scikit-learn fits).

Over out-of-fold training segments (every segment scored by models that did not train on its document), a
label l's stacked logit is

    a_l + b_l * linear_l + (w + d_l) * encoder_l

over its standardized scores (standardized per label, so the penalty weighs what they say rather than their
scales). The per-label bias and slope a_l, b_l and the pooled weight w are left nearly free; the departures d_l
are shrunk toward 0 by a penalty chosen by document-grouped cross-validation over every label's segments
together (segments of one document are not independent). A label with few clauses so borrows the weight the
others show, and one with many can still depart from it.

- `fit_pooled_stack`: that fit;
- `out_of_fold_pooled`: each segment's stacked logit (and the linear score's recalibrated alone) from fits on
  the other folds' documents, the penalty chosen inside each (nested), which the tests read;
- `gain_test`: whether the encoder adds, as a one-sided test at 5%: out-of-fold log-loss of the linear score
  alone against the stack's, per document, with a bootstrap over documents shifted to the null of no gain.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# How strongly each label's departure from the pooled encoder weight is shrunk: C, the inverse strength of an
# L2 penalty on the departures (scikit-learn's C * summed log-loss + |coef|^2 / 2), from departures held at 0
# (one weight for every label) to departures free (a stack per label).
PENALTIES = (1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0)
# scikit-learn's LogisticRegression penalizes every coefficient alike. The columns that must stay (nearly)
# unpenalized, the per-label bias and slope and the pooled weight, are multiplied by FREE: their penalty falls
# by FREE^2 (10^4), which leaves them unshrunk at every C above, while the departures keep the chosen penalty.
FREE = 100.0
FOLDS = 5
INNER_FOLDS = 3
SIGNIFICANCE = 0.05
RESAMPLES = 2000


@dataclass(frozen=True)
class PooledStack:
    """The fitted stack over standardized scores, per label (indexed as the rows' `label`)."""

    mean: np.ndarray  # [labels, 2]: the linear and encoder scores' means
    scale: np.ndarray  # [labels, 2]: their standard deviations
    bias: np.ndarray  # [labels]
    slope: np.ndarray  # [labels]: the linear score's weight
    weight: float  # w: the encoder's pooled weight
    departures: np.ndarray  # [labels]: d_l
    penalty: float  # the C the grouped cross-validation chose for the departures

    def logits(self, label: np.ndarray, linear: np.ndarray, encoder: np.ndarray) -> np.ndarray:
        x, e = _standardized(self.mean, self.scale, label, linear, encoder)
        return self.bias[label] + self.slope[label] * x + (self.weight + self.departures[label]) * e

    def raw_weights(self, j: int) -> tuple[float, float, float]:
        """Label j's (w_linear, w_encoder, bias) over the unstandardized scores."""
        (m_x, m_e), (s_x, s_e) = self.mean[j], self.scale[j]
        w_x, w_e = self.slope[j] / s_x, (self.weight + self.departures[j]) / s_e
        return float(w_x), float(w_e), float(self.bias[j] - w_x * m_x - w_e * m_e)


def grouped_folds(documents: np.ndarray, y: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Document-grouped folds, each training part holding both classes (a fold that cannot fit is left out)."""
    from sklearn.model_selection import GroupKFold

    k = min(folds, len(np.unique(documents)))
    splits = GroupKFold(n_splits=k).split(np.zeros(len(y)), y, documents) if k >= 2 else []
    return [(tr, te) for tr, te in splits if len(np.unique(y[tr])) == 2]


def _standardized(mean, scale, label, linear, encoder) -> tuple[np.ndarray, np.ndarray]:
    return (linear - mean[label, 0]) / scale[label, 0], (encoder - mean[label, 1]) / scale[label, 1]


def _moments(labels: int, label: np.ndarray, linear: np.ndarray, encoder: np.ndarray):
    mean, scale = np.zeros((labels, 2)), np.ones((labels, 2))
    for j in range(labels):
        rows = label == j
        if rows.any():
            both = np.column_stack([linear[rows], encoder[rows]])
            mean[j], spread = both.mean(axis=0), both.std(axis=0)
            scale[j] = np.where(spread > 0, spread, 1.0)
    return mean, scale


def _design(labels: int, label: np.ndarray, x: np.ndarray, e: np.ndarray | None):
    """Sparse columns: per-label bias and slope, then (with the encoder) the pooled weight and the departures."""
    from scipy.sparse import csr_matrix

    n, rows = len(label), np.arange(len(label))
    cols = [label, labels + label]
    vals = [np.full(n, FREE), FREE * x]
    if e is not None:
        cols += [np.full(n, 2 * labels), 2 * labels + 1 + label]
        vals += [FREE * e, e]
    width = 3 * labels + 1 if e is not None else 2 * labels
    return csr_matrix((np.concatenate(vals), (np.tile(rows, len(cols)), np.concatenate(cols))), shape=(n, width))


def fit_pooled_stack(
    y: np.ndarray,
    documents: np.ndarray,
    label: np.ndarray,
    linear: np.ndarray,
    encoder: np.ndarray | None,
    labels: int,
    folds: int = INNER_FOLDS,
    seed: int = 0,
) -> PooledStack | None:
    """The stack over rows of (segment, label): `label` indexes each row's label; `encoder` None fits the linear
    score recalibrated per label alone. The departures' penalty is chosen among PENALTIES by log-loss under
    document-grouped folds. None when `y` holds one class."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

    y, label = np.asarray(y, dtype=int), np.asarray(label)
    if len(np.unique(y)) < 2:
        return None
    linear = np.asarray(linear, dtype=float)
    e_raw = np.zeros(len(y)) if encoder is None else np.asarray(encoder, dtype=float)
    mean, scale = _moments(labels, label, linear, e_raw)
    x, e = _standardized(mean, scale, label, linear, e_raw)
    design = _design(labels, label, x, None if encoder is None else e)
    splits = grouped_folds(np.asarray(documents), y, folds) if encoder is not None else []
    with warnings.catch_warnings():  # scikit-learn 1.9 announces 1.10's changes of defaults we do not use
        warnings.simplefilter("ignore", FutureWarning)
        if splits:
            fit = LogisticRegressionCV(
                Cs=list(PENALTIES),
                cv=splits,
                scoring="neg_log_loss",
                fit_intercept=False,
                max_iter=2000,
                random_state=seed,
            ).fit(design, y)
            penalty = float(np.atleast_1d(fit.C_)[0])
        else:  # the linear score alone (nothing to shrink), or too few documents to cross-validate
            penalty = 1.0
            fit = LogisticRegression(C=penalty, fit_intercept=False, max_iter=2000, random_state=seed).fit(design, y)
    coef = fit.coef_[0]
    pooled = encoder is not None
    return PooledStack(
        mean=mean,
        scale=scale,
        bias=FREE * coef[:labels],
        slope=FREE * coef[labels : 2 * labels],
        weight=float(FREE * coef[2 * labels]) if pooled else 0.0,
        departures=coef[2 * labels + 1 :] if pooled else np.zeros(labels),
        penalty=penalty,
    )


def out_of_fold_pooled(
    y: np.ndarray,
    documents: np.ndarray,
    label: np.ndarray,
    linear: np.ndarray,
    encoder: np.ndarray | None,
    labels: int,
    folds: int = FOLDS,
    seed: int = 0,
) -> np.ndarray:
    """Each row's stacked logit from a stack fitted on the other folds' documents (its departures' penalty
    chosen by grouped folds inside those: nested); NaN where a fold could not be fitted."""
    y, documents, label = np.asarray(y, dtype=int), np.asarray(documents), np.asarray(label)
    linear = np.asarray(linear, dtype=float)
    out = np.full(len(y), np.nan)
    for train, test in grouped_folds(documents, y, folds):
        part = None if encoder is None else np.asarray(encoder)[train]
        stack = fit_pooled_stack(y[train], documents[train], label[train], linear[train], part, labels, seed=seed)
        e_test = np.zeros(len(test)) if encoder is None else np.asarray(encoder)[test]
        out[test] = stack.logits(label[test], linear[test], e_test)
    return out


def _log_loss_per_segment(y: np.ndarray, logits: np.ndarray) -> np.ndarray:
    # log(1 + e^-z) for positives, log(1 + e^z) for negatives, computed stably
    signed = np.where(y == 1, -logits, logits)
    return np.logaddexp(0.0, signed)


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
