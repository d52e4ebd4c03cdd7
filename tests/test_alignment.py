"""Encode -> decode is the identity for spans on token boundaries, across window borders too."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.data.schema import Span
from toolkit.models.pretrained import load_tokenizer
from toolkit.spans.alignment import IGNORE, flat_targets, multi_label_targets, representable
from toolkit.spans.decoding import decode_documents
from toolkit.spans.label_space import LabelSpace, flat_tags
from toolkit.spans.windows import fitted_max_length, make_fitted_windows, make_windows

VOCAB = [
    "the",
    "patient",
    "was",
    "given",
    "metformin",
    "for",
    "type",
    "diabetes",
    "either",
    "party",
    "may",
    "terminate",
    "agreement",
    "notice",
    "days",
    "written",
    "heart",
    "failure",
    "warfarin",
    "stopped",
]
LABELS = ["A", "B"]


@st.composite
def documents(draw, overlapping=False):
    words = draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=70))
    seps = [draw(st.sampled_from([" ", "  ", "\n", ", "])) for _ in words[1:]]
    text, starts = "", []
    for i, w in enumerate(words):
        if i:
            text += seps[i - 1]
        starts.append(len(text))
        text += w
    spans, pos = [], 0
    while pos < len(words):
        gap, length = draw(st.integers(0, 4)), draw(st.integers(1, 6))
        a, b = pos + gap, min(len(words), pos + gap + length)
        if a >= len(words):
            break
        spans.append(Span(start=starts[a], end=starts[b - 1] + len(words[b - 1]), label=draw(st.sampled_from(LABELS))))
        pos = b if not overlapping else a + draw(st.integers(1, max(1, b - a)))
    return text, spans


def one_hot(rows, width):
    out = np.full((len(rows), width), -10.0)
    for i, t in enumerate(rows):
        out[i, 0 if t == IGNORE else t] = 10.0
    return out


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir):
    return load_tokenizer(str(tiny_tokenizer_dir))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents(), st.booleans())
def test_flat_round_trip_across_windows(tok, doc, label_all):
    text, spans = doc
    tags = flat_tags(LABELS)
    ids = {t: i for i, t in enumerate(tags)}
    windows = make_windows(tok, [text], max_length=16, stride=4)
    logits = [one_hot(flat_targets(w.offsets, w.word_ids, spans, ids, label_all), len(tags)) for w in windows]
    decoded = decode_documents(
        [text],
        [w.doc for w in windows],
        [w.offsets for w in windows],
        [w.word_ids for w in windows],
        logits,
        LabelSpace(tuple(LABELS), False, label_all),
    )
    assert [(s.start, s.end, s.label) for s in decoded[0]] == [(s.start, s.end, s.label) for s in spans]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents(overlapping=True))
def test_multi_label_round_trip_keeps_cross_label_overlaps(tok, doc):
    text, spans = doc
    kept, _ = representable(spans, multi_label=True)
    windows = make_windows(tok, [text], max_length=16, stride=4)
    logits = []
    for w in windows:
        rows = multi_label_targets(w.offsets, w.word_ids, kept, LABELS)
        out = np.full((len(rows), 3 * len(LABELS)), -10.0)
        for i, row in enumerate(rows):
            for k, v in enumerate(row):
                out[i, 3 * k + (0 if v == IGNORE else v)] = 10.0
        logits.append(out)
    decoded = decode_documents(
        [text],
        [w.doc for w in windows],
        [w.offsets for w in windows],
        [w.word_ids for w in windows],
        logits,
        LabelSpace(tuple(LABELS), True, False),
    )
    assert sorted((s.start, s.end, s.label) for s in decoded[0]) == sorted((s.start, s.end, s.label) for s in kept)


def test_windows_cover_long_documents_without_truncation(tok):
    text = " ".join(VOCAB * 10)
    windows = make_windows(tok, [text], max_length=16, stride=4)
    assert len(windows) > 10
    covered = {o for w in windows for o in w.offsets if o[1] > o[0]}
    assert max(b for _, b in covered) == len(text)
    assert all(len(w.input_ids) <= 16 for w in windows)


def test_representable_reports_what_flat_mode_cannot_hold():
    spans = [Span(start=0, end=10, label="A"), Span(start=2, end=5, label="B"), Span(start=2, end=5, label="A")]
    kept, lost = representable(spans, multi_label=False)
    assert len(kept) == 1 and len(lost) == 2
    kept, lost = representable(spans, multi_label=True)
    assert len(kept) == 2 and len(lost) == 1 and lost[0].label == "A"


@given(st.integers(0, 5000), st.integers(0, 3), st.integers(16, 1024), st.integers(0, 128))
def test_fitted_windows_are_the_fewest_and_no_longer_than_needed(content, specials, limit, stride):
    if limit - specials <= stride:
        return
    length = fitted_max_length(content, specials, limit, stride)
    room = length - specials

    def windows(room: int) -> int:
        return 1 if content <= room else 1 + -(-(content - room) // (room - stride))

    assert specials < length <= limit and room > stride
    assert windows(room) == windows(limit - specials)  # as few windows as the limit allows
    if content > limit - specials:  # several windows, none a token longer than that count needs
        assert room - 1 <= stride or windows(room - 1) > windows(room)
    else:
        assert length == limit  # one window, as long as the document (windows are not padded)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(documents(), min_size=1, max_size=4), st.integers(12, 40))
def test_fitted_windows_read_each_document_whole_or_in_the_fewest_windows_and_round_trip(tok, docs, limit):
    texts = [text for text, _ in docs]
    windows = make_fitted_windows(tok, texts, limit, stride=4)
    assert [w.doc for w in windows] == sorted(w.doc for w in windows) and {w.doc for w in windows} == set(
        range(len(texts))
    )
    tags = flat_tags(LABELS)
    ids = {t: i for i, t in enumerate(tags)}
    for d, (text, spans) in enumerate(docs):
        mine = [w for w in windows if w.doc == d]
        content = len(tok(text, add_special_tokens=False)["input_ids"])
        assert len(mine) == len(make_windows(tok, [text], limit, 4))  # the same count as full-length windows
        assert all(len(w.input_ids) <= limit for w in mine)
        logits = [one_hot(flat_targets(w.offsets, w.word_ids, spans, ids, False), len(tags)) for w in mine]
        decoded = decode_documents(
            [text],
            [0] * len(mine),
            [w.offsets for w in mine],
            [w.word_ids for w in mine],
            logits,
            LabelSpace(tuple(LABELS), False, False),
        )
        assert [(s.start, s.end, s.label) for s in decoded[0]] == [(s.start, s.end, s.label) for s in spans]
        if content + tok.num_special_tokens_to_add() <= limit:
            assert len(mine) == 1


def _stitch_reference(windows):
    """The rule written plainly: each character range keeps the scores of the window (then the token) where it
    sits furthest from an edge, the first seen on ties."""
    best = {}
    for w in windows:
        real = [i for i, (a, b) in enumerate(w.offsets) if b > a]
        for i in real:
            margin = min(i - real[0], real[-1] - i)
            if w.offsets[i] not in best or margin > best[w.offsets[i]][0]:
                best[w.offsets[i]] = (margin, w.word_ids[i], w.scores[i])
    keys = sorted(best)
    return keys, [best[k][1] for k in keys], [best[k][2] for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_stitched_windows_keep_each_token_from_its_widest_margin(data):
    from toolkit.spans.decoding import WindowScores, stitch_windows

    tokens = data.draw(st.integers(1, 30))
    spans = [(3 * t, 3 * t + data.draw(st.integers(0, 2))) for t in range(tokens)]  # width 0: a special token
    windows = []
    for k in range(data.draw(st.integers(1, 4))):
        lo = data.draw(st.integers(0, tokens - 1))
        hi = data.draw(st.integers(lo + 1, tokens))
        offsets = [(0, 0), *spans[lo:hi], *spans[lo : lo + data.draw(st.integers(0, 2))], (0, 0)]  # repeats too
        scores = np.random.default_rng(k).random((len(offsets), 3)).astype(np.float32)
        windows.append(WindowScores(offsets, [None, *range(len(offsets) - 2), None], scores))
    keys, word_ids, scores = stitch_windows(windows)
    want_keys, want_word_ids, want_scores = _stitch_reference(windows)
    assert keys == want_keys and word_ids == want_word_ids
    assert np.array_equal(scores, np.array(want_scores).reshape(len(want_keys), 3))
