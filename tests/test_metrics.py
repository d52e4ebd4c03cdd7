import pytest

from toolkit.data.schema import Span
from toolkit.evaluate.scorer import count_document, jaccard, score, word_set

TEXT = "The tenant shall pay rent monthly. Either party may terminate."


def at(phrase, label):
    start = TEXT.index(phrase)
    return Span(start=start, end=start + len(phrase), label=label)


GOLD = [at("pay rent monthly", "Pay"), at("Either party may terminate", "Term")]
PRED = [at("pay rent monthly", "Pay"), at("party may terminate", "Term"), at("The tenant", "Pay")]


def test_exact_values_on_a_hand_built_case():
    m = score([TEXT], [GOLD], [PRED], tolerances=[1], bootstrap=0)
    s = m["summary"]
    assert s["span_precision"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["span_recall"] == 0.5
    assert s["span_f1"] == 0.4
    assert s["jaccard_precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["jaccard_recall"] == 1.0 and s["jaccard_f1"] == 0.8
    assert (s["boundary_start_recall"], s["boundary_end_recall"], s["boundary_both_recall"]) == (0.5, 1.0, 0.5)
    assert (s["boundary_start_within_1_recall"], s["boundary_both_within_1_recall"]) == (1.0, 1.0)
    assert s["seqeval_precision"] == pytest.approx(1 / 3, abs=1e-4) and s["seqeval_recall"] == 0.5
    assert m["per_label"]["Pay"] == {
        "support": 1,
        "predicted": 2,
        "precision": 0.5,
        "recall": 1.0,
        "f1": 0.6667,
        "jaccard_recall": 1.0,
        "jaccard_f1": 0.6667,
    }
    assert m["per_label"]["Term"]["f1"] == 0.0
    assert s["span_macro_f1"] == pytest.approx(0.3333, abs=1e-4)
    assert m["length_buckets"] == [{"words": "3-5", "gold": 2, "recall": 0.5, "jaccard_recall": 1.0}]
    assert m["counts"] == {
        "documents": 1,
        "gold_spans": 2,
        "predicted_spans": 3,
        "unlocated_predictions": 0,
        "spans_without_content": 0,
    }


def test_label_must_match():
    m = score([TEXT], [GOLD], [[Span(start=s.start, end=s.end, label="Other") for s in GOLD]], bootstrap=0)
    assert (
        m["summary"]["span_f1"] == 0
        and m["summary"]["boundary_start_recall"] == 0
        and m["summary"]["jaccard_recall"] == 0
    )


def test_perfect_and_empty():
    assert score([TEXT], [GOLD], [GOLD], bootstrap=0)["summary"]["span_f1"] == 1.0
    m = score([TEXT], [[]], [[]], bootstrap=0)
    assert m["summary"]["span_f1"] == 0.0 and m["counts"]["gold_spans"] == 0


def test_jaccard_normalises_case_and_punctuation():
    assert word_set("The Tenant, shall!") == {"the", "tenant", "shall"}
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_jaccard_matching_is_one_to_one():
    gold = [at("pay rent monthly", "Pay")]
    pred = [at("pay rent monthly", "Pay"), at("pay rent", "Pay")]
    c = count_document(TEXT, gold, pred)
    assert sum(c.jaccard_tp.values()) == 1


def test_bootstrap_interval_contains_the_point_and_varies_over_documents():
    texts = [TEXT] * 20
    golds = [GOLD] * 20
    preds = [PRED if i % 2 else GOLD for i in range(20)]
    m = score(texts, golds, preds, bootstrap=500, seed=1)
    lo, hi = m["ci95"]["span_f1"]
    assert lo <= m["summary"]["span_f1"] <= hi and lo < hi
    single = score([TEXT], [GOLD], [PRED], bootstrap=200)
    assert single["ci95"]["span_f1"] == [0.4, 0.4]


def test_unlocated_predictions_are_false_positives():
    m = score([TEXT], [GOLD], [GOLD], bootstrap=0, unlocated=[["Pay", "Term"]])
    s = m["summary"]
    assert s["span_precision"] == 0.5 and s["span_recall"] == 1.0 and s["hallucination_rate"] == 0.5
    assert m["per_label"]["Pay"]["predicted"] == 2 and m["counts"]["unlocated_predictions"] == 2


def test_the_curve_point_and_the_one_pass_seqeval_agree_with_the_full_scorer():
    """compare's precision-recall curve rescores at many thresholds with `point_summary`, and seqeval is asked
    for its three figures in one pass: both must give what the full scorer and seqeval's own three calls give."""
    import random

    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.metrics.v1 import precision_recall_fscore_support
    from seqeval.scheme import IOB2

    from toolkit.evaluate.scorer import point_summary

    texts = ["Acute renal failure and mild renal failure were seen in two patients.", "No disease here at all."]
    golds = [[Span(start=0, end=19, label="D"), Span(start=29, end=42, label="D")], []]
    preds = [[Span(start=0, end=19, label="D"), Span(start=24, end=42, label="D")], [Span(start=3, end=10, label="D")]]
    full = score(texts, golds, preds, bootstrap=0)["summary"]
    point = point_summary(texts, golds, preds)
    assert set(point) < set(full) and all(point[k] == full[k] for k in point)
    assert (full["seqeval_precision"], full["seqeval_recall"]) == (round(1 / 3, 4), 0.5)
    rng = random.Random(0)
    tags = ["O", "B-A", "I-A", "B-B", "I-B"]
    y_true = [[rng.choice(tags) for _ in range(40)] for _ in range(10)]
    y_pred = [[rng.choice(tags) for _ in range(40)] for _ in range(10)]
    kwargs = {"mode": "strict", "scheme": IOB2, "zero_division": 0}
    separate = (
        precision_score(y_true, y_pred, **kwargs),
        recall_score(y_true, y_pred, **kwargs),
        f1_score(y_true, y_pred, **kwargs),
    )
    assert (
        precision_recall_fscore_support(y_true, y_pred, average="micro", scheme=IOB2, zero_division=0)[:3] == separate
    )


def test_a_span_without_a_word_is_not_scored_and_is_counted():
    from toolkit.evaluate.scorer import score
    from toolkit.spans.content import drop_contentless, has_content
    from toolkit.spans.decoding import PredictedSpan

    text = "Notice: sixty (60) days. -- ; ..."
    assert has_content(text, 8, 18) and not has_content(text, 23, 24) and not has_content(text, 25, len(text))
    gold = [PredictedSpan(8, 24, "Notice Period", 1.0)]
    dot = PredictedSpan(23, 24, "Notice Period", 0.51)
    preds = [PredictedSpan(8, 24, "Notice Period", 0.9), dot, PredictedSpan(25, 33, "Termination", 0.6)]
    assert drop_contentless(text, preds) == ([preds[0]], 2)
    metrics = score([text], [gold], [preds], bootstrap=0)
    assert metrics["counts"]["spans_without_content"] == 2 and metrics["counts"]["predicted_spans"] == 1
    assert metrics["summary"]["span_precision"] == 1.0


def _reference_seqeval(texts, golds, preds):
    """The seqeval figures as first written: tags over every word of each document."""
    from bisect import bisect_left, bisect_right

    from seqeval.metrics.v1 import precision_recall_fscore_support
    from seqeval.scheme import IOB2

    from toolkit.spans.overlaps import max_disjoint
    from toolkit.spans.words import words

    def tags(text, spans):
        ws = words(text)
        starts, ends = [a for a, _ in ws], [b for _, b in ws]
        out = ["O"] * len(ws)
        for s in [spans[i] for i in max_disjoint(spans)]:
            for n, i in enumerate(range(bisect_right(ends, s.start), bisect_left(starts, s.end))):
                out[i] = ("B-" if n == 0 else "I-") + s.label
        return out

    p, r, f, _ = precision_recall_fscore_support(
        [tags(t, list(g)) for t, g in zip(texts, golds)],
        [tags(t, list(p)) for t, p in zip(texts, preds)],
        average="micro",
        scheme=IOB2,
        zero_division=0,
    )
    return {"seqeval_precision": float(p), "seqeval_recall": float(r), "seqeval_f1": float(f)}


def _random_documents(seed: int, vocabulary: list[str], most_words: int, least_words: int, most_spans: int, width: int):
    """300 random (text, gold, predicted) documents: words of `vocabulary`, spans of labels A and B anywhere."""
    import random

    from toolkit.spans.decoding import PredictedSpan

    rng = random.Random(seed)
    for _ in range(300):
        text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(least_words, most_words)))
        pair = []
        for _ in range(2):
            doc = []
            for _ in range(rng.randint(0, most_spans)):
                a = rng.randint(0, len(text))
                doc.append(PredictedSpan(a, rng.randint(a, min(len(text), a + width)), rng.choice("AB"), 1.0))
            pair.append(doc)
        yield text, *pair


def test_scoring_a_document_by_its_spans_words_gives_what_reading_every_word_gave():
    """The scorer holds the words its spans cover, not a long document's every word: the word indices at the
    spans' ends and the seqeval entities are what the whole word list gave, on random texts and spans."""
    from toolkit.evaluate.scorer import _seqeval, _WordIndex
    from toolkit.spans.words import words

    vocabulary = ["Notice", "sixty", "(60)", "days", ".", "--", "party", "may", "terminate", ";", "x1", " "]
    for text, gold, pred in _random_documents(0, vocabulary, 40, 0, 6, 40):
        ws = words(text)
        ends, starts = [b for _, b in ws], [a for a, _ in ws]
        positions = [s.start for s in gold + pred], [s.end for s in gold + pred]
        idx = _WordIndex(text, *positions)
        assert [idx.first(q) for q in positions[0]] == [sum(e <= q for e in ends) for q in positions[0]]
        assert [idx.last(q) for q in positions[1]] == [sum(a < q for a in starts) - 1 for q in positions[1]]
        assert _seqeval([text], [gold], [pred]) == _reference_seqeval([text], [gold], [pred])


def test_error_analysis_reads_the_words_around_each_pair_as_the_whole_word_list_gave(monkeypatch):
    """Boundary errors count and quote the words near each pair of spans, not a long document's every word:
    the verdicts are those of the whole word list (planted back in as the reference), on random documents."""
    from toolkit.spans import error_analysis
    from toolkit.spans.words import words

    vocabulary = ["hereditary", "breast", "cancer", ".", "(", "BRCA1", ")", "the", "x-ray", "  ", "\n"]
    cases = list(_random_documents(1, vocabulary, 30, 1, 5, 30))
    local = [error_analysis.classify_document(*case) for case in cases]
    monkeypatch.setattr(error_analysis, "words_around", lambda text, a, b: words(text))
    assert local == [error_analysis.classify_document(*case) for case in cases]
