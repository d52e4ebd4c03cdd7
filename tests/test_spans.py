from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from toolkit.data.schema import Span
from toolkit.spans.overlaps import (
    flat_loss,
    max_disjoint,
    overlap_counts,
    overlap_kind,
    overlapping_pairs,
    per_label_loss,
    split_offsets,
)


def S(a, b, label="A"):
    return Span(start=a, end=b, label=label)


def test_overlap_kinds():
    assert overlap_kind(S(0, 5), S(5, 9)) is None  # touching is not overlapping (end exclusive)
    assert overlap_kind(S(0, 5), S(0, 5)) == "duplicate"
    assert overlap_kind(S(0, 5), S(0, 5, "B")) == "identical_extent"
    assert overlap_kind(S(0, 10), S(2, 5, "B")) == "nested"
    assert overlap_kind(S(0, 6), S(4, 9)) == "crossing"


def test_counts_and_losses_on_a_hand_built_document():
    spans = [
        S(0, 100, "Termination"),
        S(40, 60, "Notice Period"),
        S(0, 100, "Renewal"),
        S(90, 120, "Termination"),
        S(200, 210),
    ]
    counts = overlap_counts(spans)
    assert counts["nested"] == 2  # notice inside both clauses
    assert counts["identical_extent"] == 1
    assert counts["crossing"] == 2  # (0,100) x (90,120), twice
    assert counts["spans_overlapping"] == 4
    assert flat_loss(spans) == 2  # keep (40,60), (90,120), (200,210)
    assert per_label_loss(spans) == 1  # only the two Termination spans collide


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8)), max_size=9))
def test_max_disjoint_is_optimal(raw):
    spans = [S(a, a + n) for a, n in raw]
    kept = max_disjoint(spans)
    assert all(overlap_kind(spans[i], spans[j]) is None for i, j in combinations(kept, 2))
    best = 0
    for r in range(len(spans) + 1):
        for subset in combinations(range(len(spans)), r):
            if all(overlap_kind(spans[i], spans[j]) is None for i, j in combinations(subset, 2)):
                best = max(best, r)
    assert len(kept) == best


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8)), max_size=12))
def test_sweep_finds_every_overlapping_pair(raw):
    spans = [S(a, a + n) for a, n in raw]
    brute = {(i, j) for i, j in combinations(range(len(spans)), 2) if overlap_kind(spans[i], spans[j])}
    assert {(i, j) for i, j, _ in overlapping_pairs(spans)} == brute


def test_split_offsets_cuts_inside_tokens_only():
    assert split_offsets([(0, 10), (11, 15)], {0, 4, 10, 13}) == [(0, 4), (4, 10), (11, 13), (13, 15)]
