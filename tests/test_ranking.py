"""CUAD's ranking metrics: AUPR and precision at recall over span scores, per label, macro and pooled."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Texts where a run's words are easy to get wrong: no space at a cut, Greek final sigma, a capital whose
# lower case is two characters, punctuation gaps, line separators.
_HOSTILE = st.text(alphabet="aZ _.;:()1\n\u2028ΑΣσİ-", max_size=60)


def _segments(draw, n_chars: int) -> list[tuple[int, int]]:
    cuts = sorted(draw(st.lists(st.integers(0, n_chars), min_size=2, max_size=12)))
    pairs = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    if draw(st.booleans()) and len(pairs) > 1:  # overlapping segments as well
        a, b = pairs[1]
        pairs[1] = (max(0, a - 2), b)
    return pairs


@st.composite
def _documents(draw):
    text = draw(_HOSTILE)
    segments = _segments(draw, len(text))
    probs = np.asarray(
        draw(st.lists(st.sampled_from([0.05, 0.3, 0.6, 0.95]), min_size=2 * len(segments), max_size=2 * len(segments)))
    )
    starts = np.asarray(
        draw(st.lists(st.sampled_from([0.1, 0.9]), min_size=2 * len(segments), max_size=2 * len(segments)))
    )
    golds = []
    for _ in range(draw(st.integers(0, 3))):
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, len(text)))
        golds.append(Span(start=a, end=b, label=draw(st.sampled_from("AB"))) if b > a else None)
    return text, segments, probs.reshape(-1, 2), starts.reshape(-1, 2), [g for g in golds if g]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_runs_words_equal_the_words_of_its_text(data):
    from toolkit.evaluate.scorer import word_set
    from toolkit.evaluate.thresholds import RunWords

    text = data.draw(_HOSTILE)
    segments = _segments(data.draw, len(text))
    words = RunWords(text, segments)
    for a in range(len(segments)):
        for b in range(a, len(segments)):
            assert words(a, b) == word_set(text[segments[a][0] : segments[b][1]]), (text, segments, a, b)


def _reference_counts(texts, golds, segments, probs, labels, grid, jaccard_threshold, starts):
    """threshold_counts as first written: every run's text read, every pair's union built."""
    from toolkit.evaluate.scorer import word_set
    from toolkit.spans.content import has_content
    from toolkit.spans.segment_decoding import START_THRESHOLD, segment_runs

    def jac(a, b):
        return 1.0 if not a and not b else len(a & b) / len(a | b)

    out = np.zeros((len(labels), len(grid), len(texts), 3), dtype=np.int64)
    for d, (text, gold, segs, p) in enumerate(zip(texts, golds, segments, probs)):
        for j, label in enumerate(labels):
            gsets = [word_set(text[g.start : g.end]) for g in gold if g.label == label]
            begins = starts[d][:, j] >= START_THRESHOLD
            for t_index, t in enumerate(grid):
                runs = segment_runs(p[:, j] >= t, begins) if len(segs) else []
                runs = [(a, b) for a, b in runs if has_content(text, segs[a][0], segs[b][1])]
                psets = [word_set(text[segs[a][0] : segs[b][1]]) for a, b in runs]
                pairs = sorted(
                    (
                        (x, i, k)
                        for k, q in enumerate(psets)
                        for i, g in enumerate(gsets)
                        if (x := jac(g, q)) >= jaccard_threshold
                    ),
                    reverse=True,
                )
                used_g, used_p = set(), set()
                for _, i, k in pairs:
                    if i not in used_g and k not in used_p:
                        used_g.add(i)
                        used_p.add(k)
                out[j, t_index, d] = (len(used_g) if runs and gsets else 0, len(runs), len(gsets))
    return out


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(_documents(), min_size=1, max_size=3), jaccard_threshold=st.sampled_from([0.3, 0.5, 0.7, 1.0]))
def test_the_threshold_sweep_counts_as_reading_every_runs_text(docs, jaccard_threshold):
    from toolkit.evaluate.thresholds import threshold_counts

    texts, segments, probs, starts, golds = (list(x) for x in zip(*docs))
    grid = (0.01, 0.5, 0.9)
    args = (texts, golds, segments, probs, ["A", "B"], grid, jaccard_threshold)
    fast = threshold_counts(*args, starts=starts)
    assert fast.tolist() == _reference_counts(*args, starts).tolist()


def test_spans_without_a_word_are_neither_ranked_nor_counted_in_the_sweep():
    """The one rule of `spans.content`: a span of punctuation or whitespace is not a proposal."""
    from toolkit.evaluate.thresholds import threshold_counts
    from toolkit.spans.decoding import PredictedSpan

    text = "Notice: sixty (60) days. -- ; ..."
    gold = [[PredictedSpan(8, 24, "A", 1.0)]]
    hit, dot = PredictedSpan(8, 24, "A", 0.6), PredictedSpan(25, 33, "A", 0.9)  # the dot ranks first
    with_dot = ranking_metrics([text], gold, [[hit, dot]], bootstrap=0)["per_label"]["A"]
    assert with_dot == ranking_metrics([text], gold, [[hit]], bootstrap=0)["per_label"]["A"]
    assert with_dot["predicted"] == 1 and with_dot["aupr"] == 1.0
    # Segments "Notice: sixty (60) days." and "-- ; ...", both above every threshold, split apart by `starts`:
    # the second run has no word, so each threshold predicts one span, which matches.
    segments, probs = [(0, 24), (25, 33)], np.array([[0.9], [0.9]])
    starts = np.array([[1.0], [1.0]])
    counts = threshold_counts([text], gold, [segments], [probs], ["A"], grid=(0.5,), starts=[starts])
    assert counts[0, 0, 0].tolist() == [1, 1, 1]


def test_a_label_with_few_clauses_takes_its_threshold_toward_the_curve_every_label_shares():
    from toolkit.evaluate.thresholds import choose_from_counts, choose_toward_pool

    grid = (0.2, 0.5, 0.8)

    def counts(matched: list[int], predicted: list[int], gold: int) -> np.ndarray:
        """[thresholds, documents=1, 3] for one label."""
        return np.array([[[m, p, gold]] for m, p in zip(matched, predicted)])

    many = counts([80, 90, 60], [100, 100, 70], 100)  # its own best is 0.5 (F1 0.9)
    few = counts([2, 1, 0], [3, 1, 0], 2)  # alone, its best is 0.2 (F1 0.8 against 0.67 at 0.5)
    odd = counts([1, 0, 0], [2, 5, 5], 1)  # two clauses' noise says 0.2
    table = np.stack([many, few, odd])
    assert choose_from_counts(table, grid=grid)[2] == 0.2
    # the pooled curve (mostly `many`'s) pulls the labels with one and two clauses to 0.5; `many` keeps its own
    assert choose_from_counts(table, grid=grid)[1] == 0.2
    assert choose_toward_pool(table, grid=grid) == [0.5, 0.5, 0.5]
    # with no pull at all, each label is its own best again
    assert choose_toward_pool(table, prior_clauses=0, grid=grid) == choose_from_counts(table, grid=grid)
