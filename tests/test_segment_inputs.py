"""segments.encoder_input=segments: one input per segment, fresh negatives each epoch, training to a plateau
on held-out training documents, and the three models (linear, encoder, final) reported on dev."""

import json
import re

import pytest
from conftest import REPO

from toolkit.spans.segment_decoding import NO_SEGMENT, token_segments
from toolkit.spans.segment_windows import make_segment_windows
from toolkit.tasks.segments.features import SegmentEpochSampler

TEXT = "The term is one year. It renews unless notice is given sixty days before expiry.\n\n   \nSigned."


def _tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_bert))


def test_each_segment_is_one_input_with_its_context_read_but_belonging_to_no_segment(tiny_bert):
    from toolkit.spans.segments import segment_text

    tokenizer = _tokenizer(tiny_bert)
    segments = segment_text(TEXT)
    windows, index = make_segment_windows(tokenizer, [TEXT], [segments], segment_tokens=4, context_tokens=2)
    assert index == list(range(len(segments))) and len(segments) == 3
    for w, k in zip(windows, index):
        own = token_segments(w.offsets, segments)
        # Only the segment's own tokens map to a segment, and only to this one; context and specials map to none.
        assert set(own) - {NO_SEGMENT} == {k}
        assert w.input_ids[0] == tokenizer.cls_token_id and w.input_ids[-1] == tokenizer.sep_token_id
        mine = [i for i, s in enumerate(own) if s == k]
        assert 1 <= len(mine) <= 4 and mine == list(range(mine[0], mine[-1] + 1))
        a, b = segments[k]
        assert all(a <= w.offsets[i][0] < b for i in mine)
        assert len(w.input_ids) <= 2 + 4 + 2 * 2
    # The long first sentence is cut after 4 tokens; the tokens after them are context on the right.
    first = windows[0]
    text_of = [TEXT[s:e].lower() for s, e in first.offsets if e > s]
    assert text_of == tokenizer.convert_ids_to_tokens(first.input_ids)[1:5]  # the tiny vocabulary is lower-cased
    assert len(first.input_ids) == 1 + 4 + 2 + 1  # no left context at the document's start
    # A middle segment has context on both sides.
    assert len(windows[1].input_ids) == 1 + 2 + 4 + 2 + 1


def test_a_segment_without_tokens_has_no_input_and_no_score(tiny_bert):
    tokenizer = _tokenizer(tiny_bert)
    windows, index = make_segment_windows(tokenizer, ["a b"], [[(0, 1), (1, 2), (2, 3)]], 8, 0)
    assert index == [0, 2]  # (1, 2) holds only a space
    assert make_segment_windows(tokenizer, ["", "x"], [[], [(0, 1)]], 8, 4)[1] == [0]


def test_each_epoch_takes_every_positive_and_fresh_negatives_in_batches_of_similar_length():
    positive = [i % 10 == 0 for i in range(200)]  # 20 positives, 180 negatives
    lengths = [(i * 37) % 101 for i in range(200)]
    sampler = SegmentEpochSampler(positive, lengths, ratio=3, batch_size=8, seed=1)
    assert len(sampler) == 80
    first, second = list(sampler), list(sampler)
    for epoch in (first, second):
        assert len(epoch) == 80 and len(set(epoch)) == 80
        assert {i for i in epoch if positive[i]} == {i for i in range(200) if positive[i]}
    assert {i for i in first if not positive[i]} != {i for i in second if not positive[i]}  # drawn anew
    # One pool of 50 batches here: each batch holds neighbours in length order, so batches barely vary inside.
    spread = [max(lengths[i] for i in first[k : k + 8]) - min(lengths[i] for i in first[k : k + 8]) for k in (0, 8)]
    assert max(spread) < 20
    assert list(SegmentEpochSampler(positive, lengths, 3, 8, seed=1)) == first  # seeded
    assert len(SegmentEpochSampler(positive, lengths, None, 8, 1)) == 200  # None: every segment
    assert len(SegmentEpochSampler(positive, lengths, 100, 8, 1)) == 200  # at most the negatives there are


def test_the_evaluation_sample_keeps_every_positive_and_weighs_negatives_to_estimate_the_full_aupr():
    import numpy as np

    from toolkit.tasks.segments.features import SegmentWindows
    from toolkit.tasks.segments.trainer import evaluation_sample, segment_macro_aupr

    rng = np.random.default_rng(0)
    n = 20000
    targets = (rng.random((n, 2)) < 0.01).astype(int)
    logits = targets * 1.5 + rng.normal(size=(n, 2))
    rows = SegmentWindows([None] * n, [[0]] * n, [[list(t)] for t in targets], [[i] for i in range(n)])
    sample, weights = evaluation_sample(rows, 2000, seed=3)
    kept = [row[0] for row in sample.segment_labels]
    assert sum(map(any, kept)) == int(targets.any(axis=1).sum())  # every positive input
    assert len(kept) - sum(map(any, kept)) == 2000 and weights.sum() == pytest.approx(n)
    index = [k[0] for k in sample.segment_index]
    full = segment_macro_aupr(targets, logits)
    estimate = segment_macro_aupr(targets[index], logits[index], weights)
    unweighted = segment_macro_aupr(targets[index], logits[index])
    assert abs(estimate - full) < 0.05 < unweighted - full  # the weights undo the sample's inflated precision
    assert evaluation_sample(rows, None, 3) == (rows, None) and evaluation_sample(rows, n, 3)[1] is None


def test_segment_inputs_refuse_what_they_do_not_read_all_at_once():
    from toolkit.errors import ConfigError
    from toolkit.registry.recipe_loader import load_recipe

    with pytest.raises(ConfigError) as caught:
        load_recipe(
            REPO / "recipes" / "cuad_clauses_segments_mlm.yaml",
            ["segments.combination=sum", "windows.negative_ratio=2"],
        )
    message = str(caught.value) + " ".join(getattr(caught.value, "fix", "") or "")
    for part in ("segments.combination=fitted", "windows.negative_ratio"):
        assert part in message, message
    with pytest.raises(ConfigError, match="exceeds model.max_length"):
        load_recipe(
            REPO / "recipes" / "demo_segments_mlm.yaml",
            ["segments.encoder_input=segments", "segments.segment_tokens=120", "segments.loss_weights=none"],
        )


def test_train_layers_at_or_above_the_layer_count_train_every_weight_and_cache_nothing(tiny_bert):
    """The clause recipe trains its top 3 layers: on an encoder of 3 layers or fewer that is every weight, so
    there is no frozen part to cache (was: refused)."""
    from transformers import AutoModel

    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks.segments.trainer import frozen_cache

    recipe = load_recipe(REPO / "recipes" / "cuad_clauses_segments_mlm.yaml", [f"model.name={tiny_bert}"])
    model = AutoModel.from_pretrained(tiny_bert)  # 2 layers
    assert recipe.model.train_layers == 3 and frozen_cache(recipe, model) is None
    recipe.model.train_layers = 1
    assert frozen_cache(recipe, model).frozen == 1


SEGMENT_RUN = [
    "data.max_train_docs=12",
    "data.max_dev_docs=4",
    "train.learning_rate=1e-3",
    "train.batch_size=8",
    "eval.bootstrap=20",
    "segments.linear_prior=true",
    "segments.clause_starts=true",
    "segments.folds=3",
    "segments.thresholds=held_out",
    "segments.held_out_share=0.25",
    "segments.combination=fitted",
    "segments.encoder_input=segments",
    "segments.loss_weights=none",
    "segments.segment_tokens=48",
    "segments.context_tokens=8",
]


def test_a_segment_input_run_reports_three_models_and_what_ended_training(tiny_bert, tmp_path):
    from toolkit.deploy.export import export_run
    from toolkit.infer import load_predictor
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import open_run
    from toolkit.tasks import run_recipe

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", "train.epochs=3", *SEGMENT_RUN]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "seg")
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    # 12 training documents: 3 held out to choose on, 2 of the others to stop on (segments.stopping_share 0.2).
    assert plan["threshold_documents"] == 3 and plan["stopping_documents"] == 2
    assert plan["encoder_input"] == "segments" and plan["train"]["documents"] == 7
    # Every segment of the 7 training documents is an input; an epoch is its positives and 3x as many negatives,
    # or every negative where there are fewer.
    positives, inputs = plan["train"]["windows_with_spans"], plan["train"]["windows"]
    assert plan["inputs_per_epoch"] == positives + min(inputs - positives, 3 * positives) == inputs

    training = result.run["encoder_training"]
    assert training["ended_by"] == "epoch cap (train.epochs=3)" and training["epochs"] == 3
    assert [c["epoch"] for c in training["held_out_curve"]] == [1, 2, 3]
    assert training["best_epoch"] == max(training["held_out_curve"], key=lambda c: c["segment_aupr"])["epoch"]

    models = result.metrics["models"]
    assert set(models) == {"linear", "encoder", "final"}
    assert models["final"]["jaccard_f1"] == result.summary["jaccard_f1"]
    for figures in models.values():
        assert 0 <= figures["macro_aupr"] <= 1 and len(figures["jaccard_f1_ci95"]) == 2
    assert "## Three models on dev" in (result.run_dir / "report.md").read_text()

    # The saved model reads segment inputs wherever it is loaded: eval, export (parity on them) and the service.
    run = open_run(result.run_dir)
    assert run.meta.segment_tokens == 48 and run.meta.context_tokens == 8
    predictor = load_predictor(result.run_dir)
    texts = [TEXT, "Governing law. This agreement is governed by the laws of Delaware."]
    windows = predictor.windows(texts)
    assert len(windows) == sum(len(s) for s in predictor.score(texts).segments)
    manifest = export_run(result.run_dir, tmp_path / "art", precision="fp32", parity_docs=4)
    assert manifest["parity"]["onnx_fp32"]["max_logit_diff"] < 1e-3
    exported = load_predictor(tmp_path / "art")
    assert [[(s.start, s.end, s.label) for s in d] for d in exported.predict(texts)] == [
        [(s.start, s.end, s.label) for s in d] for d in predictor.predict(texts)
    ]


def test_training_stops_where_the_held_out_aupr_stops_rising(tiny_bert, tmp_path):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    # A learning rate too small to move the ranking: the held-out AUPR never improves on the first evaluation.
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN]
    overrides += ["train.epochs=8", "train.early_stopping_patience=2", "train.learning_rate=1e-12"]
    overrides += ["segments.evaluation_negatives=5"]  # the evaluation reads a weighted sample of the negatives
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "flat")
    training = result.run["encoder_training"]
    assert training["ended_by"].startswith("plateau (2 evaluations")
    assert training["epochs"] == 3 and training["best_epoch"] == 1 and training["last_gain"] == 0
    # A sampled evaluation has no documents to decode: its curve holds the segment AUPR alone.
    assert all(set(point) == {"epoch", "segment_aupr"} for point in training["held_out_curve"])


def test_the_frozen_layer_cache_replays_what_the_frozen_layers_compute(tiny_bert):
    import torch
    from transformers import AutoModelForTokenClassification

    from toolkit.tasks.segments.frozen_layers import FrozenLayerCache

    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(str(tiny_bert), num_labels=3).eval()
    cache = FrozenLayerCache(model, frozen=1)
    ids = torch.tensor([[2, 40, 41, 42, 3], [2, 50, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        whole = model(input_ids=ids, attention_mask=mask).logits
        first = cache.forward(model, {"input_ids": ids, "attention_mask": mask}).logits
        # The same inputs in another batch, padded wider: replayed, not recomputed.
        wider = torch.cat([ids, torch.zeros((2, 3), dtype=torch.long)], dim=1)
        again = cache.forward(model, {"input_ids": wider, "attention_mask": torch.cat([mask, mask[:, :3] * 0], 1)})
    torch.testing.assert_close(first[mask.bool()], whole[mask.bool()], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(again.logits[:, :5][mask.bool()], whole[mask.bool()], atol=1e-5, rtol=1e-5)
    report = cache.report()
    assert {k: report[k] for k in ("inputs_computed", "inputs_replayed", "hit_rate", "evicted")} == {
        "inputs_computed": 2,
        "inputs_replayed": 2,
        "hit_rate": 0.5,
        "evicted": 0,
    }
    # The model is whole again after each call: its own forward pass reads every layer.
    assert len(model.base_model.encoder.layer) == 2


def test_the_frozen_layer_cache_stays_within_its_bound_and_recomputes_what_it_evicted(tiny_bert):
    import torch
    from transformers import AutoModelForTokenClassification

    from toolkit.tasks.segments.frozen_layers import FrozenLayerCache

    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(str(tiny_bert), num_labels=3).eval()
    one = 5 * model.config.hidden_size * 4  # one input of 5 tokens' fp32 states
    cache = FrozenLayerCache(model, frozen=1, max_bytes=2 * one)
    batches = [torch.tensor([[2, 40 + k, 41, 42, 3]]) for k in range(3)]
    mask = torch.ones((1, 5), dtype=torch.long)
    with torch.no_grad():
        alone = [model(input_ids=ids, attention_mask=mask).logits for ids in batches]
        for ids in [*batches, batches[0]]:  # the first input is evicted by the third, and computed again
            out = cache.forward(model, {"input_ids": ids, "attention_mask": mask}).logits
    torch.testing.assert_close(out, alone[0], atol=1e-5, rtol=1e-5)
    report = cache.report()
    assert report["evicted"] == 2 and report["inputs_computed"] == 4 and report["inputs_replayed"] == 0
    assert cache.bytes <= 2 * one and report["peak_mb"] <= round(2 * one / 2**20, 1) + 0.1


def test_a_run_with_frozen_lower_layers_replays_them_and_leaves_them_unchanged(tiny_bert, tmp_path):
    import torch
    from transformers import AutoModelForTokenClassification

    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", "train.epochs=2", "model.train_layers=1"]
    result = run_recipe(
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, *SEGMENT_RUN]), tmp_path / "cached"
    )
    cache = result.run["encoder_training"]["frozen_layer_cache"]
    assert cache["frozen_layers"] == 1 and cache["inputs_replayed"] > cache["inputs_computed"] > 0
    before = AutoModelForTokenClassification.from_pretrained(str(tiny_bert), num_labels=3)
    after = AutoModelForTokenClassification.from_pretrained(str(result.run_dir / "model"))
    assert torch.equal(
        before.base_model.encoder.layer[0].output.dense.weight, after.base_model.encoder.layer[0].output.dense.weight
    )
    assert not torch.equal(
        before.base_model.encoder.layer[1].output.dense.weight, after.base_model.encoder.layer[1].output.dense.weight
    )


@pytest.mark.slow  # three fold trainings and a refit: about 10 s
def test_a_cross_fitted_run_scores_every_training_document_out_of_fold_and_serves_one_refit_encoder(
    tiny_bert, tmp_path
):
    from toolkit.infer import load_predictor
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import open_run
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.cross_fit import FOLDS_DIR

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN]
    overrides += ["segments.thresholds=cross_fitted", "train.epochs=3", "train.early_stopping_patience=1"]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "cross")
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    assert plan["threshold_documents"] == 12 and plan["cross_fitted"]["folds"] == 3
    assert plan["train"]["documents"] == 12  # nothing held out: the served encoder trains on every document

    crossing = result.run["cross_fitting"]
    assert crossing["folds"] == 3 and crossing["documents"] == 12
    assert [f["documents"] for f in crossing["per_fold"]] == [4, 4, 4]
    # Every gold clause of the training documents was scored by a fold encoder that did not train on it.
    clauses = crossing["out_of_fold_clauses"]
    assert clauses == {lb: row["evidence_clauses"] for lb, row in result.run["combination"].items()}
    assert sum(clauses.values()) > 0
    for fold in crossing["per_fold"]:
        assert fold["held_out_curve"] and fold["best_epoch"] is not None and fold["ended_by"]
        assert not (result.run_dir / FOLDS_DIR / "fold_0" / "checkpoints").exists()
    best = sorted(f["best_epoch"] for f in crossing["per_fold"])
    assert crossing["refit_epochs"] == float(-(-best[1] // 1))  # the median best epoch, in whole epochs
    assert result.run["epochs_completed"] == pytest.approx(crossing["refit_epochs"])
    training = result.run["encoder_training"]  # the refit has no held-out curve: the folds' curves stand for it
    assert training["ended_by"].startswith("refit on every training document") and not training["held_out_curve"]
    assert [f["best_epoch"] for f in training["folds"]] == [f["best_epoch"] for f in crossing["per_fold"]]

    assert result.run["dev_thresholds"].startswith("fitted with the combination on 12 training documents scored out")
    report, kept = result.run["combination"], result.run["encoder_kept"]
    pooled = result.run["combination_pooled"]  # one decision over every label, its penalty chosen by grouped folds
    assert pooled["documents"] == 12 and pooled["departure_penalty"] > 0 and 0 < pooled["p_value"] <= 1
    assert set(result.run["combination_seconds"]) == {"stack"}  # the folds' scoring is in run.cross_fitting
    run = open_run(result.run_dir)
    for j, label in enumerate(run.labels):
        row = report[label]
        assert row["evidence_documents"] == 12 and run.meta.thresholds[j] == row["threshold"]
        assert (label in kept) == (row["uses"] == "encoder+linear")
        if "p_value" in row:
            assert 0 < row["p_value"] <= 1 and "encoder_weight" in row
    assert set(result.metrics["models"]) == {"linear", "encoder", "final"}
    assert load_predictor(result.run_dir).predict([TEXT])  # the served model loads and decides


def test_folds_are_dealt_evenly_and_a_large_set_holds_out_a_share_instead_of_cross_fitting():
    from toolkit.errors import ToolkitError
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks.segments.cross_fit import assign_folds
    from toolkit.tasks.segments.evidence import choose_strategy

    folds = assign_folds(10, 3, seed=13)
    assert sorted(folds.count(f) for f in range(3)) == [3, 3, 4] and folds == assign_folds(10, 3, seed=13)
    assert folds != assign_folds(10, 3, seed=14)
    recipe = load_recipe(
        REPO / "recipes" / "demo_segments_mlm.yaml", [*SEGMENT_RUN, "segments.thresholds=cross_fitted"]
    )
    crossed, above = choose_strategy(recipe, 200), choose_strategy(recipe, 201)
    assert crossed.name == "cross_fitted" and crossed.scored == list(range(200)) and not crossed.held
    assert (
        above.name == "held_out" and above.held == above.scored and len(above.held) == 50
    )  # SEGMENT_RUN: held_out_share 0.25
    assert above.why.startswith("held-out share 0.25 (50 documents): 201 training documents is above")
    # Segment inputs train to their plateau on a share of the other documents, never on the held ones.
    assert len(above.stopping) == round(151 * 0.2) and not set(above.stopping) & set(above.held)
    assert not crossed.stopping  # each fold draws its own from its training documents
    with pytest.raises(ToolkitError, match="at least 2 training documents besides each fold's own"):
        choose_strategy(recipe, 2)
    assert "cross_fit_max_documents (200)" in above.why
    unbounded = recipe.model_copy(
        update={"segments": recipe.segments.model_copy(update={"cross_fit_max_documents": None})}
    )
    assert choose_strategy(unbounded, 5000).name == "cross_fitted"
    held = recipe.model_copy(update={"segments": recipe.segments.model_copy(update={"thresholds": "held_out"})})
    assert (
        choose_strategy(held, 10).name == "held_out" and "segments.thresholds=held_out" in choose_strategy(held, 10).why
    )


def test_too_few_clauses_names_where_they_were_counted_and_the_fix_that_applies():
    from toolkit.data.schema import Span, SpanRecord
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks.segments.thresholding import tuning_note

    recipe = load_recipe(
        REPO / "recipes" / "demo_segments_mlm.yaml", [*SEGMENT_RUN, "segments.thresholds=cross_fitted"]
    )
    records = [SpanRecord(id="d", text="a clause.", spans=[Span(start=0, end=9, label="A")])]
    crossed = tuning_note(recipe, records, ["A"], out_of_fold=True)["too_few_to_tune"]
    assert crossed.startswith("fewer than 20 out-of-fold training clauses for {'A': 1}")
    assert "held_out_share" not in crossed  # every training document was already scored
    assert "raise segments.held_out_share" in tuning_note(recipe, records, ["A"])["too_few_to_tune"]


@pytest.mark.parametrize("thresholds", ["cross_fitted", "held_out"])
def test_no_encoder_trains_stops_or_keeps_its_epoch_on_a_document_whose_scores_feed_the_stack(
    tiny_bert, tmp_path, monkeypatch, thresholds
):
    """Every encoder trained (each fold's, the served one) is watched: the documents it trains on and those it
    is evaluated on after each epoch (which stop it and choose its kept epoch) never include a training document
    that encoder then scores for the thresholds and the combination."""
    from toolkit.infer.segment_classifier import SegmentClassifier
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.method import SegmentClassification

    def weights(model) -> float:  # the trained encoder, in memory or saved and loaded again
        return sum(float(w.detach().double().abs().sum()) for w in model.parameters())

    seen: dict[float, set[str]] = {}  # an encoder (its trained weights) -> the texts it trained or chose its epoch on
    scored: list[tuple[float, set[str]]] = []
    training_texts: set[str] = set()
    stage = SegmentClassification.train_stage

    def watched_stage(self, recipe, run_dir, p, **options):
        texts = {p.train_records[w.doc].text for w in p.train.windows}
        if not p.evaluation.on_dev:
            texts |= {r.text for r in p.evaluation.records}
        training_texts.update(texts | {r.text for r in p.threshold_records})
        trained = stage(self, recipe, run_dir, p, **options)
        seen.setdefault(weights(trained.trainer.model), set()).update(texts)
        return trained

    def watched(method):
        def score(self, texts, *args, **kwargs):
            scored.append((weights(self.model), set(texts)))
            return method(self, texts, *args, **kwargs)

        return score

    monkeypatch.setattr(SegmentClassification, "train_stage", watched_stage)
    monkeypatch.setattr(SegmentClassifier, "score_encoder", watched(SegmentClassifier.score_encoder))
    monkeypatch.setattr(SegmentClassifier, "score", watched(SegmentClassifier.score))
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN, "data.max_train_docs=8"]
    overrides += [f"segments.thresholds={thresholds}", "segments.encoder_folds=2", "train.epochs=2"]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "run")

    feeding = [(model, texts & training_texts) for model, texts in scored if texts & training_texts]
    assert feeding, "no training document was scored: the test watched nothing"
    for model, texts in feeding:
        assert model in seen and not texts & seen[model]
    stages = result.run["stage_seconds"]  # the whole run's wall time, by stage, beside the training's alone
    assert set(stages) == {"prepare", "train", "save_and_evaluate"}
    assert result.run["wall_seconds"] == pytest.approx(sum(stages.values()), abs=0.2)
    assert result.run["wall_seconds"] > result.run["train_seconds"]
    encoders = len(seen)
    assert encoders == (3 if thresholds == "cross_fitted" else 1)  # two folds and the refit, or the served one
    if thresholds == "cross_fitted":
        for fold in result.run["cross_fitting"]["per_fold"]:
            assert fold["stopped_on_documents"] >= 1 and fold["trained_on_documents"] >= 1
        assert result.run["cross_fitting"]["refit_horizon"] == 2.0  # the folds' schedule, not the refit's epochs
    else:
        plan = json.loads((result.run_dir / "data_report.json").read_text())
        assert plan["stopping_documents"] >= 1 and plan["threshold_documents"] == 2


def test_a_dry_run_estimates_each_stage_from_a_few_timed_steps(tiny_bert, tmp_path):
    """--dry-run times a training step, scoring and the linear model on this machine and sizes every stage of the
    run from them: the folds and the refit of cross-fitting, the linear prior, dev scoring, as a range of epochs."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import plan_recipe
    from toolkit.tasks.segments.cost import estimate, sizes_of

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN]
    overrides += ["segments.thresholds=cross_fitted", "train.epochs=4", "train.early_stopping_patience=1"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    cost = plan_recipe(recipe)["cost_estimate"]
    assert set(cost["stages"]) == {"linear_prior", "fold_0", "fold_1", "fold_2", "refit", "dev_scoring"}
    # 8 documents an encoder: the prior expects a stop past the cap of 4 (expected_stop), so the cap
    epochs = {"low": 2.0, "expected": 4.0, "high": 4.0, "steps_per_epoch": cost["epochs"]["steps_per_epoch"]}
    assert cost["epochs"] == epochs
    assert all(0 <= v["low"] <= v["expected"] <= v["high"] for v in cost["stages"].values())
    assert all(cost["stages"][stage]["low"] > 0 for stage in ("fold_0", "refit"))
    assert cost["seconds"]["low"] < cost["seconds"]["high"] and cost["precision"] == "fp32"
    assert set(cost["timed"]) == {"step_seconds", "step_seconds_seen_inputs", "scoring_seconds_per_input"}

    # The stages follow from the unit costs: twice the step's seconds, twice the training stages.
    from toolkit.tasks.segments.method import SegmentClassification

    sizes = sizes_of(recipe, SegmentClassification().prepare(recipe, fit_linear=False), 12)
    units = {"step_seconds": 1.0, "step_seconds_seen_inputs": 0.5, "scoring_seconds_per_input": 0.0}
    once, twice = (estimate(recipe, sizes, {k: v * f for k, v in units.items()}, None) for f in (1, 2))
    assert twice["stages"]["refit"]["high"] == pytest.approx(2 * once["stages"]["refit"]["high"], rel=0.01)
    steps = once["epochs"]["steps_per_epoch"]
    assert once["stages"]["refit"]["high"] == pytest.approx(steps * (1.0 + 3 * 0.5), rel=0.05)  # 4 epochs, 3 seen


UNITS = {"step_seconds": 1.0, "step_seconds_seen_inputs": 0.5, "scoring_seconds_per_input": 0.01}


def test_the_expected_stop_falls_with_the_documents_and_keeps_within_the_patience_and_the_cap(tiny_bert, tmp_path):
    """The point estimate's epochs (`expected`): fewer the more documents an encoder trains on, never below
    patience + 1 nor above the cap; the refit trains for the expected best epoch, the stop less the patience."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks.segments.cost import epoch_range, estimate, expected_stop, sizes_of
    from toolkit.tasks.segments.method import SegmentClassification

    assert expected_stop(20) > expected_stop(80) > expected_stop(300) > 1
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN]
    overrides += ["segments.thresholds=cross_fitted", "train.epochs=20", "train.early_stopping_patience=3"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    assert epoch_range(recipe, 20, 20)[1] == round(expected_stop(20)) and epoch_range(recipe, 20, 20)[2] == 20
    assert epoch_range(recipe, 20, 10**6)[1] == 4.0  # patience + 1 at least
    assert epoch_range(recipe, 6, 10)[1] == 6  # the cap at most
    no_patience = recipe.model_copy(update={"train": recipe.train.model_copy(update={"early_stopping_patience": None})})
    assert epoch_range(no_patience, 20, 20) == (20, 20, 20)
    sizes = sizes_of(recipe, SegmentClassification().prepare(recipe, fit_linear=False), 120)  # 64 an encoder
    cost = estimate(recipe, sizes, UNITS, 5.0)
    stop, steps = cost["epochs"]["expected"], cost["epochs"]["steps_per_epoch"]
    assert 4 <= stop < 20 and cost["seconds"]["low"] < cost["seconds"]["expected"] < cost["seconds"]["high"]
    # the refit: every document, the expected best epoch (stop - 3), the first epoch fresh and the rest seen
    assert cost["stages"]["refit"]["expected"] == pytest.approx(steps * (1.0 + (stop - 4) * 0.5), rel=0.05)


def test_a_budget_lowers_the_epoch_cap_then_gives_up_cross_fitting_and_says_so(tiny_bert, tmp_path):
    """With budget.seconds the plan is sized to fit it from the timed unit costs (fixed here, so the test does not
    depend on this machine's speed): the epoch cap first, then a held-out share instead of cross-fitting, and a
    budget no epoch fits is refused before anything trains."""
    from toolkit.errors import ToolkitError
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks.segments.cost import estimate, plan_to_budget, sizes_of
    from toolkit.tasks.segments.method import SegmentClassification

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN]
    overrides += ["segments.thresholds=cross_fitted", "train.epochs=20", "train.early_stopping_patience=2"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, "budget.seconds=100000"])
    sizes = sizes_of(recipe, SegmentClassification().prepare(recipe, fit_linear=False), 12)
    full = estimate(recipe, sizes, UNITS, 5.0)["seconds"]["high"]
    same, report = plan_to_budget(recipe, sizes, UNITS, 5.0, spent=0)
    assert same == recipe and report["plan"] == "as written" and not report["gave_up"]

    def budget(seconds: float):
        return recipe.model_copy(update={"budget": recipe.budget.model_copy(update={"seconds": seconds})})

    fewer, report = plan_to_budget(budget(full * 0.6 / 0.9), sizes, UNITS, 5.0, spent=0)
    assert fewer.segments.thresholds == "cross_fitted" and 3 <= fewer.train.epochs < 20
    assert estimate(fewer, sizes, UNITS, 5.0)["seconds"]["high"] <= full * 0.6
    assert report["gave_up"][0].startswith(f"the epoch cap: 20 -> {fewer.train.epochs} epochs")
    at_three = estimate(
        fewer.model_copy(update={"train": fewer.train.model_copy(update={"epochs": 3})}), sizes, UNITS, 5.0
    )
    held, report = plan_to_budget(budget(at_three["seconds"]["high"] * 0.8 / 0.9), sizes, UNITS, 5.0, spent=0)
    assert held.segments.thresholds == "held_out" and "cross-fitting (a held-out share instead)" in report["gave_up"][0]
    # No epoch fits: the linear baseline the encoder would have been weighed against, or, without one, refused.
    same, report = plan_to_budget(budget(1.0), sizes, UNITS, 5.0, spent=0)
    assert report["linear_only"] and report["plan"] == "linear baseline" and "not one epoch" in report["gave_up"][0]
    no_prior = budget(1.0).model_copy(update={"segments": recipe.segments.model_copy(update={"linear_prior": False})})
    with pytest.raises(ToolkitError, match="not one epoch of one encoder fits"):
        plan_to_budget(no_prior, sizes, UNITS, 5.0, spent=0)


def test_a_budget_no_epoch_fits_runs_the_linear_baseline_and_says_why(tiny_bert, tmp_path, monkeypatch):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import open_run
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments import cost

    monkeypatch.setattr(cost, "time_encoder", lambda trainer: {k: 1000 * v for k, v in UNITS.items()})
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN, "budget.seconds=60"]
    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides), tmp_path / "tight")
    budget = result.run["budget"]
    assert budget["plan"] == "linear baseline" and "the run is the linear baseline" in budget["gave_up"][0]
    assert result.run["model"] == "linear" and open_run(result.run_dir).meta.task == "segment_classification"
    linear = [f"output_dir={tmp_path}", "data.max_train_docs=12", "data.max_dev_docs=4", "eval.bootstrap=20"]
    linear += ["segments.clause_starts=true", "segments.folds=3", "segments.thresholds=out_of_fold"]
    baseline = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", linear, linear_baseline=True),
                          tmp_path / "baseline")  # fmt: skip
    assert result.metrics["summary"]["jaccard_f1"] == baseline.metrics["summary"]["jaccard_f1"]


def test_a_budgeted_run_records_its_plan_and_stops_at_its_deadline(tiny_bert, tmp_path, monkeypatch, capsys):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import plan_recipe, run_recipe
    from toolkit.tasks.segments import cost

    monkeypatch.setattr(cost, "time_encoder", lambda trainer: UNITS)  # this machine's speed out of the plan
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN, "train.epochs=3"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, "budget.seconds=3600"])
    assert plan_recipe(recipe)["budget_plan"]["plan"] == "as written"  # --dry-run shows the plan the budget allows
    result = run_recipe(recipe, tmp_path / "budgeted")
    budget = result.run["budget"]
    assert budget["seconds"] == 3600 and budget["plan"] == "as written" and budget["stopped_at_deadline"] == []
    stages = result.run["stage_seconds"]  # sizing the run to its budget is part of its wall time
    assert stages["budget_sizing"] > 0 and result.run["wall_seconds"] == pytest.approx(sum(stages.values()), abs=0.3)
    assert set(budget["reserved_seconds"]) == {"dev_scoring", "scoring_held_out"}
    assert re.search(r"segments: training; [\d.]+ min of the budget's training time left", capsys.readouterr().err)
    # A deadline already past stops training after its first step, and the record says so.
    from toolkit.tasks.segments import method

    def past_deadline(recipe, prepare):
        chosen, report = cost.fit_to_budget(recipe, prepare)
        return chosen, {**report, "deadline": 0.0}

    monkeypatch.setattr(method, "fit_to_budget", past_deadline)
    result = run_recipe(recipe, tmp_path / "late")
    assert result.run["budget"]["stopped_at_deadline"] == [1] and result.run["optimizer_steps"] == 1
    assert result.run["encoder_training"]["held_out_curve"] == []  # the cut epoch is not evaluated past the deadline
    assert result.run["encoder_training"]["ended_by"] == "the run's deadline (budget.seconds)"


def test_one_frozen_layer_cache_serves_every_fold_and_the_refit(tiny_bert, tmp_path):
    """Every encoder of a cross-fitted run starts from the same pretrained weights and never trains its frozen part,
    so one cache serves them all: a second encoder gets the states the first computed, equal to its own, and the
    run computes each distinct input's states once however many encoders read it."""
    import torch

    from toolkit.models.building import build_segment_model
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments.trainer import frozen_cache

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN, "model.train_layers=1"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, "segments.thresholds=cross_fitted"])
    first, _ = build_segment_model(recipe.model, ["A"])
    second, _ = build_segment_model(recipe.model, ["A"])
    ids, mask = torch.tensor([[1, 5, 7, 2]]), torch.ones(1, 4, dtype=torch.long)
    cache = frozen_cache(recipe, first)
    cache.forward(first, {"input_ids": ids, "attention_mask": mask})
    assert frozen_cache(recipe, second, cache) is cache and cache.base is second.base_model
    replayed = cache.forward(second, {"input_ids": ids, "attention_mask": mask}).logits
    fresh = frozen_cache(recipe, second).forward(second, {"input_ids": ids, "attention_mask": mask}).logits
    assert cache.replayed == 1 and torch.allclose(replayed, fresh)

    result = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", [*overrides, "train.epochs=2",
        "segments.thresholds=cross_fitted"]), tmp_path / "run")  # fmt: skip
    report = result.run["encoder_training"]["frozen_layer_cache"]
    plan = json.loads((result.run_dir / "data_report.json").read_text())
    assert 0 < report["inputs_computed"] <= plan["train"]["windows"] and report["evicted"] == 0
    # The report covers every encoder that read the cache: more reads than the refit's own epochs made.
    refit_reads = result.run["epochs_completed"] * plan["inputs_per_epoch"]
    assert report["inputs_computed"] + report["inputs_replayed"] > 1.5 * refit_reads


class _Clock:
    """`time` for cross_fit.py: monotonic() reads from a script (then stays at its last value)."""

    def __init__(self, readings: list[float]):
        self.readings = list(readings)
        self.perf_counter = __import__("time").perf_counter

    def monotonic(self) -> float:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


@pytest.mark.parametrize("finished", [1, 0, 3])
def test_folds_the_budget_cuts_short_fall_back_to_a_finished_folds_encoder_or_to_the_linear_model(
    finished, tiny_bert, tmp_path, monkeypatch
):
    """The deadline passes while fold `finished` trains: with one finished fold its documents are the evidence and
    its encoder is served without a refit; with none the model is the linear baseline, decision for decision. With
    all 3 finished and too little time left for the refit, every document is the evidence and the last fold's
    encoder is served (a refit the deadline stops at once would serve an encoder trained less than any fold). Each
    run says what it gave up."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import open_run
    from toolkit.tasks import run_recipe
    from toolkit.tasks.segments import cost, cross_fit, method

    monkeypatch.setattr(cost, "time_encoder", lambda trainer: UNITS)
    # The trainers' own deadline (stop_at_deadline) never fires; cross_fit's clock passes it after fold `finished`.
    monkeypatch.setattr(
        method, "fit_to_budget", lambda r, prepare: (r, {**cost.fit_to_budget(r, prepare)[1], "deadline": 1e9})
    )
    # Two readings a fold (before it starts, after it trains) but the first; a reading past the deadline stops the
    # fold that reads it, and one just short of it leaves no time for the refit.
    readings = [0.0] * (2 * finished) + [2e9] if finished < 3 else [0.0] * 5 + [1e9 - 1]
    monkeypatch.setattr(cross_fit, "time", _Clock(readings))
    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *SEGMENT_RUN, "train.epochs=2"]
    overrides += ["segments.thresholds=cross_fitted", "budget.seconds=3600"]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / "cut")
    cut = result.run["cross_fitting"]["cut_short"]
    why = "the refit would not finish" if finished == 3 else f"fold {finished} was stopped"
    assert cut["finished_folds"] == finished and why in cut["why"]
    assert len(result.run["cross_fitting"]["per_fold"]) == finished
    assert any(given.startswith("the refit: ") for given in result.run["budget"]["gave_up"])
    run = open_run(result.run_dir)
    if finished:
        documents = 4 * finished  # the finished folds' documents, each scored by its fold's encoder
        assert cut["scored_documents"] == documents
        assert {row["evidence_documents"] for row in result.run["combination"].values()} == {documents}
        served = result.run["encoder_training"]  # the last finished fold's encoder, with its own curve: no refit
        assert not served["ended_by"].startswith("refit") and served["held_out_curve"]
        assert served["held_out_curve"] == result.run["cross_fitting"]["per_fold"][-1]["held_out_curve"]
        assert load_predictor_predicts(result.run_dir)
        return
    assert cut["scored_documents"] == 0 and "linear baseline" in result.run["combination_note"]
    assert run.meta.combination == [[1.0, 0.0, 0.0]] * len(run.labels)
    linear = [f"output_dir={tmp_path}", "data.max_train_docs=12", "data.max_dev_docs=4", "eval.bootstrap=20"]
    linear += ["segments.clause_starts=true", "segments.folds=3", "segments.thresholds=out_of_fold"]
    baseline = run_recipe(load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", linear, linear_baseline=True),
                          tmp_path / "baseline")  # fmt: skip
    assert result.metrics["summary"]["jaccard_f1"] == baseline.metrics["summary"]["jaccard_f1"]
    assert result.metrics["summary"]["span_f1"] == baseline.metrics["summary"]["span_f1"]


def load_predictor_predicts(run_dir) -> bool:
    from toolkit.infer import load_predictor

    return load_predictor(run_dir).predict([TEXT]) is not None
