"""segments.combination: fitted. How much of the encoder to trust, per label, decided on training documents
the encoder did not train on (out of fold with segments.thresholds=cross_fitted, a held-out share with
held_out). No torch, no I/O (scikit-learn fits, in `stacking.py`).

The final score of a label is sigmoid(w_linear * linear logit + w_encoder * encoder logit + bias): a penalized
logistic regression over the two standardized logits, its penalty chosen by cross-validation grouped by
document (`stacking.fit_stack`). The encoder is kept for a label only where it adds to the linear model on a
one-sided test at 5%: the stack's out-of-fold log-loss against the linear logit recalibrated alone, with a
bootstrap over documents (`stacking.gain_test`), its p-value corrected for the number of labels tested (Holm's
step-down: with 41 labels, about two would pass an uncorrected 5% test by chance alone). The threshold is the
best Jaccard F1 of the stack's out-of-fold scores, so no figure that decides is scored on the fit that made it.
A label where the encoder is not kept (or with too few clauses to tell) is the linear model alone at its
out-of-fold threshold: the `--linear-baseline` decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.evaluate.ranking import sweep_metrics
from toolkit.evaluate.thresholds import choose_from_counts, threshold_counts
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import sigmoid
from toolkit.tasks.segments.stacking import SIGNIFICANCE, fit_stack, gain_test, out_of_fold_logits

# Fewer clauses of a label than this cannot show a gain beyond one clause's noise: linear alone.
MIN_HELD_OUT_CLAUSES = 5
LINEAR_ONLY = (1.0, 0.0, 0.0)


@dataclass(frozen=True)
class HeldOutEvidence:
    """Training documents scored by an encoder that did not train on them, as both parts see them: per
    document its segments, their [segments x labels] targets, the encoder's own logits and the linear model's
    out-of-fold logits (and its clause-start probabilities, when the model splits runs)."""

    texts: list[str]
    golds: list[list[SpanLike]]
    segments: list[list[tuple[int, int]]]
    targets: list[np.ndarray]
    encoder: list[np.ndarray]
    linear: list[np.ndarray]
    starts: list[np.ndarray] | None = None


@dataclass(frozen=True)
class Combination:
    """Per label (w_linear, w_encoder, bias) and threshold, and what the test found on the evidence."""

    weights: list[list[float]]
    thresholds: list[float]
    report: dict[str, dict]

    @property
    def linear_only(self) -> list[str]:
        """The labels where the encoder did not add to the linear model."""
        return [label for label, r in self.report.items() if r["uses"] == "linear"]

    @property
    def kept(self) -> dict[str, float]:
        """The labels that use the encoder, with their p-values."""
        return {label: r["p_value"] for label, r in self.report.items() if r["uses"] == "encoder+linear"}

    def note(self) -> str:
        """One plain sentence for the run's record and the console."""
        kept = ", ".join(f"{label} (p {p:.3f})" for label, p in self.kept.items())
        if not self.linear_only:
            return f"the encoder added to the linear model for every label: {kept}"
        if not kept:
            return (
                "the encoder did not add to the linear model for any label on the training documents it did not "
                "train on: the model is the linear baseline (see run.combination for each label's test)"
            )
        return f"the encoder is kept for {kept}; the other labels use the linear model alone (see run.combination)"


def _column(arrays: Sequence[np.ndarray], j: int) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=float)[:, j] for a in arrays]) if arrays else np.zeros(0)


def _per_document(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    return [part[:, None] for part in np.split(values, np.cumsum(sizes)[:-1])]


def fit_combination(
    evidence: HeldOutEvidence,
    labels: Sequence[str],
    linear_thresholds: Sequence[float],
    jaccard_threshold: float,
    seed: int = 0,
    min_clauses: int = MIN_HELD_OUT_CLAUSES,
) -> Combination:
    """Per label, the stack where the encoder adds to the linear model on the evidence (one-sided, 5%), else
    the linear model alone at `linear_thresholds` (chosen out of fold)."""
    report: dict[str, dict] = {}
    stacked_choice: dict[str, tuple[list[float], float]] = {}  # the stack's weights and threshold, where it adds
    sizes = [len(t) for t in evidence.targets]
    documents = np.repeat(np.arange(len(sizes)), sizes)
    for j, label in enumerate(labels):
        y = _column(evidence.targets, j).astype(int)
        linear, encoder = _column(evidence.linear, j), _column(evidence.encoder, j)
        scored = np.isfinite(linear) & np.isfinite(encoder)  # a segment no window token reached has no encoder logit
        clauses = sum(1 for gold in evidence.golds for span in gold if span.label == label)
        row: dict = {"evidence_clauses": clauses, "evidence_documents": len(sizes)}
        # Too few clauses: no stack is fitted (its grouped cross-validation is the costly part).
        stack = (
            None
            if clauses < min_clauses
            else fit_stack(y[scored], documents[scored], linear[scored], encoder[scored], seed=seed)
        )
        if stack is None:
            row["why"] = f"{clauses} clauses in the evidence, fewer than {min_clauses}: too few to tell"
        else:
            alone = out_of_fold_logits(y[scored], documents[scored], linear[scored], seed=seed)
            both = out_of_fold_logits(y[scored], documents[scored], linear[scored], encoder[scored], seed=seed)
            test = gain_test(y[scored], documents[scored], alone, both, seed=seed)
            raw = stack.raw_weights
            row.update(
                penalty=stack.penalty,
                fitted_weights=[round(w, 4) for w in raw],
                log_loss_gain=test["gain"],
                p_value=test["p_value"],
            )
            # The stack's out-of-fold scores (the full stack's where a fold could not be fitted) decide the threshold.
            stacked = np.full(len(y), np.nan)
            stacked[scored] = np.where(np.isfinite(both), both, stack.logits(linear[scored], encoder[scored]))
            linear_counts = _counts(evidence, j, label, linear, sizes, jaccard_threshold)
            stacked_counts = _counts(evidence, j, label, stacked, sizes, jaccard_threshold)
            row.update(linear_aupr=_aupr(linear_counts, label), stacked_aupr=_aupr(stacked_counts, label))
            tested = f"out-of-fold log-loss gain {test['gain']:.5f}, one-sided p {test['p_value']:.3f}"
            if test["gain"] <= 0:
                row["why"] = f"the encoder does not add to the linear model ({tested})"
            elif raw[1] <= 0:
                row["why"] = f"the stack's encoder weight is not positive ({tested})"
            else:
                stacked_choice[label] = ([float(w) for w in raw], choose_from_counts(stacked_counts[None])[0])
        report[label] = row
    adjusted = holm({label: row["p_value"] for label, row in report.items() if "p_value" in row})
    weights: list[list[float]] = []
    thresholds: list[float] = []
    for j, (label, row) in enumerate(report.items()):
        if label in adjusted:
            row["p_holm"] = adjusted[label]
        if label in stacked_choice and adjusted[label] < SIGNIFICANCE:
            row["uses"] = "encoder+linear"
            weights.append(stacked_choice[label][0])
            thresholds.append(stacked_choice[label][1])
        else:
            if label in stacked_choice:
                row["why"] = (
                    f"the encoder does not add to the linear model beyond chance over {len(adjusted)} labels tested "
                    f"(out-of-fold log-loss gain {row['log_loss_gain']:.5f}, one-sided p {row['p_value']:.3f}, "
                    f"Holm-adjusted {adjusted[label]:.3f} >= {SIGNIFICANCE})"
                )
            row["uses"] = "linear"
            weights.append(list(LINEAR_ONLY))
            thresholds.append(float(linear_thresholds[j]))
        row["threshold"] = thresholds[-1]
    return Combination(weights, thresholds, report)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (each label's p-value times the labels not yet passed, kept monotone): a
    label passes at level a where its adjusted p-value is below a, and the chance that any label passes by chance
    alone stays below a however many are tested. Written here: two lines, where statsmodels' multipletests would
    be a dependency for them."""
    order = sorted(p_values, key=p_values.get)
    adjusted, running = {}, 0.0
    for i, label in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p_values[label]))
        adjusted[label] = round(running, 4)
    return adjusted


def _counts(
    evidence: HeldOutEvidence, j: int, label: str, logits: np.ndarray, sizes: Sequence[int], jaccard_threshold: float
) -> np.ndarray:
    """[thresholds, documents, 3] of (matched, predicted, gold) of label j's spans over the grid."""
    return threshold_counts(
        evidence.texts,
        evidence.golds,
        evidence.segments,
        [sigmoid(x) for x in _per_document(logits, sizes)],
        [label],
        jaccard_threshold=jaccard_threshold,
        starts=None if evidence.starts is None else [np.asarray(s, dtype=float)[:, j : j + 1] for s in evidence.starts],
    )[0]


def _aupr(counts: np.ndarray, label: str) -> float | None:
    figures = sweep_metrics(counts[None], [label], bootstrap=0)["per_label"].get(label)
    return None if figures is None else figures.get("aupr")
