"""span_generation's completion formats (text, anchors, segments), their grammars and the window selector:
pure functions on the project's own text, no model."""

import pytest

from toolkit.data.schema import Span
from toolkit.infer.completions import (
    CompletionSpec,
    anchor_text,
    build_completion,
    document_spans,
    prompt_body,
    read_completion,
    window_view,
)
from toolkit.infer.constrained import AnchorGrammar, SegmentGrammar
from toolkit.infer.selector import fit_window_selector, recall_threshold, spans_reachable
from toolkit.spans.segments import segment_text
from toolkit.spans.windows import TextWindow

DOC = (
    "1. Governing Law. This Agreement shall be governed by the laws of the State of New York without regard to "
    "conflicts.\n"
    "2. Assignment. Neither party may assign this Agreement without consent.\n"
    "3. Notices. All notices go to the addresses above."
)
LABELS = ["Governing Law", "Anti-Assignment"]
GOV = Span(start=DOC.index("This Agreement"), end=DOC.index("conflicts.") + len("conflicts."), label="Governing Law")
ASSIGN = Span(start=DOC.index("Neither"), end=DOC.index("consent.") + len("consent."), label="Anti-Assignment")
SEGMENTS = segment_text(DOC)


def whole(spec):
    return window_view(spec, 0, DOC, 0, len(DOC), SEGMENTS)


@pytest.mark.parametrize("target", ["text", "anchors", "segments"])
def test_each_format_round_trips_the_gold_spans(target):
    spec = CompletionSpec(target)
    view = whole(spec)
    completion = build_completion(spec, view, [GOV, ASSIGN], LABELS, SEGMENTS)
    reading = read_completion(spec, view, completion, LABELS)
    spans = document_spans(spec, [view], [reading], LABELS, SEGMENTS)
    assert [(s.start, s.end, s.label) for s in spans] == [
        (GOV.start, GOV.end, GOV.label),
        (ASSIGN.start, ASSIGN.end, ASSIGN.label),
    ]
    assert not reading.hallucinated and not reading.malformed


def test_anchor_completions_are_short_and_the_end_anchor_is_the_nearest_after_the_start():
    assert anchor_text("a b c d e f g h i j", 2) == "a b ... i j"
    assert anchor_text("a b c d", 2) == "a b c d"  # short spans are written whole
    spec = CompletionSpec("anchors", anchor_words=4)
    completion = build_completion(spec, whole(spec), [GOV], LABELS)
    assert completion == "Governing Law: This Agreement shall be ... without regard to conflicts.\n"
    # "this Agreement" occurs twice; the end anchor "without consent." must follow the start anchor.
    reading = read_completion(spec, whole(spec), "Anti-Assignment: Neither party ... without consent.\n", LABELS)
    assert [(s.start, s.end) for s in reading.spans] == [(ASSIGN.start, ASSIGN.end)]
    invented = read_completion(
        spec, whole(spec), "Governing Law: The laws of Mars ... apply here.\nGarbage line\n", LABELS
    )
    assert not invented.spans and len(invented.hallucinated) == 1 and invented.malformed == ["Garbage line"]


def test_segment_prompt_numbers_the_window_segments_and_the_completion_names_runs():
    spec = CompletionSpec("segments")
    view = whole(spec)
    body = prompt_body(spec, view, DOC, LABELS)
    assert "[3] This Agreement shall be governed" in body and "[6] Neither party" in body
    # A clause over two consecutive segments is one line, a range.
    both = Span(start=DOC.index("Governing Law."), end=GOV.end, label="Governing Law")
    assert build_completion(spec, view, [both], LABELS, SEGMENTS) == "2-3: Governing Law\n"
    assert build_completion(spec, view, [], LABELS, SEGMENTS) == "none\n"
    reading = read_completion(
        spec, view, "2-3: Governing Law\n12: Anti-Assignment\n3-2: Governing Law\nsegment six\n4: Warranty\n", LABELS
    )
    assert reading.votes == [(1, "Governing Law"), (2, "Governing Law")]
    assert len(reading.hallucinated) == 2  # segment 12 does not exist; 3-2 runs backwards
    assert reading.malformed == ["segment six"] and reading.unknown_labels == ["4: Warranty"]


def test_a_segment_read_by_two_windows_needs_half_of_them():
    spec = CompletionSpec("segments")
    cut = DOC.index("2. Assignment")
    first = window_view(spec, 0, DOC, 0, cut + 20, SEGMENTS)  # holds segments 0-4 and the start of segment 5
    second = window_view(spec, 0, DOC, DOC.index("Assignment."), len(DOC), SEGMENTS)  # segments 4-8
    assert first.segment_ids[-1] == second.segment_ids[1] == 5
    assert first.segments[-1] == (SEGMENTS[5][0], cut + 20)  # clipped to the window
    says = read_completion(spec, first, f"{len(first.segments)}: Anti-Assignment\n", LABELS)
    silent = read_completion(spec, second, "none\n", LABELS)
    spans = document_spans(spec, [first, second], [says, silent], LABELS, SEGMENTS)
    assert [(s.start, s.end, s.label, s.score) for s in spans] == [(ASSIGN.start, ASSIGN.end, "Anti-Assignment", 0.5)]
    # A segment only the silent window holds stays negative.
    other = read_completion(spec, second, "none\n", LABELS)
    assert document_spans(spec, [second], [other], LABELS, SEGMENTS) == []


def test_segment_grammar_allows_only_existing_segments_and_known_labels():
    g = SegmentGrammar(12, LABELS)
    for ok in (
        "",
        "1",
        "1-",
        "1-1",
        "1-12",
        "12: Gov",
        "3-5: Governing Law\n",
        "3-5: Governing Law\n7: Anti",
        "no",
        "none\n",
    ):
        assert g.valid_prefix(ok), ok
    for bad in (
        "0",
        "13",
        "5-3",
        "5-13: ",
        "3: Warranty",
        "3 Governing",
        "3: Governing Law\n4",
        "x",
        "3: Governing Law\nnone!",
    ):
        if bad == "3: Governing Law\n4":
            assert g.valid_prefix(bad)  # 4 can still become a line
            continue
        assert not g.valid_prefix(bad), bad
    assert SegmentGrammar(3, LABELS).valid_prefix("3") and not SegmentGrammar(3, LABELS).valid_prefix("30")


def test_anchor_grammar_keeps_both_anchors_in_the_window():
    g = AnchorGrammar("We stopped warfarin and started aspirin.", ["Chemical"])
    assert g.valid_prefix("Chemical: We stopped ... started aspirin.\n")
    assert g.valid_prefix("Chemical: We stopped ..") and g.valid_prefix("Chemical: We stopped ... star")
    assert not g.valid_prefix("Chemical: We stopped ... ibuprofen") and not g.valid_prefix("Chemical: ibuprofen")
    assert not g.valid_prefix("Chemical: We stopped ... \n")  # an empty end anchor is no line


def test_selector_threshold_keeps_the_asked_recall_and_reports_what_it_costs():
    assert recall_threshold([0.9, 0.8, 0.2, 0.1], [True, True, False, True], 0.66) == 0.8
    assert recall_threshold([0.9, 0.8, 0.2, 0.1], [True, True, False, True], 0.67) == 0.1  # 2 of 3 is short of 0.67
    clause = "This Agreement shall be governed by the laws of the State of {}."
    filler = "The parties met on the {} day and discussed the schedule of deliveries."
    texts = [clause.format(s) for s in ["Ohio", "Texas", "Utah", "Iowa", "Maine", "Idaho"]] + [
        filler.format(d) for d in ["first", "second", "third", "fourth", "fifth", "sixth"]
    ]
    fit = fit_window_selector(texts, [True] * 6 + [False] * 6, 1.0, seed=0)
    assert fit.report["fitted"] and fit.report["train_cv_window_recall"] == 1.0
    assert all(fit.cross_validated_flags[:6])
    windows = [TextWindow(0, 0, 50), TextWindow(0, 40, 100)]
    spans = [[Span(start=10, end=30, label="A"), Span(start=45, end=60, label="A")]]
    assert spans_reachable(windows, [False, True], spans, whole=True) == (1, 2)
    assert spans_reachable(windows, [True, False], spans, whole=False) == (2, 2)  # the second overlaps the first window
    few = fit_window_selector(["a b", "c d"], [True, False], 0.9, seed=0)
    assert not few.report["fitted"] and all(few.cross_validated_flags)
