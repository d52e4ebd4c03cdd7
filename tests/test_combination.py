"""segments.combination: fitted: the encoder's and the linear model's logits combined per label on training
documents the encoder did not train on, falling back to the linear model where the encoder adds nothing."""

import json

import numpy as np
import pytest
from conftest import REPO, invoke

from toolkit.data.schema import Span
from toolkit.spans.segment_decoding import combine_logits, segment_targets
from toolkit.spans.segments import segment_text
from toolkit.tasks.segments.combination import LINEAR_ONLY, HeldOutEvidence, fit_combination


def _documents(n: int, seed: int) -> tuple[list[str], list[list[Span]]]:
    """`n` documents of 12 sentences; sentences 3-4 of each are one clause of A, sentence 9 one of B."""
    rng = np.random.default_rng(seed)
    texts, golds = [], []
    for d in range(n):
        sentences = [f"Sentence {k} of document {d} says {rng.integers(1000)} things." for k in range(12)]
        text = " ".join(sentences)
        starts = np.cumsum([0] + [len(s) + 1 for s in sentences])
        golds.append(
            [
                Span(start=int(starts[3]), end=int(starts[5] - 1), label="A"),
                Span(start=int(starts[9]), end=int(starts[10] - 1), label="B"),
            ]
        )
        texts.append(text)
    return texts, golds


def _evidence(encoder_strength: float, seed: int = 0, documents: int = 16) -> HeldOutEvidence:
    """The linear model ranks clauses roughly; the encoder is noise (0), moderately informative (about 1: a
    clause segment's logit one standard deviation above the rest) or nearly certain (8)."""
    texts, golds = _documents(documents, seed)
    rng = np.random.default_rng(seed + 1)
    segments = [segment_text(t) for t in texts]
    targets = [np.asarray(segment_targets(s, g, ["A", "B"], 0.5), dtype=int) for s, g in zip(segments, golds)]
    linear = [y * 1.5 - 1.0 + rng.normal(0, 1.2, y.shape) for y in targets]
    encoder = [y * encoder_strength + rng.normal(0, 1.0, y.shape) for y in targets]
    return HeldOutEvidence(texts, golds, segments, targets, encoder, linear)


def test_an_encoder_that_is_noise_leaves_every_label_to_the_linear_model_at_its_out_of_fold_threshold():
    combination = fit_combination(_evidence(0.0, seed=0), ["A", "B"], [0.35, 0.6], 0.5)
    assert combination.weights == [list(LINEAR_ONLY)] * 2
    assert combination.thresholds == [0.35, 0.6]  # the linear baseline's, chosen out of fold elsewhere
    assert combination.linear_only == ["A", "B"] and combination.kept == {}
    assert "did not keep" in combination.note() and "linear baseline" in combination.note()
    assert not combination.pooled["kept"] and combination.pooled["p_value"] >= 0.05
    assert combination.pooled["documents"] == 16 and combination.pooled["labels_tested"] == 2
    for row in combination.report.values():
        assert row["uses"] == "linear" and row["evidence_clauses"] == 16 and "Holm-adjusted" in row["why"]
        assert row["p_value"] >= 0.05 and row["p_holm"] >= row["p_departure"]


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_a_moderately_informative_encoder_is_kept_with_its_p_value_and_a_threshold_from_out_of_fold_scores(seed):
    # 40 documents: 40 clauses of A (two segments each) and 40 of B, about what cross-fitting gives a small set.
    combination = fit_combination(_evidence(1.5, seed=seed, documents=40), ["A", "B"], [0.35, 0.6], 0.5)
    assert combination.pooled["kept"] and combination.pooled["p_value"] < 0.05
    assert combination.pooled["log_loss_gain"] > 0 and combination.pooled["departures"] == []
    assert combination.linear_only == [] and set(combination.kept) == {"A", "B"}
    assert combination.pooled["departure_penalty"] in (1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0)
    for j, label in enumerate(["A", "B"]):
        row = combination.report[label]
        assert row["uses"] == "encoder+linear" and row["log_loss_gain"] > 0 and "follows" in row["why"]
        assert row["stacked_aupr"] >= row["linear_aupr"]
        w_linear, w_encoder, _ = combination.weights[j]
        assert w_encoder > 0 and w_linear > 0 and row["encoder_weight"] > 0
        assert combination.thresholds[j] == row["threshold"] and 0 < row["threshold"] < 1
    assert "kept the encoder" in combination.note() and "every label" in combination.note()


@pytest.mark.slow
def test_noise_is_kept_for_at_most_one_label_in_ten():
    # A test at 5% keeps noise in about 1 run in 20 by design (bootstrapped over few documents, it is
    # conservative on so few documents).
    kept = sum(len(fit_combination(_evidence(0.0, seed=seed), ["A", "B"], [0.35, 0.6], 0.5).kept) for seed in range(20))
    assert kept <= 4


def test_an_encoder_that_knows_the_clauses_outweighs_the_linear_model():
    combination = fit_combination(_evidence(8.0), ["A", "B"], [0.35, 0.6], 0.5)
    assert combination.pooled["p_value"] < 0.01
    for j, label in enumerate(["A", "B"]):
        w_linear, w_encoder, _ = combination.weights[j]
        assert w_encoder > abs(w_linear)
        assert combination.report[label]["stacked_aupr"] > combination.report[label]["linear_aupr"]


def test_a_label_with_too_few_clauses_follows_the_decision_over_every_label_without_a_test_of_its_own():
    combination = fit_combination(_evidence(8.0), ["A", "B"], [0.35, 0.6], 0.5, min_clauses=17)
    assert combination.pooled["kept"] and combination.linear_only == []
    for row in combination.report.values():
        assert "fewer than 17" in row["why"] and "p_departure" not in row and "p_holm" not in row


def _evidence_per_label(strengths: dict[str, float], documents: int, seed: int = 0) -> HeldOutEvidence:
    """Like `_evidence`, with the encoder's strength set per label (A, B as in `_documents`)."""
    texts, golds = _documents(documents, seed)
    rng = np.random.default_rng(seed + 1)
    segments = [segment_text(t) for t in texts]
    targets = [np.asarray(segment_targets(s, g, ["A", "B"], 0.5), dtype=int) for s, g in zip(segments, golds)]
    strength = np.array([strengths["A"], strengths["B"]])
    linear = [y * 1.5 - 1.0 + rng.normal(0, 1.2, y.shape) for y in targets]
    encoder = [y * strength + rng.normal(0, 1.0, y.shape) for y in targets]
    return HeldOutEvidence(texts, golds, segments, targets, encoder, linear)


def test_one_label_departs_from_the_pooled_weight_where_its_own_evidence_says_so():
    """The encoder knows A and is noise for B: the pooled fit gives B its own weight near 0 (the departure
    is not shrunk away when the evidence is strong), and B is not helped by the encoder."""
    combination = fit_combination(_evidence_per_label({"A": 4.0, "B": 0.0}, 40), ["A", "B"], [0.35, 0.6], 0.5)
    a, b = combination.report["A"], combination.report["B"]
    assert combination.pooled["kept"] and a["uses"] == "encoder+linear"
    assert a["encoder_weight"] > 1.0 and abs(b["encoder_weight"]) < 0.5 * a["encoder_weight"]
    assert a["log_loss_gain"] > 0 and a["p_value"] < 0.05 and b["p_value"] >= 0.05


def test_combined_logits_are_the_sum_or_the_fitted_weights_and_a_zero_weight_ignores_missing_encoder_logits():
    encoder = np.array([[1.0, np.nan], [2.0, 3.0]])
    linear = np.array([[0.5, -1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(combine_logits(encoder, linear)[1], [2.0, 4.0])
    out = combine_logits(encoder, linear, [[2.0, 1.0, 0.5], list(LINEAR_ONLY)])
    np.testing.assert_allclose(out, [[2.5, -1.0], [2.5, 1.0]])  # label 2 is linear alone, NaN or not


def test_a_fitted_combination_needs_the_linear_prior_and_documents_the_encoder_did_not_train_on():
    from toolkit.errors import ConfigError
    from toolkit.registry.recipe_loader import load_recipe

    with pytest.raises(ConfigError, match="segments.thresholds=cross_fitted"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["segments.combination=fitted"])
    with pytest.raises(ConfigError, match="segments.encoder_input=segments"):
        load_recipe(
            REPO / "recipes" / "demo_segments_mlm.yaml",
            ["segments.combination=fitted", "segments.linear_prior=true", "segments.thresholds=cross_fitted"],
        )
    load_recipe(
        REPO / "recipes" / "demo_segments_mlm.yaml",
        ["segments.combination=fitted", "segments.linear_prior=true", "segments.thresholds=held_out"],
    )


def test_a_tiny_run_fits_the_combination_on_held_out_documents_and_eval_and_export_apply_it(tiny_bert, tmp_path):
    from toolkit.deploy.export import export_run
    from toolkit.infer import load_predictor
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import open_run
    from toolkit.spans.segment_decoding import probability_logit, sigmoid
    from toolkit.tasks import run_recipe

    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.max_train_docs=16",
        "data.max_dev_docs=4",
        "train.epochs=1",
        "train.learning_rate=1e-3",
        "eval.bootstrap=0",
        "segments.linear_prior=true",
        "segments.clause_starts=true",
        "segments.folds=3",
        "segments.thresholds=held_out",
        "segments.held_out_share=0.5",
        "segments.combination=fitted",
        "segments.min_steps=8",
        "segments.max_epochs=3",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / "fitted")
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    assert (
        plan["evaluated_during_training_on"] == "a share of the training documents, apart from the threshold documents"
    )
    # 8 training documents make fewer than 8 steps an epoch: min_steps raises the epochs, at most to 3.
    assert plan["epochs"] == min(3, 8 / plan["steps_per_epoch"]) and plan["epochs"] > 1
    assert result.run["epochs_completed"] == pytest.approx(plan["epochs"], abs=0.5)
    run = open_run(result.run_dir)
    assert len(run.meta.combination) == len(run.labels) and all(len(w) == 3 for w in run.meta.combination)
    report = result.run["combination"]
    assert set(report) == set(run.labels) and result.run["combination_note"]
    assert set(result.run["combination_seconds"]) == {"stack", "scoring_held_out"}  # what the stack costs
    assert result.run["dev_thresholds"].startswith("fitted with the combination on 8 training documents")
    for j, label in enumerate(run.labels):
        assert report[label]["uses"] in ("linear", "encoder+linear")
        assert run.meta.thresholds[j] == report[label]["threshold"]
        if report[label]["uses"] == "linear":
            assert run.meta.combination[j] == list(LINEAR_ONLY)

    # A label left to the linear model decides as the linear baseline does: its threshold out of fold.
    from toolkit.registry.linear_model import linear_baseline_of

    baseline = run_recipe(linear_baseline_of(recipe.model_copy(update={"name": "fitted"})), tmp_path / "linear")
    baseline_thresholds = list(baseline.metrics["thresholds"].values())
    for j, label in enumerate(run.labels):
        if report[label]["uses"] == "linear":
            assert run.meta.thresholds[j] == baseline_thresholds[j], label

    # Eval, export and the service apply the saved weights: the scores are sigmoid of the fitted combination.
    predictor = load_predictor(result.run_dir)
    texts = [
        r["text"]
        for r in map(json.loads, (REPO / "toolkit/data/sample/contracts_dev.jsonl").read_text().splitlines()[:3])
    ]
    scores = predictor.score(texts)
    _, encoder = predictor.score_encoder(texts)
    linear = predictor.prior.logits(texts, scores.segments)
    for p, e, li in zip(scores.probabilities, encoder, linear):
        np.testing.assert_allclose(p, sigmoid(combine_logits(e, li, run.meta.combination)), atol=1e-6)
        assert not np.allclose(p, sigmoid(e + probability_logit(sigmoid(li))))  # not the plain sum
    export_run(result.run_dir, tmp_path / "art", precision="fp32", parity_docs=2)
    exported = load_predictor(tmp_path / "art")
    assert exported.combination == run.meta.combination
    card = (tmp_path / "art" / "README.md").read_text()
    assert "combined per label with weights fitted on training documents held out of training" in card

    def extents(spans):
        return [[(s.start, s.end, s.label) for s in doc] for doc in spans]

    assert extents(exported.predict(texts)) == extents(predictor.predict(texts))


def test_the_linear_baseline_takes_its_suffix_from_a_name_override_as_from_the_file(tmp_path):
    from toolkit.registry.recipe_loader import load_recipe

    path = REPO / "recipes" / "demo_segments_mlm.yaml"
    assert load_recipe(path, ["name=mine"], linear_baseline=True).name == "mine_linear"
    assert load_recipe(path, ["name=mine_linear"], linear_baseline=True).name == "mine_linear"
    assert load_recipe(path, linear_baseline=True).name == "demo_segments_mlm_linear"
    dry = invoke(["run", "demo_segments_mlm", "--dry-run", "--linear-baseline", "name=x", f"output_dir={tmp_path}"])
    assert dry.exit_code == 0, dry.output


def test_a_dry_run_of_a_recipe_with_a_linear_prior_plans_the_prior_without_fitting_it(monkeypatch):
    import toolkit.tasks.segments.method as flow

    def refuse(*args, **kwargs):
        raise AssertionError("--dry-run fitted the linear prior")

    monkeypatch.setattr(flow, "fit_linear_model", refuse)
    dry = invoke(
        ["run", "demo_segments_mlm", "--dry-run", "--no-estimate", "segments.linear_prior=true", "segments.folds=3"]
    )
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["linear_prior"] == {"folds": 3, "fitted": "when the run starts, not by --dry-run"}
    assert "cost_estimate" not in plan  # --no-estimate: validation alone, in seconds


def test_holm_adjusts_each_labels_p_value_for_the_labels_tested():
    from toolkit.tasks.segments.combination import holm

    adjusted = holm({"A": 0.01, "B": 0.04, "C": 0.03, "D": 0.5})
    # ordered 0.01, 0.03, 0.04, 0.5: times 4, 3, 2, 1, each at least the one before
    assert adjusted == {"A": 0.04, "C": 0.09, "B": 0.09, "D": 0.5}
    assert holm({"A": 0.04}) == {"A": 0.04} and holm({}) == {}


def test_the_encoder_is_kept_on_the_holm_adjusted_p_value_of_the_labels_tested():
    """Each tested label's p-value is adjusted for the labels tested, and the adjusted one decides: a gain that
    would pass one 5% test does not pass forty-one (41 x p)."""
    from toolkit.tasks.segments.combination import holm

    combination = fit_combination(_evidence(1.5, seed=0, documents=40), ["A", "B"], [0.35, 0.6], 0.5)
    kept = combination.pooled["kept"]
    for row in combination.report.values():
        assert row["p_holm"] >= row["p_departure"]
        # a label departs from the decision over every label only on its Holm-adjusted test
        assert (row["uses"] == "encoder+linear") == (kept != (row["p_holm"] < 0.05))
    many = {"A": 0.002, **{f"noise{i}": 0.6 for i in range(40)}}
    assert holm(many)["A"] == pytest.approx(0.082) and holm({"A": 0.002})["A"] == 0.002
