"""Per-label decision thresholds for segment models, chosen on dev documents. Pure (no torch, no I/O).

A label's threshold is the one of THRESHOLD_GRID that maximises its Jaccard F1 (CUAD's matching: word
Jaccard >= 0.5, one-to-one) on the documents given. Thresholds chosen on a set and scored on the same
set flatter the model, so `cross_fitted_thresholds` also gives each document thresholds chosen on the
other fold: scoring those predictions is an honest estimate of what the saved thresholds will do on
new documents.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.evaluate.metrics import jaccard, word_set
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import merge_segments

THRESHOLD_GRID = tuple(round(float(x), 2) for x in np.arange(0.05, 0.96, 0.05))


def _matches(text: str, gold: Sequence[SpanLike], pred: Sequence[tuple[int, int, str, float]], threshold: float = 0.5) -> int:
    """One-to-one matches at word Jaccard >= threshold (greedy, best Jaccard first); one label's spans."""
    gsets = [word_set(text[g.start : g.end]) for g in gold]
    pairs = sorted(
        ((j, i, k) for k, p in enumerate(pred) for i, g in enumerate(gsets) if (j := jaccard(g, word_set(text[p[0] : p[1]]))) >= threshold), reverse=True
    )
    used_g, used_p = set(), set()
    for _, i, k in pairs:
        if i not in used_g and k not in used_p:
            used_g.add(i)
            used_p.add(k)
    return len(used_g)


def label_f1_by_threshold(texts, golds, segments, probs, label_index: int, label: str) -> dict[float, tuple[int, int, int]]:
    """threshold -> (matched, predicted, gold) of one label over the documents."""
    out = {}
    for t in THRESHOLD_GRID:
        tp = n_pred = n_gold = 0
        for text, gold, segs, p in zip(texts, golds, segments, probs):
            spans = merge_segments(segs, p[:, [label_index]], [label], [t])
            gold_l = [g for g in gold if g.label == label]
            tp += _matches(text, gold_l, spans)
            n_pred += len(spans)
            n_gold += len(gold_l)
        out[t] = (tp, n_pred, n_gold)
    return out


def _f1(tp: int, n_pred: int, n_gold: int) -> float:
    return 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0


def choose_thresholds(texts, golds, segments, probs, labels: Sequence[str], default: float = 0.5) -> list[float]:
    """The best grid threshold per label on these documents; `default` for labels without gold spans here."""
    chosen = []
    for j, label in enumerate(labels):
        table = label_f1_by_threshold(texts, golds, segments, probs, j, label)
        if not any(n_gold for _, _, n_gold in table.values()):
            chosen.append(default)
            continue
        # Ties go to the higher threshold: fewer, surer spans for a reviewer.
        chosen.append(float(max(THRESHOLD_GRID, key=lambda t: (_f1(*table[t]), t))))
    return chosen


def cross_fitted_thresholds(texts, golds, segments, probs, labels: Sequence[str], default: float = 0.5) -> list[list[float]]:
    """Per document, the thresholds chosen on the other fold (documents split by even and odd position)."""
    folds = [list(range(0, len(texts), 2)), list(range(1, len(texts), 2))]
    per_doc: list[list[float]] = [[] for _ in texts]
    for fold, other in ((0, 1), (1, 0)):
        idx = folds[other]
        chosen = choose_thresholds([texts[i] for i in idx], [golds[i] for i in idx], [segments[i] for i in idx], [probs[i] for i in idx], labels, default)
        for i in folds[fold]:
            per_doc[i] = chosen
    return per_doc
