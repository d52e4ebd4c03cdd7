"""`toolkit compare`'s paired test reads the headline the clause records use (Jaccard F1) on what the scorer scored."""

from pathlib import Path

import pytest

from toolkit.data.schema import Span
from toolkit.evaluate.compare import System, summarize
from toolkit.spans.decoding import PredictedSpan


def _system(name: str, predictions: list) -> System:
    return System(
        name, Path(f"runs/{name}"), "segment_classification", predictions, [[]] * len(predictions), 1.0, None, ""
    )


def test_the_paired_jaccard_f1_difference_is_the_difference_of_the_scored_systems():
    texts = [
        "Either party may terminate on thirty days notice. ; This Agreement is governed by Ohio law.",
        "The licensee shall not assign this license. Fees are due monthly.",
    ]
    golds = [
        [Span(start=0, end=49, label="Termination"), Span(start=52, end=len(texts[0]), label="Governing Law")],
        [Span(start=0, end=43, label="Anti-Assignment")],
    ]
    # a: both clauses of the first document and a span of ';' alone, which the scorer leaves out;
    # b: the first clause only, and the second document's clause
    a = [
        [
            PredictedSpan(0, 49, "Termination", 0.9),
            PredictedSpan(50, 51, "Termination", 0.8),
            PredictedSpan(52, len(texts[0]), "Governing Law", 0.7),
        ],
        [],
    ]
    b = [[PredictedSpan(0, 49, "Termination", 0.9)], [PredictedSpan(0, 43, "Anti-Assignment", 0.9)]]
    summary = summarize([_system("a", a), _system("b", b)], texts, golds, [3], bootstrap=200)
    systems = summary["systems"]
    assert systems["a"]["summary"]["jaccard_precision"] == 1.0  # the ';' span was not scored
    paired = summary["paired_bootstrap"]["a - b"]
    for key in ("jaccard_f1", "jaccard_precision", "jaccard_recall"):
        expected = systems["a"]["summary"][key] - systems["b"]["summary"][key]
        assert paired[key]["difference"] == pytest.approx(expected, abs=1e-4)
        low, high = paired[key]["ci95"]
        assert low <= paired[key]["difference"] <= high
    assert paired["jaccard_f1"]["difference"] == pytest.approx(0.0, abs=1e-4)  # 2 of 3 found, no false positive, each
