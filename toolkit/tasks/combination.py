"""segments.combination: fitted. How much of the encoder to trust, per label, decided on training documents
the encoder did not train on. No torch, no I/O (scikit-learn's logistic regression does the fit).

The final score of a label is sigmoid(w_linear * linear logit + w_encoder * encoder logit + bias), fitted by
a logistic regression over the held-out documents' segments, with its threshold the best Jaccard F1 on
them. Whether the encoder earns its place is judged the way the figures are reported: the weights and the
threshold fitted on one half of the held-out documents and scored on the other (and back), against the
linear model alone with its threshold chosen the same way; and the encoder's logit must explain the held-out
segments better than the linear logit alone (a likelihood-ratio test). A label where the combination does
not beat the linear model there, where the test fails or the encoder weight is not positive, or with too
few held-out clauses to tell, is the linear model alone at its out-of-fold threshold: the
`--linear-baseline` decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.evaluate.ranking import sweep_metrics
from toolkit.evaluate.thresholds import THRESHOLD_GRID, choose_from_counts, threshold_counts
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import combine_logits, sigmoid

# Fewer held-out clauses of a label than this cannot show a gain beyond one clause's noise: linear alone.
MIN_HELD_OUT_CLAUSES = 5
LINEAR_ONLY = (1.0, 0.0, 0.0)
# The encoder must explain the held-out segments better than the linear logit recalibrated: a likelihood-ratio
# statistic above chi-squared(1)'s 0.001 point. A held-out F1 gain alone is not enough: on a few documents a
# recalibrated linear logit with a noise feature beside it wins half the time by the threshold grid's luck.
ENCODER_EVIDENCE = 10.83


@dataclass(frozen=True)
class HeldOutEvidence:
    """Training documents the encoder did not train on, as both parts see them: per document its segments,
    their [segments x labels] targets, the encoder's own logits and the linear model's out-of-fold logits
    (and its clause-start probabilities, when the model splits runs)."""

    texts: list[str]
    golds: list[list[SpanLike]]
    segments: list[list[tuple[int, int]]]
    targets: list[np.ndarray]
    encoder: list[np.ndarray]
    linear: list[np.ndarray]
    starts: list[np.ndarray] | None = None


@dataclass(frozen=True)
class Combination:
    """Per label (w_linear, w_encoder, bias) and threshold, and what each part did on the held-out documents."""

    weights: list[list[float]]
    thresholds: list[float]
    report: dict[str, dict]

    @property
    def linear_only(self) -> list[str]:
        """The labels where fine-tuning did not help on the held-out documents."""
        return [label for label, r in self.report.items() if r["uses"] == "linear"]

    def note(self) -> str:
        """One plain sentence for the run's record and the console."""
        alone = self.linear_only
        if not alone:
            return "the encoder raised held-out Jaccard F1 for every label: each uses the fitted combination"
        if len(alone) == len(self.report):
            return (
                "fine-tuning did not help on the held-out training documents for any label: the model is the linear "
                "baseline (see run.combination for each part's held-out figures)"
            )
        return (
            f"fine-tuning did not help on the held-out training documents for {alone}: those labels use the linear "
            "model alone (see run.combination)"
        )


def _label_column(arrays: Sequence[np.ndarray], j: int) -> list[np.ndarray]:
    return [np.asarray(a, dtype=float)[:, j : j + 1] for a in arrays]


def _fit_weights(linear: np.ndarray, encoder: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, float, float]:
    """A logistic regression over (linear, encoder) logits of the segments given; LINEAR_ONLY when they hold
    one class only (nothing to fit)."""
    from sklearn.linear_model import LogisticRegression

    keep = np.isfinite(encoder) & np.isfinite(linear)
    if len(set(y[keep].tolist())) < 2:
        return LINEAR_ONLY
    fit = LogisticRegression(C=1.0, max_iter=1000, random_state=seed).fit(np.c_[linear[keep], encoder[keep]], y[keep])
    return float(fit.coef_[0, 0]), float(fit.coef_[0, 1]), float(fit.intercept_[0])


def encoder_evidence(linear: np.ndarray, encoder: np.ndarray, y: np.ndarray, seed: int = 0) -> float:
    """The likelihood-ratio statistic of the encoder's logit over the segments given: twice the log-likelihood
    a logistic regression on (linear, encoder) gains over one on the linear logit alone. Chi-squared with one
    degree of freedom if the encoder adds nothing (segments of one document are not independent, so it is
    read against a strict bound, ENCODER_EVIDENCE)."""
    from sklearn.linear_model import LogisticRegression

    keep = np.isfinite(encoder) & np.isfinite(linear)
    y = y[keep]
    if len(set(y.tolist())) < 2:
        return 0.0

    def log_likelihood(features: np.ndarray) -> float:
        fit = LogisticRegression(C=1e4, max_iter=1000, random_state=seed).fit(features, y)
        p = np.clip(fit.predict_proba(features)[:, 1], 1e-12, 1 - 1e-12)
        return float(np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)))

    return max(0.0, 2 * (log_likelihood(np.c_[linear[keep], encoder[keep]]) - log_likelihood(linear[keep, None])))


def _stack(columns: Sequence[np.ndarray], documents: Sequence[int]) -> np.ndarray:
    return np.concatenate([columns[i][:, 0] for i in documents]) if documents else np.zeros(0)


def _f1(counts: np.ndarray) -> float:
    tp, predicted, gold = counts
    return float(2 * tp / (predicted + gold)) if predicted + gold else 0.0


@dataclass(frozen=True)
class _Label:
    """One label's columns of the evidence: what every fit and sweep of it reads."""

    evidence: HeldOutEvidence
    label: str
    targets: list[np.ndarray]
    encoder: list[np.ndarray]
    linear: list[np.ndarray]
    starts: list[np.ndarray] | None
    jaccard_threshold: float

    def probabilities(self, weights: Sequence[float]) -> list[np.ndarray]:
        return [sigmoid(combine_logits(e, li, [weights])) for e, li in zip(self.encoder, self.linear)]

    def counts(self, probabilities: list[np.ndarray]) -> np.ndarray:
        """[thresholds, documents, 3] of (matched, predicted, gold) over the grid."""
        e = self.evidence
        return threshold_counts(
            e.texts,
            e.golds,
            e.segments,
            probabilities,
            [self.label],
            jaccard_threshold=self.jaccard_threshold,
            starts=self.starts,
        )[0]

    def fit(self, documents: Sequence[int], seed: int) -> tuple[float, float, float]:
        return _fit_weights(
            _stack(self.linear, documents), _stack(self.encoder, documents), _stack(self.targets, documents), seed
        )

    def cross_fitted_f1(self, seed: int, fixed_counts: np.ndarray | None = None) -> float:
        """Jaccard F1 over all documents, each half scored at the weights and threshold fitted on the other
        half; or, given the counts of fixed weights (the linear model alone, swept once), at the threshold
        only. Halves by even and odd position."""
        n = len(self.evidence.texts)
        halves = [list(range(0, n, 2)), list(range(1, n, 2))]
        total = np.zeros(3)
        for scored, fitting in ((halves[0], halves[1]), (halves[1], halves[0])):
            if not scored:
                continue
            counts = (
                fixed_counts if fixed_counts is not None else self.counts(self.probabilities(self.fit(fitting, seed)))
            )
            threshold = choose_from_counts(counts[None, :, fitting])[0]
            total += counts[THRESHOLD_GRID.index(threshold), scored].sum(axis=0)
        return _f1(total)


def fit_combination(
    evidence: HeldOutEvidence,
    labels: Sequence[str],
    linear_thresholds: Sequence[float],
    jaccard_threshold: float,
    seed: int = 0,
    min_clauses: int = MIN_HELD_OUT_CLAUSES,
) -> Combination:
    """Per label, the fitted combination where the encoder beats the linear model on the held-out documents
    (cross-fitted Jaccard F1), else the linear model alone at `linear_thresholds` (chosen out of fold)."""
    weights: list[list[float]] = []
    thresholds: list[float] = []
    report: dict[str, dict] = {}
    everything = list(range(len(evidence.texts)))
    for j, label in enumerate(labels):
        part = _Label(
            evidence,
            label,
            _label_column(evidence.targets, j),
            _label_column(evidence.encoder, j),
            _label_column(evidence.linear, j),
            None if evidence.starts is None else _label_column(evidence.starts, j),
            jaccard_threshold,
        )
        clauses = sum(1 for gold in evidence.golds for span in gold if span.label == label)
        fitted = part.fit(everything, seed)
        statistic = encoder_evidence(
            _stack(part.linear, everything), _stack(part.encoder, everything), _stack(part.targets, everything), seed
        )
        row: dict = {
            "held_out_clauses": clauses,
            "fitted_weights": [round(w, 4) for w in fitted],
            "encoder_likelihood_ratio": round(statistic, 2),
        }
        if clauses < min_clauses:
            row["why"] = f"{clauses} held-out clauses, fewer than {min_clauses}: too few to tell"
        else:
            full = part.counts(part.probabilities(fitted))
            alone = part.counts(part.probabilities(LINEAR_ONLY))
            linear_f1, combined_f1 = part.cross_fitted_f1(seed, alone), part.cross_fitted_f1(seed)
            row.update(
                linear_f1=round(linear_f1, 4),
                combined_f1=round(combined_f1, 4),
                linear_aupr=_aupr(alone, label),
                combined_aupr=_aupr(full, label),
            )
            if fitted[1] <= 0:
                row["why"] = "the encoder's fitted weight is not positive"
            elif statistic < ENCODER_EVIDENCE:
                row["why"] = (
                    f"the encoder's logit explains the held-out segments no better than the linear one "
                    f"(likelihood ratio {statistic:.1f} < {ENCODER_EVIDENCE})"
                )
            elif combined_f1 <= linear_f1:
                row["why"] = "the combination does not raise the cross-fitted held-out Jaccard F1"
            else:
                row["uses"] = "encoder+linear"
                weights.append(list(fitted))
                thresholds.append(choose_from_counts(full[None])[0])
        if "uses" not in row:
            row["uses"] = "linear"
            weights.append(list(LINEAR_ONLY))
            thresholds.append(float(linear_thresholds[j]))
        row["threshold"] = thresholds[-1]
        report[label] = row
    return Combination(weights, thresholds, report)


def _aupr(counts: np.ndarray, label: str) -> float | None:
    figures = sweep_metrics(counts[None], [label], bootstrap=0)["per_label"].get(label)
    return None if figures is None else figures.get("aupr")
