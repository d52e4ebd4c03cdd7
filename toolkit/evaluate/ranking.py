"""CUAD's ranking metrics over span scores: per-label precision-recall curves, AUPR, and precision at
80% and 90% recall. Pure (no torch, no I/O).

How this relates to the CUAD paper (Hendrycks et al. 2021): there every (contract, clause type) is a
question, a QA model proposes answer spans with confidences, a proposal counts as correct when its
words match an annotated clause at Jaccard >= 0.5, and sweeping a confidence threshold traces one
precision-recall curve. AUPR is the trapezoidal area under that curve after precisions are made
non-increasing in recall (`_envelope`, as the paper's evaluation script does), and P@80R is the best
precision at a recall of at least 0.8 (0 when the curve never reaches it).

Here the proposals are a system's predicted spans with their `score` (a tagger's mean token
probability, a segment model's mean segment probability): spans are ranked by score, and each is
matched, highest score first, to an unmatched same-label gold clause of its document at word Jaccard
at least the run's eval.jaccard_threshold (0.5, CUAD's, by default). Curves are given per label and pooled over labels
(`micro`, the paper's single curve); the
macro figure averages labels that have gold clauses. A system's figures only reflect the spans it
proposes, so a tagger's curve stops at its recall. A segment model's spans change with the threshold
(consecutive segments merge), so its curve is traced by deciding at every threshold of a grid instead
(`sweep_metrics`): each point is a real operating point of the model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.evaluate.scorer import jaccard, word_set
from toolkit.scoring_defaults import SCORING
from toolkit.spans.content import has_content
from toolkit.spans.overlaps import SpanLike

RECALL_POINTS = (0.8, 0.9)


def _ranked_hits(
    texts, golds, preds, label: str, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(score, document, hit) of every prediction of `label`, best score first, and gold counts per document.
    Matching is per document, so a document's hits do not depend on the other documents."""
    scores, docs, hits = [], [], []
    gold_per_doc = np.zeros(len(texts))
    for d, (text, gold, pred) in enumerate(zip(texts, golds, preds)):
        gsets = [word_set(text[g.start : g.end]) for g in gold if g.label == label]
        gold_per_doc[d] = len(gsets)
        used: set[int] = set()
        # A span without a word is never returned or scored (`spans.content`): it is not a proposal either.
        proposals = (p for p in pred if p.label == label and has_content(text, p.start, p.end))
        for p in sorted(proposals, key=lambda p: -float(getattr(p, "score", 1.0))):
            pset = word_set(text[p.start : p.end])
            best = max(((jaccard(g, pset), i) for i, g in enumerate(gsets) if i not in used), default=(0.0, -1))
            hit = best[0] >= threshold
            if hit:
                used.add(best[1])
            scores.append(float(getattr(p, "score", 1.0)))
            docs.append(d)
            hits.append(hit)
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    return (
        np.asarray(scores)[order],
        np.asarray(docs, dtype=int)[order],
        np.asarray(hits, dtype=bool)[order],
        gold_per_doc,
    )


def _envelope(precisions: np.ndarray) -> np.ndarray:
    """Each precision replaced by the best precision at this recall or higher."""
    return np.maximum.accumulate(precisions[::-1])[::-1] if len(precisions) else precisions


def curve(hits: np.ndarray, weights: np.ndarray, n_gold: float) -> tuple[np.ndarray, np.ndarray]:
    """(precision, recall) after each ranked prediction; `weights` count each prediction (bootstrap multiplicity)."""
    tp = np.cumsum(weights * hits)
    seen = np.cumsum(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(seen > 0, tp / seen, 1.0)
    recall = tp / n_gold if n_gold else np.zeros_like(tp)
    return precision, recall


def aupr(precision: np.ndarray, recall: np.ndarray) -> float:
    """Area under the enveloped curve, from recall 0 (at the first point's precision)."""
    if not len(precision):
        return 0.0
    p = _envelope(precision)
    return float(np.trapezoid(np.concatenate([[p[0]], p]), np.concatenate([[0.0], recall])))


def precision_at_recall(precision: np.ndarray, recall: np.ndarray, target: float) -> float:
    """Best precision at a recall of at least `target`; 0 when the curve never reaches it."""
    reached = recall >= target - 1e-12
    return float(_envelope(precision)[reached].max()) if reached.any() else 0.0


SCOPE_KEYS = ("aupr", *[f"precision_at_{int(r * 100)}_recall" for r in RECALL_POINTS])  # averaged over labels


def _curve_figures(precision: np.ndarray, recall: np.ndarray) -> dict:
    """AUPR, precision at each of RECALL_POINTS and the highest recall of one curve (recall non-decreasing)."""
    out = {"aupr": aupr(precision, recall)}
    for r in RECALL_POINTS:
        out[f"precision_at_{int(r * 100)}_recall"] = precision_at_recall(precision, recall, r)
    out["max_recall"] = float(recall.max()) if len(recall) else 0.0
    return out


def _figures(hits, weights, n_gold) -> dict:
    return _curve_figures(*curve(hits, weights, n_gold))


def _macro(per_label: dict[str, dict]) -> dict:
    return {k: float(np.mean([v[k] for v in per_label.values()])) for k in SCOPE_KEYS} if per_label else {}


def _bootstrap_ci(evaluate, n_docs: int, bootstrap: int, seed: int) -> dict[str, list[float]]:
    """95% intervals of the macro and micro figures of `evaluate(document weights)` over documents
    resampled with replacement (a document drawn k times weighs k)."""
    if not (bootstrap and n_docs):
        return {}
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    for _ in range(bootstrap):
        result = evaluate(np.bincount(rng.integers(0, n_docs, n_docs), minlength=n_docs).astype(float))
        for scope in ("macro", "micro"):
            for k, v in result[scope].items():
                samples.setdefault(f"{scope}_{k}", []).append(v)
    return {
        k: [round(float(np.percentile(v, 2.5)), 4), round(float(np.percentile(v, 97.5)), 4)] for k, v in samples.items()
    }


def _rounded(d: dict) -> dict:
    return {k: round(v, 4) for k, v in d.items()}


def ranking_metrics(
    texts: Sequence[str],
    golds: Sequence[Sequence[SpanLike]],
    preds: Sequence[Sequence[SpanLike]],
    labels: Sequence[str] | None = None,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    bootstrap: int = SCORING.bootstrap,
    seed: int = 0,
) -> dict:
    """Per-label, macro and micro AUPR and precision at 80/90% recall, with 95% bootstrap intervals
    over documents (documents resampled with replacement; their hits are fixed, so a resample only
    reweights predictions and gold clauses)."""
    labels = sorted(labels if labels is not None else {s.label for doc in golds for s in doc})
    ranked = {lb: _ranked_hits(texts, golds, preds, lb, jaccard_threshold) for lb in labels}
    n_docs = len(texts)

    def evaluate(doc_weights: np.ndarray) -> dict:
        per_label = {}
        for lb, (_scores, docs, hits, gold_per_doc) in ranked.items():
            n_gold = float((gold_per_doc * doc_weights).sum())
            if n_gold:
                per_label[lb] = _figures(hits, doc_weights[docs], n_gold)
        # Pooled: every label's predictions in one ranking by score.
        all_scores = np.concatenate([r[0] for r in ranked.values()]) if ranked else np.zeros(0)
        all_w = np.concatenate([doc_weights[r[1]] for r in ranked.values()]) if ranked else np.zeros(0)
        all_hits = np.concatenate([r[2] for r in ranked.values()]) if ranked else np.zeros(0, dtype=bool)
        order = np.argsort(-all_scores, kind="stable")
        n_gold = float(sum((r[3] * doc_weights).sum() for r in ranked.values()))
        micro = _figures(all_hits[order], all_w[order], n_gold) if n_gold else {}
        return {"per_label": per_label, "macro": _macro(per_label), "micro": micro}

    point = evaluate(np.ones(n_docs))
    return {
        "per_label": {
            lb: {"support": int(ranked[lb][3].sum()), "predicted": len(ranked[lb][0]), **_rounded(v)}
            for lb, v in point["per_label"].items()
        },
        "macro": _rounded(point["macro"]),
        "micro": _rounded(point["micro"]),
        "ci95": _bootstrap_ci(evaluate, n_docs, bootstrap, seed),
        "settings": {
            "jaccard_threshold": jaccard_threshold,
            "bootstrap": bootstrap,
            "labels_with_gold": len(point["per_label"]),
        },
    }


def _sweep_figures(counts: np.ndarray) -> dict:
    """Figures of one curve traced by thresholds: counts [thresholds, 3] of (matched, predicted, gold)."""
    tp, n_pred, n_gold = counts[:, 0].astype(float), counts[:, 1].astype(float), counts[:, 2].astype(float)
    precision = np.where(n_pred > 0, tp / np.maximum(n_pred, 1), 1.0)
    recall = np.where(n_gold > 0, tp / np.maximum(n_gold, 1), 0.0)
    order = np.lexsort((-precision, recall))  # recall ascending, the best precision first at equal recall
    return _curve_figures(precision[order], recall[order])


def sweep_metrics(
    counts: np.ndarray,
    labels: Sequence[str],
    bootstrap: int = SCORING.bootstrap,
    seed: int = 0,
    jaccard_threshold: float = SCORING.jaccard_threshold,
) -> dict:
    """The ranking metrics of a segment model, from `evaluate.thresholds.threshold_counts` ([labels,
    thresholds, documents, 3]): each label's curve is traced by deciding at every threshold of the grid,
    since its spans change with the threshold. Same keys as `ranking_metrics`."""
    n_docs = counts.shape[2]

    def evaluate(doc_weights: np.ndarray) -> dict:
        weighted = (counts * doc_weights[None, None, :, None]).sum(axis=2)  # [labels, thresholds, 3]
        per_label = {lb: _sweep_figures(weighted[j]) for j, lb in enumerate(labels) if weighted[j, 0, 2] > 0}
        micro = _sweep_figures(weighted.sum(axis=0)) if per_label else {}
        return {"per_label": per_label, "macro": _macro(per_label), "micro": micro}

    point = evaluate(np.ones(n_docs))
    totals = counts.sum(axis=2)  # [labels, thresholds, 3]
    index = {lb: j for j, lb in enumerate(labels)}
    return {
        "per_label": {
            lb: {
                "support": int(totals[index[lb], 0, 2]),
                "predicted": int(totals[index[lb], :, 1].max()),
                **_rounded(v),
            }
            for lb, v in point["per_label"].items()
        },
        "macro": _rounded(point["macro"]),
        "micro": _rounded(point["micro"]),
        "ci95": _bootstrap_ci(evaluate, n_docs, bootstrap, seed),
        "settings": {
            "jaccard_threshold": jaccard_threshold,
            "bootstrap": bootstrap,
            "labels_with_gold": len(point["per_label"]),
            "curve": "threshold sweep",
        },
    }
