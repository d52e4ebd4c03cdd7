"""CUAD's ranking metrics: AUPR and precision at recall over span scores, per label, macro and pooled."""

import numpy as np
import pytest

from toolkit.data.schema import Span
from toolkit.evaluate.ranking import aupr, precision_at_recall, ranking_metrics
from toolkit.spans.decoding import PredictedSpan

TEXT = "alpha beta gamma. delta epsilon zeta. eta theta iota. kappa lambda mu."


def _span(words: str, label: str):
    start = TEXT.index(words)
    return Span(start=start, end=start + len(words), label=label)


def _pred(words: str, label: str, score: float):
    start = TEXT.index(words)
    return PredictedSpan(start, start + len(words), label, score)


def test_a_perfect_ranking_has_area_one_and_full_precision_at_recall():
    golds = [[_span("alpha beta gamma", "A"), _span("eta theta iota", "A")]]
    preds = [
        [_pred("alpha beta gamma", "A", 0.9), _pred("eta theta iota", "A", 0.8), _pred("kappa lambda mu", "A", 0.1)]
    ]
    m = ranking_metrics([TEXT], golds, preds, bootstrap=0)
    assert m["per_label"]["A"]["aupr"] == pytest.approx(1.0)
    assert m["per_label"]["A"]["precision_at_80_recall"] == 1.0 and m["per_label"]["A"]["support"] == 2


def test_a_false_clause_ranked_first_costs_area_and_jaccard_half_matches():
    golds = [[_span("alpha beta gamma", "A"), _span("eta theta iota", "A")]]
    # "beta gamma" has Jaccard 2/3 with the gold clause: a match; "delta epsilon zeta" matches nothing.
    preds = [[_pred("delta epsilon zeta", "A", 0.9), _pred("beta gamma", "A", 0.8), _pred("eta theta", "A", 0.7)]]
    m = ranking_metrics([TEXT], golds, preds, bootstrap=0)["per_label"]["A"]
    # Curve: (p 0, r 0), (p 1/2, r 1/2), (p 2/3, r 1); enveloped precisions 2/3, 2/3, 2/3.
    assert m["aupr"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["precision_at_80_recall"] == pytest.approx(2 / 3, abs=1e-4) and m["max_recall"] == 1.0


def test_recall_never_reached_gives_zero_precision_at_recall():
    p, r = np.array([1.0, 1.0]), np.array([0.25, 0.5])
    assert precision_at_recall(p, r, 0.8) == 0.0
    assert aupr(p, r) == pytest.approx(0.5)
    assert aupr(np.zeros(0), np.zeros(0)) == 0.0


def test_macro_averages_labels_with_gold_and_micro_pools_one_ranking():
    golds = [[_span("alpha beta gamma", "A"), _span("kappa lambda mu", "B")], [_span("eta theta iota", "A")]]
    preds = [
        [
            _pred("alpha beta gamma", "A", 0.9),
            _pred("delta epsilon zeta", "B", 0.95),
            _pred("kappa lambda mu", "B", 0.2),
        ],
        [_pred("eta theta iota", "A", 0.5)],
    ]
    m = ranking_metrics([TEXT, TEXT], golds, preds, bootstrap=200)
    assert m["per_label"]["A"]["aupr"] == pytest.approx(1.0)
    assert m["per_label"]["B"]["aupr"] == pytest.approx(0.5)  # curve (0, 0) then (1/2, 1): envelope 1/2
    assert m["macro"]["aupr"] == pytest.approx(0.75)
    assert 0 < m["micro"]["aupr"] < 1
    low, high = m["ci95"]["macro_aupr"]
    assert 0.5 <= low <= high <= 1.0
    # A label with predictions but no gold clause is left out of the macro average.
    extra = [[*preds[0], _pred("delta epsilon zeta", "C", 0.99)], preds[1]]
    assert ranking_metrics([TEXT, TEXT], golds, extra, bootstrap=0)["macro"]["aupr"] == pytest.approx(0.75)


def test_a_threshold_sweep_traces_the_curve_of_a_segment_model():
    from toolkit.evaluate.ranking import sweep_metrics
    from toolkit.evaluate.thresholds import choose_from_counts, threshold_counts
    from toolkit.spans.segments import segment_text

    segments = [segment_text(TEXT)]  # the four sentences of TEXT
    golds = [[_span("alpha beta gamma", "A"), _span("eta theta iota", "A")]]
    # Sentences 1 and 3 are clauses; sentence 2 scores between them, sentence 4 low.
    probs = [np.array([[0.9], [0.6], [0.8], [0.1]])]
    counts = threshold_counts([TEXT], golds, segments, probs, ["A"], grid=(0.5, 0.7, 0.95))
    # At 0.5 three sentences merge into one span (no match); at 0.7 two clean spans; at 0.95 none.
    assert counts[0, :, 0, :].tolist() == [[0, 1, 2], [2, 2, 2], [0, 0, 2]]
    assert choose_from_counts(counts, grid=(0.5, 0.7, 0.95)) == [0.7]
    m = sweep_metrics(counts, ["A"], bootstrap=0)
    assert m["per_label"]["A"]["aupr"] == pytest.approx(1.0) and m["per_label"]["A"]["precision_at_90_recall"] == 1.0
