"""A long document read in bounded memory (toolkit.spans.streaming) gives what the whole-document path
gives: the same windows, the same stitched scores, the same spans. Tiny groups and pieces force every seam."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny import sample_texts

from toolkit.models.pretrained import default_decoder, default_encoder, load_tokenizer
from toolkit.spans.decoding import decode_documents
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.streaming import count_tokens, decode_stream, groups_of, stream_windows
from toolkit.spans.windows import make_windows

# The sample documents one after another, cut to 24k characters: dozens of windows and seams, read in seconds.
PART = "\n\n".join(sample_texts())[:24_000]


def _same_windows(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.doc, x.input_ids, x.offsets) == (y.doc, y.input_ids, y.offsets)
        # Word ids count from each piece's base: which tokens share a word is what decoding reads.
        same = [p is not None and p == q for p, q in zip(x.word_ids, x.word_ids[1:])]
        assert same == [p is not None and p == q for p, q in zip(y.word_ids, y.word_ids[1:])]
        assert [w is None for w in x.word_ids] == [w is None for w in y.word_ids]


@pytest.mark.parametrize(
    ("name", "max_length", "stride"),
    [
        ("encoder", 128, 32),
        ("decoder", 24, 6),
        pytest.param("encoder", 24, 6, marks=pytest.mark.slow),
        pytest.param("encoder", 512, 0, marks=pytest.mark.slow),
        pytest.param("decoder", 128, 32, marks=pytest.mark.slow),
        pytest.param("decoder", 512, 0, marks=pytest.mark.slow),
    ],
)
def test_streamed_windows_are_the_tokenizers_overflow_windows(name, max_length, stride):
    tokenizer = load_tokenizer(default_encoder() if name == "encoder" else default_decoder())
    for text in (PART, "", "   \n ", "one"):
        expected = make_windows(tokenizer, [text], max_length, stride)
        _same_windows(expected, list(stream_windows(tokenizer, text, max_length, stride, chunk_chars=301)))
    assert count_tokens(tokenizer, PART, 301) == len(tokenizer(PART, add_special_tokens=False)["input_ids"])


def _logits(windows, outputs: int, seed: int, inside_bias: float) -> list[np.ndarray]:
    """Scores that hold many spans, many long ones, and ties in no place: random, with I- tags favoured."""
    rng = np.random.default_rng(seed)
    out = []
    for w in windows:
        x = rng.normal(size=(len(w.input_ids), outputs))
        x[:, 2 :: 3 if outputs % 3 == 0 else 2] += inside_bias
        out.append(x)
    return out


@pytest.mark.parametrize("multi_label", [False, True])
@pytest.mark.parametrize("decoding", ["argmax", "viterbi"])
@pytest.mark.parametrize("group", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)])
def test_streamed_spans_equal_the_whole_documents(multi_label, decoding, group):
    tokenizer = load_tokenizer(default_encoder())
    space = LabelSpace(("Parties", "Term", "Notice"), multi_label=multi_label, decoding=decoding)
    outputs = len(space.output_names())
    windows = make_windows(tokenizer, [PART], 64, 16)
    for seed, bias in [(0, 0.0), (1, 1.0), (2, 3.0)]:
        logits = _logits(windows, outputs, seed, bias)
        expected = decode_documents(
            [PART], [0] * len(windows), [w.offsets for w in windows], [w.word_ids for w in windows], logits, space
        )[0]
        pairs = list(zip(windows, logits))
        groups = [([w for w, _ in g], [x for _, x in g]) for g in groups_of(pairs, group)]
        spans, forced = decode_stream(PART, groups, space)
        assert forced == 0
        assert spans == expected and expected


def test_a_span_longer_than_the_pending_bound_is_cut_and_counted():
    tokenizer = load_tokenizer(default_encoder())
    space = LabelSpace(("Term",), multi_label=False)
    windows = make_windows(tokenizer, [PART], 64, 16)
    logits = [np.tile([0.0, 0.0, 5.0], (len(w.input_ids), 1)) for w in windows]  # one span over everything
    groups = [([w], [x]) for w, x in zip(windows, logits)]
    whole, forced = decode_stream(PART, groups, space)
    assert forced == 0 and len(whole) == 1
    cut, forced = decode_stream(PART, groups, space, max_pending_tokens=100)
    assert forced > 0 and len(cut) == forced + 1
    assert cut[0].start == whole[0].start and cut[-1].end == whole[0].end


def _untrained(tiny_bert, cls, **meta):
    """A predictor over the tiny BERT with a freshly initialised head: no training, so no fixture run. Its
    scores are arbitrary but fixed, which is all an equality of two reading paths needs."""
    import torch
    from transformers import AutoModelForTokenClassification

    from toolkit.models.pretrained import load_tokenizer
    from toolkit.rundir import model_meta

    meta = model_meta(max_length=64, stride=16, **meta)
    if cls.__name__ == "Tagger":
        outputs = 3 * len(meta.labels) if meta.multi_label else 2 * len(meta.labels) + 1
    else:  # a segment model: one logit per label
        outputs = len(meta.labels)
    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(tiny_bert, num_labels=outputs)
    return cls(model, load_tokenizer(str(tiny_bert)), meta)


def test_a_tagger_reads_long_documents_in_groups_with_the_same_answer(tiny_bert):
    from toolkit.infer.tagger import Tagger

    tagger = _untrained(tiny_bert, Tagger, labels=["Parties", "Term"], multi_label=True)
    texts = [PART, sample_texts()[0], PART[:8_000]]
    # One window per forward pass: under PyTorch a window's logits move in the last bits with its batch's
    # padding, and groups batch other neighbours than the whole documents do.
    whole = tagger.predict(texts, batch_size=1)
    assert any(whole)
    tagger.long_document_chars, tagger.group_windows, tagger.chunk_chars = 0, 2, 257
    streamed = tagger.predict(texts, batch_size=1)
    assert streamed == whole
    assert tagger.last_report["windows"] > len(texts)


def test_segment_inputs_stream_as_the_whole_document_makes_them():
    import base64
    import random

    from toolkit.spans.segment_streaming import stream_segment_windows
    from toolkit.spans.segment_windows import make_segment_windows
    from toolkit.spans.segments import segment_text

    tokenizer = load_tokenizer(default_encoder())
    # Also one segment of 12,000 characters (no sentence end, no line break) and base64 (no whitespace at all):
    # only each segment's first tokens and their context are buffered, not the segment whole.
    giant = "termination notice period " * 460
    b64 = base64.b64encode(random.Random(0).randbytes(6_000)).decode()
    for text in (PART, PART.replace("\n", " ")[:12_000], "", "  ", giant, f"Intro. {b64} Outro.\nNext line."):
        for tokens, context in [(96, 16), (8, 3), (4, 0)]:
            expected, _ = make_segment_windows(tokenizer, [text], [segment_text(text)], tokens, context)
            _same_windows(expected, list(stream_segment_windows(tokenizer, text, tokens, context, chunk_chars=301)))


@pytest.mark.parametrize("encoder_input", ["windows", "segments"])
def test_a_segment_model_reads_long_documents_in_groups_with_the_same_answer(tiny_bert, encoder_input):
    from toolkit.infer.segment_classifier import SegmentClassifier

    inputs = {"segment_tokens": 12, "context_tokens": 4} if encoder_input == "segments" else {}
    classifier = _untrained(tiny_bert, SegmentClassifier, task="segment_classification", labels=["A", "B"], **inputs)
    texts = [PART, sample_texts()[0], PART.replace("\n", " ")[:12_000]]
    # A threshold low enough that runs span many segments, and every seam cuts through some; one window per
    # forward pass, as in the tagger's test.
    classifier.thresholds = [0.05] * len(classifier.labels)
    classifier.long_document_chars = 10**12
    whole = classifier.predict(texts, batch_size=1)
    assert any(whole)
    whole_segments, whole_encoder = classifier.score_encoder(texts, batch_size=1)
    classifier.long_document_chars, classifier.group_windows, classifier.chunk_chars = 0, 3, 257
    assert classifier.predict(texts, batch_size=1) == whole
    # What training-side scoring reads (the encoder alone, for the combination and held-out thresholds), streamed
    # too: the same segments and logits (NaN where no token fell in a segment, as the whole path gives).
    segments, encoder = classifier.score_encoder(texts, batch_size=1)
    assert segments == whole_segments and classifier.last_report["windows"] > len(texts)
    for a, b in zip(encoder, whole_encoder):
        np.testing.assert_array_equal(a, b)


def test_a_segment_model_with_a_linear_prior_and_clause_starts_streams_the_same(tiny_bert, tmp_path):
    """The prior reads each segment with its neighbours' words, so the segments either side of every block
    must reach it; clause starts split runs."""
    from conftest import REPO

    from toolkit.infer.segment_classifier import SegmentClassifier
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.max_train_docs=12",
        "data.max_dev_docs=2",
        "train.epochs=1",
        "eval.bootstrap=0",
        "segments.linear_prior=true",
        "segments.clause_starts=true",
        "segments.folds=3",
        "segments.thresholds=held_out",
        "segments.held_out_share=0.5",
        "segments.combination=fitted",
    ]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "prior")
    classifier = SegmentClassifier.load(result.run_dir)
    assert classifier.prior is not None and classifier.prior.starts is not None
    texts = [PART, PART.replace("\n", " ")[:12_000]]
    classifier.thresholds = [0.2] * len(classifier.labels)  # low: runs over many segments, cut by every seam
    classifier.long_document_chars = 10**12
    whole = classifier.predict(texts, batch_size=1)
    assert any(whole)
    classifier.long_document_chars, classifier.group_windows, classifier.chunk_chars = 0, 2, 301
    assert classifier.predict(texts, batch_size=1) == whole
    # What `toolkit eval` sweeps thresholds over: every segment's scores, streamed as the whole path gives them.
    classifier.long_document_chars = 10**12
    whole_scores = classifier.score(texts, batch_size=1)
    classifier.long_document_chars = 0
    streamed_scores = classifier.score(texts, batch_size=1)
    assert streamed_scores.segments == whole_scores.segments
    for a, b in zip(streamed_scores.probabilities, whole_scores.probabilities):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(streamed_scores.starts, whole_scores.starts):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("doc_id", "text", "source"),
    [
        ("a1", 'Plain "quoted" text \\ with a "meta": key in it.', "in.jsonl"),
        ("é", "Ünïcode — text ✓", "dir/naïve.txt"),
        ("x", "lone \ud800 surrogate", "bad\udcff.txt"),
        ("", "", "empty.txt"),
    ],
)
def test_a_prediction_row_is_written_a_span_at_a_time_as_encode_row_writes_it(doc_id, text, source):
    from toolkit.data.documents import InputDocument
    from toolkit.infer.rows import PredictionRow, encode_row
    from toolkit.spans.decoding import PredictedSpan

    doc = InputDocument(doc_id, text, source, {"line": 3, "meta": {"nested": '"meta": 1'}})
    spans = [PredictedSpan(0, 3, "Parties", 0.51234), PredictedSpan(1, len(text), "Term", 1.0)] if text else []
    expected = encode_row(
        {
            "kind": "prediction",
            "id": doc_id,
            "text": text,
            "spans": [s.to_dict(text) for s in spans],
            "meta": {"source": source, **doc.meta, "model": "m"},
        }
    )
    row = PredictionRow(doc, spans, "m")
    assert str(row) == expected
    assert row.key == (source, doc_id) and row.meta == {"source": source, **doc.meta, "model": "m"}
    # Escaped a slice at a time, as OUT's line is written: the same characters.
    from toolkit.infer import rows

    original = rows.ESCAPE_CHARS
    try:
        rows.ESCAPE_CHARS = 3
        assert "".join(rows.PredictionRow(doc, spans, "m").pieces()) == expected
    finally:
        rows.ESCAPE_CHARS = original


def test_a_row_that_fails_part_way_leaves_out_no_torn_line(tmp_path):
    from toolkit.data.documents import InputDocument
    from toolkit.infer.collection import PredictionSink
    from toolkit.infer.rows import PredictionRow
    from toolkit.spans.decoding import PredictedSpan

    class Broken(PredictedSpan):
        __slots__ = ()

        def to_dict(self, text=None):
            raise ValueError("cannot write this span")

    sink = PredictionSink(tmp_path / "out.jsonl")
    good = InputDocument("a", "Either party may terminate.", "in.txt")
    sink.write(
        PredictionRow(InputDocument("b", "Either party may terminate.", "in.txt"), [Broken(0, 6, "T", 0.5)], "m")
    )
    sink.write(PredictionRow(good, [PredictedSpan(0, 6, "T", 0.5)], "m"))
    sink.close()
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a"]
    assert sink.failures[0]["id"] == "b" and "cannot write this span" in sink.failures[0]["reason"]


def test_a_prediction_row_leaves_out_spans_without_a_word_and_says_how_many():
    from toolkit.data.documents import InputDocument
    from toolkit.infer.rows import PredictionRow
    from toolkit.spans.decoding import PredictedSpan

    text = "Either party may terminate. ."
    row = json.loads(
        str(
            PredictionRow(
                InputDocument("d", text, "in.txt"),
                [PredictedSpan(0, 27, "Termination", 0.9), PredictedSpan(28, 29, "Notice Period", 0.5)],
                "m",
            )
        )
    )
    assert [s["text"] for s in row["spans"]] == ["Either party may terminate."]
    assert row["meta"]["spans_without_content"] == 1


def test_a_segment_models_row_says_how_many_segments_were_split(tiny_bert):
    import base64
    import random

    from toolkit.data.documents import InputDocument
    from toolkit.infer.rows import predict_rows
    from toolkit.infer.segment_classifier import SegmentClassifier

    classifier = _untrained(tiny_bert, SegmentClassifier, task="segment_classification", labels=["A", "B"])
    b64 = base64.b64encode(random.Random(0).randbytes(19_000)).decode()
    documents = [
        InputDocument("short", PART[:2_000], "in.jsonl"),
        InputDocument("b64", f"Attachment:\n{b64}", "in.jsonl"),
    ]
    rows = [json.loads(str(row)) for row in predict_rows(classifier, documents, "m", 4)]
    assert "segments_split_at_max_length" not in rows[0]["meta"]
    assert rows[1]["meta"]["segments_split_at_max_length"] == 1
