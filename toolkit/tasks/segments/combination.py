"""segments.combination: fitted. How much of the encoder to trust, decided once across labels on training
documents the encoder did not train on (out of fold with segments.thresholds=cross_fitted, a held-out share with
held_out). No torch, no I/O (scikit-learn fits, in `stacking.py`).

A label's final score is sigmoid(w_linear * linear logit + w_encoder * encoder logit + bias), from one stack
over every label (`stacking.fit_pooled_stack`): the linear logit recalibrated per label, the encoder's at a
weight pooled across labels, each label's departure from it shrunk toward 0 by a penalty chosen by
document-grouped cross-validation over all labels together. The decision then reads every label at once:
- one test: the stack's out-of-fold log-loss against the linear logit recalibrated alone, over every label's
  segments, with a bootstrap over documents, one-sided at 5% (`stacking.gain_test`), keeps the encoder or not;
- a label departs from that decision only where its own one-sided test in the departing direction (the encoder
  hurts it, where kept; adds to it, where not) passes after Holm's correction for the labels tested (with 41
  labels, about two would pass an uncorrected 5% test by chance alone), or where its pooled weight is not
  positive;
- the thresholds are the best Jaccard F1 of the stack's out-of-fold scores, a few clauses' curve shrunk toward
  the pooled curve of every label (`evaluate.thresholds.choose_toward_pool`).
So no figure that decides is scored on the fit that made it. A label where the encoder is not used (or without a
clause in the evidence) is the linear model alone at its out-of-fold threshold: the `--linear-baseline` decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.evaluate.ranking import sweep_metrics
from toolkit.evaluate.thresholds import choose_from_counts, choose_toward_pool, threshold_counts
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import sigmoid
from toolkit.tasks.segments.stacking import (
    FOLDS,
    SIGNIFICANCE,
    fit_pooled_stack,
    gain_test,
    out_of_fold_pooled,
)

# Fewer clauses of a label than this cannot show a departure beyond one clause's noise: the label follows the
# decision taken over every label.
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
    """Per label (w_linear, w_encoder, bias) and threshold, what the tests found on the evidence per label, and
    the decision taken over every label (`pooled`)."""

    weights: list[list[float]]
    thresholds: list[float]
    report: dict[str, dict]
    pooled: dict = field(default_factory=dict)

    @property
    def linear_only(self) -> list[str]:
        """The labels where the encoder is not used."""
        return [label for label, r in self.report.items() if r["uses"] == "linear"]

    @property
    def kept(self) -> dict[str, float | None]:
        """The labels that use the encoder, with their own tests' p-values (None where not tested)."""
        return {label: r.get("p_value") for label, r in self.report.items() if r["uses"] == "encoder+linear"}

    def note(self) -> str:
        """One plain sentence for the run's record and the console."""
        tested = self.pooled.get("p_value")
        decided = (
            f"one test over every label ({self.pooled['documents']} documents, out-of-fold log-loss gain "
            f"{self.pooled['log_loss_gain']:.5f}, one-sided p {tested:.3f}) "
            f"{'kept' if self.pooled['kept'] else 'did not keep'} the encoder"
            if tested is not None
            else "the evidence held no clause to test the encoder on"
        )
        kept = ", ".join(self.kept)
        if not self.linear_only:
            return f"{decided}; it is used for every label: {kept}"
        if not self.kept:
            return f"{decided}; the model is the linear baseline (see run.combination for each label's test)"
        return f"{decided}; it is used for {kept}; the other labels use the linear model alone (see run.combination)"


def _column(arrays: Sequence[np.ndarray], j: int) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=float)[:, j] for a in arrays]) if arrays else np.zeros(0)


def _per_document(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    return [part[:, None] for part in np.split(values, np.cumsum(sizes)[:-1])]


@dataclass(frozen=True)
class _Rows:
    """Every label's scored segments as rows of one table (a segment no window token reached has no encoder
    logit and is left out)."""

    y: np.ndarray
    documents: np.ndarray
    label: np.ndarray
    linear: np.ndarray
    encoder: np.ndarray
    segment: np.ndarray  # the row's index among every segment of the evidence, to put scores back


def _rows(evidence: HeldOutEvidence, tested: Sequence[int]) -> _Rows:
    sizes = [len(t) for t in evidence.targets]
    documents = np.repeat(np.arange(len(sizes)), sizes)
    parts: list[tuple] = []
    for j in tested:
        y, linear, encoder = (_column(a, j) for a in (evidence.targets, evidence.linear, evidence.encoder))
        scored = np.flatnonzero(np.isfinite(linear) & np.isfinite(encoder))
        parts.append(
            (y[scored].astype(int), documents[scored], np.full(len(scored), j), linear[scored], encoder[scored], scored)
        )
    return _Rows(*(np.concatenate(column) if parts else np.zeros(0) for column in zip(*parts)))


def fit_combination(
    evidence: HeldOutEvidence,
    labels: Sequence[str],
    linear_thresholds: Sequence[float],
    jaccard_threshold: float,
    seed: int = 0,
    min_clauses: int = MIN_HELD_OUT_CLAUSES,
) -> Combination:
    """The pooled stack where one test over every label finds that the encoder adds to the linear model (less
    the labels that depart from that decision), else the linear model alone at `linear_thresholds` (chosen out
    of fold)."""
    sizes = [len(t) for t in evidence.targets]
    clauses = {label: sum(1 for gold in evidence.golds for s in gold if s.label == label) for label in labels}
    report = {label: {"evidence_clauses": clauses[label], "evidence_documents": len(sizes)} for label in labels}
    tested = [j for j, label in enumerate(labels) if clauses[label] > 0]
    rows = _rows(evidence, tested) if tested else None
    stack = (
        fit_pooled_stack(
            rows.y, rows.documents, rows.label, rows.linear, rows.encoder, len(labels), folds=FOLDS, seed=seed
        )
        if rows is not None
        else None
    )
    if stack is None:
        return _linear_everywhere(report, linear_thresholds, "no clause of any label in the evidence")
    both = out_of_fold_pooled(rows.y, rows.documents, rows.label, rows.linear, rows.encoder, len(labels), seed=seed)
    alone = out_of_fold_pooled(rows.y, rows.documents, rows.label, rows.linear, None, len(labels), seed=seed)
    overall = gain_test(rows.y, rows.documents, alone, both, seed=seed)
    keep = bool(overall["keep"])
    pooled = {
        "kept": keep,
        "log_loss_gain": overall["gain"],
        "p_value": overall["p_value"],
        "documents": overall["documents"],
        "labels_tested": len(tested),
        "encoder_weight": round(stack.weight, 4),  # over standardized encoder logits
        "departure_penalty": stack.penalty,
    }
    # The stack's out-of-fold scores (the full stack's where a fold could not be fitted) decide the thresholds.
    stacked = np.where(np.isfinite(both), both, stack.logits(rows.label, rows.linear, rows.encoder))
    departing: dict[str, float] = {}
    for j in tested:
        label, mine = labels[j], rows.label == j
        y, docs = rows.y[mine], rows.documents[mine]
        own = gain_test(y, docs, alone[mine], both[mine], seed=seed)
        weights = stack.raw_weights(j)
        report[label].update(
            encoder_weight=round(stack.weight + float(stack.departures[j]), 4),
            fitted_weights=[round(w, 4) for w in weights],
            log_loss_gain=own["gain"],
            p_value=own["p_value"],
        )
        if clauses[label] >= min_clauses:
            # The departing direction: the encoder hurts this label (where kept), or adds to it (where not).
            departure = gain_test(y, docs, both[mine], alone[mine], seed=seed) if keep else own
            report[label]["p_departure"] = departure["p_value"]
            departing[label] = departure["p_value"]
    adjusted = holm(departing)
    pooled["departures"] = sorted(label for label, p in adjusted.items() if p < SIGNIFICANCE)
    uses = _decide(labels, tested, report, adjusted, keep, stack, clauses, min_clauses)
    return _thresholds(
        evidence, labels, report, pooled, uses, stack, rows, stacked, linear_thresholds, jaccard_threshold, sizes
    )


def _decide(labels, tested, report, adjusted, keep, stack, clauses, min_clauses) -> list[int]:
    """The labels (indices) that use the encoder: the decision over every label, XOR the label's departure;
    each label's `why` written."""
    uses = []
    decided = (
        "the encoder adds to the linear model over every label"
        if keep
        else ("the encoder does not add to the linear model over every label")
    )
    for j, label in enumerate(labels):
        row = report[label]
        if j not in tested:
            row["why"] = "no clause of this label in the evidence"
            continue
        if label in adjusted:
            row["p_holm"] = adjusted[label]
            tests = (
                f"its own one-sided test p {row['p_departure']:.3f}, Holm-adjusted over {len(adjusted)} labels "
                f"{adjusted[label]:.3f}"
            )
        else:
            tests = f"{clauses[label]} clauses, fewer than {min_clauses}: too few to depart"
        departs = adjusted.get(label, 1.0) < SIGNIFICANCE
        if departs:
            turn = "but it hurts this label beyond chance" if keep else "but it adds to this label beyond chance"
            row["why"] = f"{decided}, {turn} ({tests})"
        else:
            row["why"] = f"{decided}; this label follows ({tests})"
        if keep != departs:
            if stack.raw_weights(j)[1] > 0:
                uses.append(j)
            else:
                row["why"] += "; its pooled encoder weight is not positive, so it is the linear model alone"
    return uses


def _linear_everywhere(report: dict, linear_thresholds: Sequence[float], why: str) -> Combination:
    for j, row in enumerate(report.values()):
        row.update(uses="linear", why=row.get("why", why), threshold=float(linear_thresholds[j]))
    return Combination([list(LINEAR_ONLY)] * len(report), [float(t) for t in linear_thresholds], report, {})


def _thresholds(
    evidence, labels, report, pooled, uses, stack, rows, stacked, linear_thresholds, jaccard_threshold, sizes
) -> Combination:
    """Each encoder label's threshold from the stack's out-of-fold scores, shrunk toward the pooled curve of the
    encoder labels; the others keep the linear model's. Also each tested label's AUPR, linear and stacked."""
    n_segments = sum(sizes)
    counts = {}
    for j in sorted(set(rows.label.tolist())):
        mine = rows.label == j
        logits = {"linear": _column(evidence.linear, j), "stacked": np.full(n_segments, np.nan)}
        logits["stacked"][rows.segment[mine]] = stacked[mine]
        counts[j] = {k: _counts(evidence, j, labels[j], v, sizes, jaccard_threshold) for k, v in logits.items()}
        report[labels[j]].update(
            linear_aupr=_aupr(counts[j]["linear"], labels[j]), stacked_aupr=_aupr(counts[j]["stacked"], labels[j])
        )
    shrunk = choose_toward_pool(np.stack([counts[j]["stacked"] for j in uses])) if uses else []
    chosen = dict(zip(uses, shrunk))
    weights, thresholds = [], []
    for j, label in enumerate(labels):
        row = report[label]
        if j in chosen:
            row.update(uses="encoder+linear", own_threshold=choose_from_counts(counts[j]["stacked"][None])[0])
            weights.append(list(stack.raw_weights(j)))
            thresholds.append(chosen[j])
        else:
            row["uses"] = "linear"
            weights.append(list(LINEAR_ONLY))
            thresholds.append(float(linear_thresholds[j]))
        row["threshold"] = thresholds[-1]
    return Combination(weights, thresholds, report, pooled)


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
