import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkit.spans.tagging import decode_tags, encode_tags, guess_scheme


def test_iob2_and_iob1_decode():
    tags = ["B-D", "I-D", "O", "B-C", "B-C", "I-C"]
    assert decode_tags(tags, "iob2") == ([("D", 0, 2), ("C", 3, 4), ("C", 4, 6)], [])
    iob1 = ["I-D", "I-D", "O", "I-C", "B-C", "I-C"]
    chunks, issues = decode_tags(iob1, "iob1")
    assert chunks == [("D", 0, 2), ("C", 3, 4), ("C", 4, 6)] and issues == []
    chunks2, issues2 = decode_tags(iob1, "iob2")  # same chunks, but every repair is reported
    assert chunks2 == chunks and [i for i, _ in issues2] == [0, 3]


def test_bioes_and_bilou_decode_with_repairs():
    assert decode_tags(["S-D", "B-C", "I-C", "E-C", "O"], "bioes") == ([("D", 0, 1), ("C", 1, 4)], [])
    assert decode_tags(["U-D", "B-C", "L-C"], "bilou") == ([("D", 0, 1), ("C", 1, 3)], [])
    chunks, issues = decode_tags(["B-C", "I-C", "O"], "bioes")
    assert chunks == [("C", 0, 2)] and issues and "no E-" in issues[0][1]
    chunks, issues = decode_tags(["X-C", "O"], "bioes")
    assert chunks == [] and issues[0][0] == 0


def test_guess_scheme():
    assert guess_scheme(["O", "B-A", "I-A"]) == "iob2"
    assert guess_scheme(["S-A", "E-A"]) == "bioes"
    assert guess_scheme(["U-A", "L-A"]) == "bilou"


def test_encode_rejects_overlap():
    with pytest.raises(ValueError):
        encode_tags([("A", 0, 3), ("B", 2, 4)], 5, "iob2")


@st.composite
def chunkings(draw):
    n = draw(st.integers(1, 25))
    chunks, pos = [], 0
    while pos < n:
        gap = draw(st.integers(0, 3))
        length = draw(st.integers(1, 4))
        if pos + gap + length > n:
            break
        chunks.append((draw(st.sampled_from(["A", "B"])), pos + gap, pos + gap + length))
        pos += gap + length
    return chunks, n


@given(chunkings(), st.sampled_from(["iob1", "iob2", "bioes", "bilou"]))
def test_encode_decode_round_trip(chunking, scheme):
    chunks, n = chunking
    decoded, issues = decode_tags(encode_tags(chunks, n, scheme), scheme)
    assert decoded == chunks and issues == []
