"""task: segment_classification on a tiny encoder: features, training, saved thresholds, eval, ranking and export."""

import json

import numpy as np
import pytest
from conftest import REPO

from toolkit.data.schema import Span
from toolkit.spans.segment_decoding import NO_SEGMENT, merge_segments, segment_logits, segment_targets, token_segments

SEGMENTS = [(0, 10), (11, 20), (21, 30), (31, 40)]


def test_segment_targets_need_most_of_the_segment_inside_the_span():
    spans = [Span(start=0, end=20, label="A"), Span(start=24, end=40, label="B")]
    # (21, 30) has 6 of 9 characters in B: positive at 0.5, not at 0.8.
    assert segment_targets(SEGMENTS, spans, ["A", "B"], 0.5) == [[1, 0], [1, 0], [0, 1], [0, 1]]
    assert segment_targets(SEGMENTS, spans, ["A", "B"], 0.8) == [[1, 0], [1, 0], [0, 0], [0, 1]]


def test_tokens_map_to_their_segment_and_logits_average_over_windows():
    offsets = [(0, 0), (0, 4), (5, 10), (10, 11), (11, 15), (0, 0)]
    assert token_segments(offsets, SEGMENTS) == [NO_SEGMENT, 0, 0, NO_SEGMENT, 1, NO_SEGMENT]
    ids = [[0, 0, 1], [1, 2]]
    logits = [np.array([[1.0], [3.0], [4.0]]), np.array([[0.0], [5.0]])]
    out = segment_logits(4, 1, ids, logits)
    assert out[0, 0] == 2.0 and out[1, 0] == 2.0 and out[2, 0] == 5.0 and np.isnan(out[3, 0])


def test_consecutive_positive_segments_merge_into_one_span():
    probs = np.array([[0.9, 0.1], [0.7, 0.2], [0.2, 0.6], [0.8, 0.1]])
    spans = merge_segments(SEGMENTS, probs, ["A", "B"], [0.5, 0.5])
    assert spans == [(0, 20, "A", pytest.approx(0.8)), (21, 30, "B", pytest.approx(0.6)), (31, 40, "A", pytest.approx(0.8))]
    assert merge_segments(SEGMENTS, probs, ["A", "B"], [0.95, 0.95]) == []


@pytest.fixture(scope="module")
def tiny_segment_run(tiny_bert, tmp_path_factory):
    from toolkit.config import load_recipe
    from toolkit.tasks import run_recipe

    out = tmp_path_factory.mktemp("segments")
    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={out}",
        "data.max_train_docs=6",
        "data.dev=sample:contracts_train",
        "data.max_dev_docs=6",
        "train.epochs=30",
        "train.learning_rate=3e-3",
        "train.batch_size=6",
        "train.warmup_ratio=0",
        "eval.bootstrap=0",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, out / "demo_segments_mlm")
    return result


def test_a_tiny_segment_model_learns_the_sample_clauses_and_saves_its_thresholds(tiny_segment_run):
    metrics = tiny_segment_run.metrics
    # Sentence-sized clauses are learned; names of parties are phrases inside a sentence, which no
    # segment carries: they are counted as not representable, never dropped silently.
    for label in ("Payment Terms", "Governing Law", "Confidentiality"):
        assert metrics["per_label"][label]["jaccard_f1"] >= 0.8, (label, metrics["per_label"][label])
    assert metrics["per_label"]["Parties"]["predicted"] == 0 and tiny_segment_run.run["spans_not_representable_train"] >= 12
    meta = json.loads((tiny_segment_run.run_dir / "model" / "toolkit.json").read_text())
    assert meta["task"] == "segment_classification" and len(meta["thresholds"]) == len(meta["labels"])
    assert all(0 < t < 1 for t in meta["thresholds"])
    ranking = metrics["ranking"]
    assert 0 < ranking["macro"]["aupr"] <= 1 and set(ranking["per_label"]) <= set(meta["labels"])
    assert tiny_segment_run.run["dev_thresholds"].startswith("cross-fitted")
    plan = json.loads((tiny_segment_run.run_dir / "data_report.json").read_text())
    assert plan["train"]["windows_with_spans"] > 0


def test_eval_and_export_of_a_segment_run_apply_the_saved_thresholds(tiny_segment_run, tmp_path):
    from toolkit.deploy.export import export_run
    from toolkit.evaluate.evaluation import evaluate_run
    from toolkit.infer import load_predictor

    run_dir = tiny_segment_run.run_dir
    predictor = load_predictor(run_dir)
    meta = json.loads((run_dir / "model" / "toolkit.json").read_text())
    assert type(predictor).__name__ == "SegmentClassifier" and predictor.thresholds == meta["thresholds"]
    metrics, out = evaluate_run(run_dir, "sample:contracts_train", tmp_path / "eval", bootstrap=0)
    assert "ranking" in metrics and (out / "report.md").read_text().count("AUPR") >= 1
    manifest = export_run(run_dir, tmp_path / "art", precision="fp32", parity_docs=4)
    assert manifest["task"] == "segment_classification" and manifest["parity"]["onnx_fp32"]["max_logit_diff"] < 1e-3
    exported = load_predictor(tmp_path / "art")
    texts = [json.loads(line)["text"] for line in (REPO / "toolkit/data/sample/contracts_train.jsonl").read_text().splitlines()[:3]]

    def extents(spans):
        return [[(s.start, s.end, s.label) for s in doc] for doc in spans]

    assert extents(exported.predict(texts)) == extents(predictor.predict(texts))
