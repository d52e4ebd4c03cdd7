"""task: segment_classification on a tiny encoder: features, training, saved thresholds, eval, ranking and export."""

import json

import numpy as np
import pytest
from conftest import REPO, invoke

from toolkit.data.schema import Span
from toolkit.rundir import open_run
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
    assert spans == [
        (0, 20, "A", pytest.approx(0.8)),
        (21, 30, "B", pytest.approx(0.6)),
        (31, 40, "A", pytest.approx(0.8)),
    ]
    assert merge_segments(SEGMENTS, probs, ["A", "B"], [0.95, 0.95]) == []


def test_a_tiny_segment_model_learns_the_sample_clauses_and_saves_its_thresholds(tiny_segment_run):
    metrics = tiny_segment_run.metrics
    # Sentence-sized clauses are learned; names of parties are phrases inside a sentence, which no
    # segment carries: they are counted as not representable, never dropped silently.
    for label in ("Payment Terms", "Governing Law", "Confidentiality"):
        assert metrics["per_label"][label]["jaccard_f1"] >= 0.7, (
            label,
            metrics["per_label"][label],
        )  # thresholds cross-fitted on 3 documents
    assert (
        metrics["per_label"]["Parties"]["predicted"] == 0
        and tiny_segment_run.run["spans_not_representable_train"] >= 12
    )
    meta = json.loads((tiny_segment_run.run_dir / "model" / "toolkit.json").read_text())
    assert meta["task"] == "segment_classification" and len(meta["thresholds"]) == len(meta["labels"])
    assert all(0 < t < 1 for t in meta["thresholds"])
    ranking = metrics["ranking"]
    assert 0 < ranking["macro"]["aupr"] <= 1 and set(ranking["per_label"]) <= set(meta["labels"])
    assert tiny_segment_run.run["dev_thresholds"].startswith("cross-fitted")
    plan = json.loads((tiny_segment_run.run_dir / "data_report.json").read_text())
    assert plan["train"]["windows_with_spans"] > 0
    # The learning curve carries threshold-free figures; the best checkpoint is chosen on cross-fitted F1.
    evals = [
        json.loads(line)
        for line in (tiny_segment_run.run_dir / "train_log.jsonl").read_text().splitlines()
        if '"eval_loss"' in line
    ]
    assert evals and all(0 <= e["eval_macro_aupr"] <= 1 and 0 <= e["eval_tuned_jaccard_f1"] <= 1 for e in evals)
    assert tiny_segment_run.run["best_checkpoint_dev_tuned_jaccard_f1"] == max(
        e["eval_tuned_jaccard_f1"] for e in evals
    )


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
    texts = [
        json.loads(line)["text"]
        for line in (REPO / "toolkit/data/sample/contracts_train.jsonl").read_text().splitlines()[:3]
    ]

    def extents(spans):
        return [[(s.start, s.end, s.label) for s in doc] for doc in spans]

    assert extents(exported.predict(texts)) == extents(predictor.predict(texts))


def test_the_linear_baseline_writes_a_run_that_eval_and_compare_read(tmp_path):
    from toolkit.deploy.export import export_run
    from toolkit.errors import ToolkitError
    from toolkit.evaluate.evaluation import evaluate_run
    from toolkit.infer import load_predictor
    from toolkit.registry.linear_model import linear_baseline_of
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import plan_recipe, run_recipe

    overrides = [
        f"output_dir={tmp_path}",
        "data.dev=sample:contracts_train",
        "data.max_dev_docs=24",
        "eval.bootstrap=0",
    ]
    recipe = linear_baseline_of(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides))
    assert plan_recipe(recipe)["classifier"] == "linear"
    result = run_recipe(recipe, tmp_path / "linear")
    meta = open_run(result.run_dir).meta
    assert meta.classifier == "linear" and len(meta.thresholds) == len(meta.labels)
    # Sentence clauses of the sample are easy for bag-of-words on the documents it was fitted on.
    assert result.metrics["per_label"]["Governing Law"]["jaccard_f1"] >= 0.8
    assert "aupr" in result.metrics["ranking"]["macro"] and result.run["train_seconds"] < 60
    assert result.run["labels_without_positive_segments"] == [
        "Notice Period"
    ]  # a phrase inside the termination sentence
    # Thresholds tuned on dev: the run names the labels with too few dev clauses to choose them on.
    from collections import Counter

    from toolkit.data.records import load_records

    counts = Counter(s.label for r in load_records("sample:contracts_train", 24) for s in r.spans)
    few = {label: counts[label] for label in meta.labels if counts[label] < 20}
    assert few and result.run["too_few_to_tune"].startswith(f"fewer than 20 dev clauses for {few}:")
    predictor = load_predictor(result.run_dir)
    assert type(predictor).__name__ == "LinearModel" and predictor.thresholds == meta.thresholds
    metrics, _ = evaluate_run(result.run_dir, "sample:contracts_dev", tmp_path / "eval", bootstrap=0)
    assert metrics["counts"]["documents"] == 16 and "ranking" in metrics
    with pytest.raises(ToolkitError, match="linear segment baseline"):
        export_run(result.run_dir, tmp_path / "art")


def test_out_of_fold_thresholds_are_chosen_on_training_documents_and_dev_only_reports(tmp_path):
    from toolkit.data.records import filter_labels, load_splits
    from toolkit.errors import ConfigError
    from toolkit.evaluate.evaluation import evaluate_run
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.linear_flow import out_of_fold_thresholds
    from toolkit.tasks.segments.linear_model import segment_documents

    recipe = load_recipe(
        REPO / "recipes" / "demo_segments_mlm.yaml",
        [f"output_dir={tmp_path}", "segments.thresholds=out_of_fold", "segments.folds=4", "eval.bootstrap=0"],
        linear_baseline=True,
    )
    result = run_recipe(recipe, tmp_path / "oof")
    assert result.run["dev_thresholds"] == "chosen on out-of-fold scores of the 48 training documents (4 folds)"
    assert "too_few_to_tune" not in result.run  # nothing was chosen on dev
    train, _ = load_splits(recipe.data, recipe.seed)
    labels = open_run(result.run_dir).labels
    train = filter_labels(train, labels)
    documents = segment_documents(train, labels, recipe.segments.min_overlap)
    thresholds, _ = out_of_fold_thresholds(recipe, train, documents, labels)
    assert open_run(result.run_dir).meta.thresholds == thresholds == list(result.metrics["thresholds"].values())
    # Nothing was chosen on dev, so scoring dev again at the saved thresholds gives the run's own figures.
    metrics, _ = evaluate_run(result.run_dir, recipe.data.dev, tmp_path / "eval", bootstrap=0)
    assert metrics["summary"] == result.metrics["summary"]
    # An encoder is not refitted per fold.
    with pytest.raises(ConfigError, match="tuned or fixed here"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["segments.thresholds=out_of_fold"])


def test_hold_out_draws_a_share_of_the_training_documents_by_seed():
    from toolkit.errors import ToolkitError
    from toolkit.tasks.segments.held_out import hold_out

    kept, held = hold_out(20, 0.1, seed=13)
    assert len(held) == 2 and sorted(kept + held) == list(range(20)) and not set(kept) & set(held)
    assert hold_out(20, 0.1, seed=13) == (kept, held) and hold_out(20, 0.1, seed=14) != (kept, held)
    assert [len(h) for _, h in (hold_out(3, 0.05, 0), hold_out(2, 0.5, 0))] == [1, 1]  # one each at least
    with pytest.raises(ToolkitError, match="needs at least 2 training documents"):
        hold_out(1, 0.1, 0)


def test_held_out_thresholds_are_chosen_on_training_documents_the_encoder_did_not_train_on(tiny_bert, tmp_path):
    from toolkit.data.records import filter_labels, load_splits
    from toolkit.errors import ConfigError
    from toolkit.evaluate.thresholds import choose_from_counts, threshold_counts
    from toolkit.infer import load_predictor
    from toolkit.registry.linear_model import linear_baseline_of
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.held_out import hold_out
    from toolkit.tasks.segments.linear_model import fit_linear_model

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.max_train_docs=12",
        "data.max_dev_docs=4",
        "train.epochs=1",
        "train.learning_rate=1e-3",
        "eval.bootstrap=0",
        "segments.linear_prior=true",
        "segments.clause_starts=true",
        "segments.folds=3",
        "segments.thresholds=held_out",
        "segments.held_out_share=0.25",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / "held")
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    assert plan["threshold_documents"] == 3 and plan["train"]["documents"] == 9  # the encoder trained on 9
    # The plan names the strategy that ran, and why.
    assert plan["evidence_strategy"] == {
        "name": "held_out",
        "why": "held-out share 0.25 (3 documents): segments.thresholds=held_out",
    }
    assert result.run["dev_thresholds"] == "chosen on 3 training documents held out of training"
    # 3 documents hold fewer than 20 clauses of any label: the run says so, and how to fix it.
    assert "held-out training clauses" in result.run["too_few_to_tune"]

    # The saved thresholds are the best Jaccard F1 on the held-out documents, scored by the saved encoder with
    # the linear prior of the folds that left each document out (not the full fit, which saw them).
    train, _ = load_splits(recipe.data, recipe.seed)
    run = open_run(result.run_dir)
    train = filter_labels(train, run.labels)
    _, held = hold_out(len(train), 0.25, recipe.seed)
    fitted = fit_linear_model(train, run.labels, 0.5, 3, recipe.seed, recipe.task, True, fold_starts=True)
    records = [train[i] for i in held]
    texts = [r.text for r in records]
    scores = load_predictor(result.run_dir).score(texts, prior=fitted.train_scores.subset(held))
    assert scores.starts is not None
    counts = threshold_counts(
        texts, [r.spans for r in records], scores.segments, scores.probabilities, run.labels, starts=scores.starts
    )
    assert run.meta.thresholds == choose_from_counts(counts) == list(result.metrics["thresholds"].values())

    # The linear baseline of such a recipe chooses on training documents too: all of them, out of fold.
    assert linear_baseline_of(recipe).segments.thresholds == "out_of_fold"
    fixed = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["segments.thresholds=fixed"])
    assert linear_baseline_of(fixed).segments.thresholds == "out_of_fold"  # 0.5 fits the encoder's probabilities only
    with pytest.raises(ConfigError, match="use out_of_fold"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["segments.thresholds=held_out"], linear_baseline=True)


def test_linear_is_a_segment_model_only():
    from toolkit.errors import ConfigError
    from toolkit.registry.recipe_loader import load_recipe

    with pytest.raises(ConfigError, match="model.kind: not an option of token_classification recipes"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["model.kind=linear"])
    with pytest.raises(ConfigError, match="segments: not an option of token_classification"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["segments.focal_gamma=2"])
    # The name that selected the baseline before model.kind existed says where it went.
    with pytest.raises(ConfigError, match="fix: set model.kind=linear"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["model.name=linear"])


def test_toolkit_choose_thresholds_chooses_them_again_and_keeps_the_training_record(tiny_segment_run, tmp_path):
    import shutil

    run_dir = tmp_path / "copy"
    shutil.copytree(tiny_segment_run.run_dir, run_dir)
    meta_path = run_dir / "model" / "toolkit.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "thresholds": [0.5] * len(meta["labels"])}))
    proc = invoke(["choose-thresholds", run_dir])
    assert proc.exit_code == 0, proc.output
    assert (
        json.loads(meta_path.read_text())["thresholds"] == meta["thresholds"]
    )  # the same dev documents choose the same
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (
        metrics["run"]["train_seconds"] == tiny_segment_run.run["train_seconds"]
        and metrics["ranking"]["settings"]["curve"] == "threshold sweep"
    )
    bad = invoke(["choose-thresholds", REPO / "recipes"])
    assert bad.exit_code == 1 and "error:" in bad.stderr and "Traceback" not in bad.output
    # The old name still runs it, and says the new one.
    old = invoke(["tune", run_dir])
    assert old.exit_code == 0 and "toolkit choose-thresholds" in old.stderr
    assert json.loads(meta_path.read_text())["thresholds"] == meta["thresholds"]


def test_hard_negatives_are_the_clause_free_windows_that_fire_highest_first():
    from toolkit.spans.segment_decoding import best_segment_probability
    from toolkit.tasks.segments.features import choose_hard_negatives

    # Window-local segments 0 and 1; the best segment's mean logit decides the window's score.
    logits = np.array([[9.0, 9.0], [0.0, -4.0], [2.0, -4.0], [-2.0, 1.0], [9.0, 9.0]])
    assert best_segment_probability([NO_SEGMENT, 0, 0, 1, NO_SEGMENT], logits) == pytest.approx(1 / (1 + np.exp(-1.0)))
    assert best_segment_probability([NO_SEGMENT, NO_SEGMENT], logits[:2]) == 0.0
    assert choose_hard_negatives([0.2, 0.9, 0.6, 0.95, 0.5], min_score=0.5, limit=3) == [3, 1, 2]
    assert choose_hard_negatives([0.2, 0.4], min_score=0.5, limit=3) == []
    control = choose_hard_negatives(
        [0.2, 0.9, 0.6, 0.95, 0.5, 0.1, 0.0], min_score=0.5, limit=3, choose="random", seed=1
    )
    assert len(control) == 3 and len(set(control)) == 3 and all(0 <= i < 7 for i in control)
    assert choose_hard_negatives([0.2, 0.4], min_score=0.5, limit=3, choose="random") == []  # as many as would be mined


def test_hard_negatives_need_a_pool_and_an_encoder():
    from toolkit.errors import ConfigError
    from toolkit.registry.recipe_loader import load_recipe

    recipe = REPO / "recipes" / "demo_segments_mlm.yaml"
    with pytest.raises(ConfigError, match="windows.negative_ratio"):
        load_recipe(recipe, ["segments.hard_negatives={}"])
    with pytest.raises(ConfigError, match="segments.hard_negatives: not an option of segment_classification/linear"):
        load_recipe(
            recipe,
            [
                "segments=null",
                "windows=null",
                "train=null",
                "model=null",
                "model.kind=linear",
                "segments.hard_negatives={}",
            ],
        )
    with pytest.raises(ConfigError, match="min_score"):
        load_recipe(recipe, ["segments.hard_negatives.min_score=2", "windows.negative_ratio=0.5"])
    assert (
        load_recipe(
            recipe, ["segments.hard_negatives.pool=50", "windows.negative_ratio=0.5"]
        ).segments.hard_negatives.pool
        == 50
    )


# Slow tier (issue 76): mining without the linear prior; the fast tier keeps it with the prior, as the clause recipe
# runs it.
@pytest.mark.parametrize("linear_prior", [pytest.param(False, marks=pytest.mark.slow), True])
def test_hard_negative_mining_adds_the_windows_that_fire_and_trains_a_second_stage(tiny_bert, tmp_path, linear_prior):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "model.max_length=32",
        "model.stride=8",
        "data.max_train_docs=4",
        "data.max_dev_docs=2",
        "windows.negative_ratio=0",
        "train.epochs=2",
        "train.learning_rate=1e-3",
        "eval.bootstrap=0",
        # An untrained tiny model scores about 0.5 everywhere: a low bar makes windows fire.
        "segments.hard_negatives.min_score=0.01",
        "segments.hard_negatives.pool=6",
        "segments.hard_negatives.max_windows=4",
        f"segments.linear_prior={str(linear_prior).lower()}",
        "segments.folds=2",
    ]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "hard")
    mining = result.run["hard_negatives"]
    assert (
        mining["pool_available"] >= 6 and mining["pool_scored"] == 6 and mining["fired"] == 6 and mining["added"] == 4
    )
    assert (result.run_dir / "checkpoints_hard_negatives").is_dir()
    log = [json.loads(line) for line in (result.run_dir / "train_log.jsonl").read_text().splitlines()]
    first = [e for e in log if "stage" not in e]
    second = [e for e in log if e.get("stage") == "hard_negatives"]
    assert first and second and min(e["step"] for e in second) > max(e["step"] for e in first)
    assert result.run["optimizer_steps"] == max(e["step"] for e in second) and result.run["epochs_completed"] == 3


def test_windows_read_their_segments_prior_logits_by_document_index():
    from toolkit.spans.windows import Window
    from toolkit.tasks.segments.features import SegmentWindows

    windows = [
        Window(doc=0, input_ids=[1, 2], offsets=[], word_ids=[]),
        Window(doc=1, input_ids=[1], offsets=[], word_ids=[]),
    ]
    features = SegmentWindows(windows, [[0, 1], [0]], [[[0], [1]], [[0]]], [[2, 3], [0]])
    doc_logits = [np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([[-5.0]])]
    with_priors = features.with_priors(doc_logits)
    assert with_priors.priors == [[[2.0], [3.0]], [[-5.0]]]
    assert with_priors.subset([1]).priors == [[[-5.0]]] and (with_priors + with_priors).priors[2] == [[2.0], [3.0]]
    with pytest.raises(ValueError, match="with and without prior"):
        features + with_priors


def predictor_starts_of(path):
    from toolkit.infer import load_predictor

    return load_predictor(path).score(["The Company may terminate this Agreement. It shall give notice."]).starts


def test_a_segment_model_with_a_linear_prior_adds_the_linear_logit_and_carries_it_to_eval_and_export(
    tiny_bert, tmp_path
):
    from toolkit.deploy.export import export_run
    from toolkit.errors import ToolkitError
    from toolkit.infer import load_predictor
    from toolkit.infer.segment_classifier import SegmentClassifier
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.spans.segment_decoding import probability_logit, sigmoid
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.linear_model import fit_linear_model

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.max_train_docs=12",
        "data.dev=sample:contracts_train",
        "data.max_dev_docs=6",
        "train.epochs=2",
        "train.learning_rate=1e-3",
        "eval.bootstrap=0",
        "segments.linear_prior=true",
        "segments.clause_starts=true",
        "segments.folds=3",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / "prior")
    run = open_run(result.run_dir)
    assert run.meta.linear_prior == "linear.joblib" and (run.model_dir / "linear.joblib").is_file()
    assert run.meta.clause_starts == "clause_starts.joblib" and predictor_starts_of(result.run_dir) is not None
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    assert plan["linear_prior"]["folds"] == 3
    alone = result.run["linear_prior_alone_dev"]
    assert 0 < alone["macro_aupr"] <= 1 and 0 <= alone["tuned_jaccard_f1"] <= 1

    predictor = load_predictor(result.run_dir)
    assert isinstance(predictor, SegmentClassifier) and predictor.prior is not None
    texts = [
        r["text"]
        for r in map(json.loads, (REPO / "toolkit/data/sample/contracts_dev.jsonl").read_text().splitlines()[:3])
    ]
    with_prior = predictor.score(texts)
    encoder_only = SegmentClassifier(predictor.model, predictor.tokenizer, predictor.meta).score(texts)
    prior_logits = predictor.prior.logits(texts, with_prior.segments)
    for a, b, prior in zip(with_prior.probabilities, encoder_only.probabilities, prior_logits):
        # The encoder's segment logit plus the linear model's: the combined model is their sum in logit space.
        np.testing.assert_allclose(a, sigmoid(probability_logit(b) + prior), atol=1e-6)
        assert np.abs(prior).max() > 0.1  # the prior is not a constant zero

    # Training windows read out-of-fold logits: on its own training documents, the saved (full-fit) linear
    # model is surer of the clause segments than the model of the folds that left each document out.
    from toolkit.data.records import filter_labels, load_splits
    from toolkit.spans.segment_decoding import segment_targets
    from toolkit.spans.segments import segment_text

    train, _ = load_splits(recipe.data, recipe.seed)
    train = filter_labels(train, run.labels)
    fitted = fit_linear_model(train, run.labels, 0.5, 3, recipe.seed, recipe.task)
    segments = [segment_text(r.text) for r in train]
    full = predictor.prior.logits([r.text for r in train], segments)
    targets = [np.asarray(segment_targets(s, r.spans, run.labels, 0.5), dtype=bool) for s, r in zip(segments, train)]
    on_positives = [(f[t].mean(), o[t].mean()) for f, o, t in zip(full, fitted.train_logits, targets) if t.any()]
    assert np.mean([f for f, _ in on_positives]) > np.mean([o for _, o in on_positives])

    manifest = export_run(result.run_dir, tmp_path / "art", precision="fp32", parity_docs=4)
    assert manifest["parity"]["onnx_fp32"]["max_logit_diff"] < 1e-3 and (tmp_path / "art" / "linear.joblib").is_file()
    assert predictor_starts_of(tmp_path / "art") is not None
    exported = load_predictor(tmp_path / "art")

    def extents(spans):
        return [[(s.start, s.end, s.label) for s in doc] for doc in spans]

    assert extents(exported.predict(texts)) == extents(predictor.predict(texts))
    assert exported.predict(["   "]) == [[]]  # text without segments: no spans, no error
    (tmp_path / "art" / "linear.joblib").unlink()
    with pytest.raises(ToolkitError, match="linear.joblib: missing"):
        load_predictor(tmp_path / "art")


def test_clause_starts_split_a_run_of_positive_segments_where_a_new_clause_begins():
    from toolkit.evaluate.thresholds import threshold_counts
    from toolkit.spans.segment_decoding import segment_runs, segment_starts

    spans = [Span(start=0, end=20, label="A"), Span(start=21, end=30, label="A"), Span(start=31, end=40, label="B")]
    # Segments 0-1 are one clause of A, segment 2 a second one right after it: B/I/O marks only the firsts.
    assert segment_starts(SEGMENTS, spans, ["A", "B"], 0.5) == [[1, 0], [0, 0], [1, 0], [0, 1]]
    inside = np.array([True, True, True, False])
    assert segment_runs(inside) == [(0, 2)]
    assert segment_runs(inside, np.array([True, False, True, False])) == [(0, 1), (2, 2)]
    probs = np.array([[0.9, 0.1], [0.7, 0.2], [0.8, 0.1], [0.1, 0.9]])
    starts = np.array([[0.9, 0.5], [0.2, 0.5], [0.6, 0.5], [0.1, 0.5]])
    assert [s[:3] for s in merge_segments(SEGMENTS, probs, ["A", "B"], [0.5, 0.5])] == [(0, 30, "A"), (31, 40, "B")]
    assert [s[:3] for s in merge_segments(SEGMENTS, probs, ["A", "B"], [0.5, 0.5], starts)] == [
        (0, 20, "A"),
        (21, 30, "A"),
        (31, 40, "B"),
    ]
    # The threshold sweep (AUPR, threshold choice) splits the same runs: both A clauses match once split.
    text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii"
    counts = threshold_counts([text], [spans], [SEGMENTS], [probs], ["A", "B"], grid=[0.5])
    split = threshold_counts([text], [spans], [SEGMENTS], [probs], ["A", "B"], grid=[0.5], starts=[starts])
    assert counts[0, 0, 0].tolist() == [1, 1, 2] and split[0, 0, 0].tolist() == [2, 2, 2]


def test_the_linear_baseline_learns_clause_starts_saves_them_and_needs_them_to_load(tmp_path):
    from toolkit.errors import ConfigError, ToolkitError
    from toolkit.infer import load_predictor
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    overrides = [
        f"output_dir={tmp_path}",
        "data.dev=sample:contracts_train",
        "data.max_dev_docs=12",
        "eval.bootstrap=0",
    ]
    recipe = load_recipe(
        REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, "segments.clause_starts=true"], linear_baseline=True
    )
    result = run_recipe(recipe, tmp_path / "starts")
    run = open_run(result.run_dir)
    assert run.meta.clause_starts == "clause_starts.joblib" and (run.model_dir / "clause_starts.joblib").is_file()
    predictor = load_predictor(result.run_dir)
    texts = [
        json.loads(line)["text"]
        for line in (REPO / "toolkit/data/sample/contracts_dev.jsonl").read_text().splitlines()[:4]
    ]
    scores = predictor.score(texts)
    assert scores.starts is not None and all(s.shape == p.shape for s, p in zip(scores.starts, scores.probabilities))
    assert all(((0 <= s) & (s <= 1)).all() for s in scores.starts)
    assert predictor.predict(["", "   "]) == [[], []]  # text without segments: no spans, no error
    (run.model_dir / "clause_starts.joblib").unlink()
    with pytest.raises(ToolkitError, match="clause_starts.joblib: missing"):
        load_predictor(result.run_dir)
    # An encoder has clause starts only through its linear prior.
    with pytest.raises(ConfigError, match="segments.linear_prior=true as well"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["segments.clause_starts=true"])


def test_a_segment_curve_over_the_whole_dev_set_chooses_the_best_checkpoint(tiny_bert, tmp_path):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import TRAIN_LOG_FILE, read_curve
    from toolkit.tasks import run_recipe

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.max_train_docs=6",
        "data.max_dev_docs=4",
        "eval.curve_docs=4",
        "train.epochs=3",
        "train.learning_rate=3e-3",
        "train.batch_size=6",
        "eval.bootstrap=0",
    ]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "curve")
    assert result.run["dev_evaluation_during_training"] == "curve"
    curve = read_curve(tmp_path / "curve")
    logged = [e for e in map(json.loads, (tmp_path / "curve" / TRAIN_LOG_FILE).read_text().splitlines())]
    logged = [e for e in logged if "eval_tuned_jaccard_f1" in e]
    # The curve's spans are at cross-fitted thresholds: its Jaccard F1 is the Trainer's selection metric.
    assert [e["eval_tuned_jaccard_f1"] for e in logged] == [p["metrics"]["jaccard_f1"] for p in curve]
    assert len(curve) == 3 and not any("eval_runtime" in e for e in logged)
    assert result.run["best_checkpoint_dev_tuned_jaccard_f1"] == max(p["metrics"]["jaccard_f1"] for p in curve)


def test_a_run_records_the_commit_it_started_at_though_the_checkout_moves_while_it_runs(tmp_path, monkeypatch):
    """Runs take minutes to hours; a commit made meanwhile is not the code that ran."""
    import toolkit.tasks.flow as flow
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments import linear_flow

    head = ["aaaaaaa"]
    fit = linear_flow.fit_classifier

    def fit_then_commit(*args, **kwargs):  # someone commits while the model fits
        fitted = fit(*args, **kwargs)
        head[0] = "bbbbbbb"
        return fitted

    def code_commit():
        return {"commit": head[0], "uncommitted_changes": False}

    monkeypatch.setattr(linear_flow, "fit_classifier", fit_then_commit)
    monkeypatch.setattr(linear_flow, "code_commit", code_commit)
    monkeypatch.setattr(flow, "code_commit", code_commit)
    overrides = [f"output_dir={tmp_path}", "data.max_train_docs=6", "data.max_dev_docs=3", "eval.bootstrap=0"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides, linear_baseline=True)
    result = run_recipe(recipe, tmp_path / "moving")
    assert head[0] == "bbbbbbb"
    assert json.loads((result.run_dir / "metrics.json").read_text())["run"]["commit"] == "aaaaaaa"
