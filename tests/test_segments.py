"""The clause segmenter on contract layouts, and the ceiling it sets for segment models."""

from toolkit.spans.segments import boundary_ceiling, segment_text, segments_covering

CONTRACT = (
    "ARTICLE 7. GOVERNING LAW\n"
    "7.1 This Agreement is governed by the laws of the State of New York. Each party submits to its courts.\n"
    "\n"
    "7.2 Neither party may assign this Agreement without consent; provided that Acme Inc. may assign it to an "
    "affiliate:\n"
    "   (a) on a merger;  (b) on a sale of assets, e.g. a division.\n"
    "Section 8.   Term  12.2 Renewal follows U.S. practice."
)


def _pieces(text):
    return [text[a:b] for a, b in segment_text(text)]


def test_lines_sentences_and_items_become_segments():
    assert _pieces(CONTRACT) == [
        "ARTICLE 7.",
        "GOVERNING LAW",
        "7.1",
        "This Agreement is governed by the laws of the State of New York.",
        "Each party submits to its courts.",
        "7.2",
        "Neither party may assign this Agreement without consent;",
        "provided that Acme Inc. may assign it to an affiliate:",
        "(a)",
        "on a merger;",
        "(b)",
        "on a sale of assets, e.g. a division.",
        "Section 8.",
        "Term",
        "12.2",
        "Renewal follows U.S. practice.",
    ]


def test_segments_are_stripped_ordered_and_index_the_text():
    segments = segment_text(CONTRACT)
    assert all(a < b for a, b in segments) and segments == sorted(segments)
    assert all(CONTRACT[a:b] == CONTRACT[a:b].strip() for a, b in segments)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(segments, segments[1:]))
    assert segment_text("") == [] and segment_text("  \n\n ") == []
    initials = "Signed by John A. Smith. See Schedule A. Then more."
    assert _pieces(initials) == ["Signed by John A. Smith.", "See Schedule A.", "Then more."]
    prose = "No split in 3.5 percent or No. 4 here"
    assert segment_text(prose) == [(0, len(prose))]


def test_segments_covering_a_span():
    segments = segment_text(CONTRACT)
    start = CONTRACT.index("Neither")
    end = CONTRACT.index("affiliate:") + len("affiliate:")
    first, last = segments_covering(segments, start, end)
    assert CONTRACT[segments[first][0] : segments[last][1]].startswith("Neither") and last == first + 1
    assert segments_covering(segments, len(CONTRACT) + 5, len(CONTRACT) + 9) is None


def test_boundary_ceiling_per_label():
    law = CONTRACT.index("This Agreement is governed")
    law_end = CONTRACT.index("New York.") + len("New York.")
    inside = CONTRACT.index("the laws of")  # starts inside a segment, ends on one: 6 of its 11 words
    spans = [[(law, law_end, "Law"), (inside, law_end, "Law"), (law, law_end - 1, "Short")]]
    ceiling = boundary_ceiling([CONTRACT], spans)
    assert ceiling["Law"] == {"spans": 2, "both_ends": 0.5, "end": 1.0, "jaccard_05": 1.0}
    assert ceiling["Short"]["both_ends"] == 0.0 and ceiling["Short"]["jaccard_05"] == 1.0
    assert ceiling["__all__"]["spans"] == 3


def test_segments_of_a_run_of_lines_are_the_whole_texts_without_copying_it():
    text = "First line. Second sentence.\n(a) An item; and\n\n  Section 4.2 Notice.\nLast"
    lines = [0, text.index("(a)"), text.index("\n\n") + 1, len(text)]
    for lo, hi in zip(lines, lines[1:]):
        assert segment_text(text, lo, hi) == [(a + lo, b + lo) for a, b in segment_text(text[lo:hi])]


def test_a_segment_longer_than_the_bound_is_split_and_counted():
    import base64
    import random

    from toolkit.spans.segments import MAX_SEGMENT_CHARS, count_split_segments

    b64 = base64.b64encode(random.Random(0).randbytes(19_000)).decode()  # 25,336 characters, no whitespace
    text = f"Intro.\n{b64}\nOutro."
    tally: dict = {}
    segments = segment_text(text, tally=tally)
    assert segments[0] == (0, 6) and segments[-1] == (len(text) - 6, len(text))
    pieces = segments[1:-1]
    assert [b - a for a, b in pieces] == [MAX_SEGMENT_CHARS, MAX_SEGMENT_CHARS, len(b64) - 2 * MAX_SEGMENT_CHARS]
    assert "".join(text[a:b] for a, b in pieces) == b64
    assert tally == {"segments_split": 1} and count_split_segments(text) == 1
    # With words, at the last whitespace in reach: no word is cut.
    words = "notice " * 3_000
    pieces = segment_text(words)
    assert len(pieces) == 3 and all(words[a:b].split() == ["notice"] * ((b - a + 1) // 7) for a, b in pieces)
    assert all(b - a <= MAX_SEGMENT_CHARS for a, b in pieces)
    assert count_split_segments("Short. Text.\n" * 2_000) == 0
