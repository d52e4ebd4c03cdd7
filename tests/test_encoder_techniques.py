"""Issue 15's encoder options: valid-sequence decoding, error analysis, per-layer learning rates,
checkpoint averaging and multi-corpus training."""

import json

import numpy as np
import pytest
from conftest import OVERFIT_FIVE, REPO

from toolkit.data.records import draw_documents, load_records, load_splits
from toolkit.data.schema import Span
from toolkit.errors import ConfigError, ToolkitError
from toolkit.evaluate.reporting import error_lines
from toolkit.registry.recipe_loader import load_recipe
from toolkit.spans.decoding import decode_flat, decode_multi_label
from toolkit.spans.error_analysis import analyse_errors
from toolkit.spans.label_space import LabelSpace, flat_tags
from toolkit.spans.viterbi import iob2_transitions, viterbi_path
from toolkit.tasks.optimization import learning_rates, parameter_depth

TAGS = flat_tags(["A", "B"])  # O, B-A, I-A, B-B, I-B


def probs(rows):
    return np.array(rows, dtype=float)


def test_viterbi_never_starts_a_span_with_i_and_keeps_valid_argmax_paths():
    allowed, first = iob2_transitions(TAGS)
    assert not first[TAGS.index("I-A")] and first[TAGS.index("B-A")]
    assert not allowed[TAGS.index("B-B"), TAGS.index("I-A")] and allowed[TAGS.index("B-A"), TAGS.index("I-A")]
    # Argmax reads O I-A I-A: an orphan I. The best valid path starts the span at the first word.
    p = probs([[0.50, 0.45, 0.05, 0, 0], [0.2, 0.1, 0.7, 0, 0], [0.2, 0.1, 0.7, 0, 0]])
    assert [TAGS[i] for i in viterbi_path(p, allowed, first)] == ["B-A", "I-A", "I-A"]
    # A valid argmax path is left alone.
    p = probs([[0.1, 0.8, 0.1, 0, 0], [0.1, 0.1, 0.8, 0, 0], [0.9, 0.05, 0.05, 0, 0]])
    assert list(viterbi_path(p, allowed, first)) == list(p.argmax(-1))
    assert len(viterbi_path(np.zeros((0, 5)), allowed, first)) == 0


def test_viterbi_finds_the_best_allowed_path_by_exhaustive_search():
    """Against every tag sequence of 5 words: the most probable allowed one, whether or not the argmax path
    is allowed (which the decoder returns without searching)."""
    import itertools

    allowed, first = iob2_transitions(TAGS)
    rng = np.random.default_rng(0)
    greedy_allowed = 0
    for concentration in (0.3, 1.0, 5.0):
        for _ in range(40):
            p = rng.dirichlet([concentration] * len(TAGS), size=5)
            paths = [
                path
                for path in itertools.product(range(len(TAGS)), repeat=5)
                if first[path[0]] and all(allowed[a, b] for a, b in zip(path, path[1:]))
            ]
            best = max(paths, key=lambda path: sum(np.log(p[t, k]) for t, k in enumerate(path)))
            assert tuple(viterbi_path(p, allowed, first)) == best
            greedy_allowed += tuple(p.argmax(-1)) in paths
    assert 0 < greedy_allowed < 120  # both branches ran


def test_viterbi_joins_a_span_that_argmax_fragments():
    text = "acute renal failure here"
    offsets = [(0, 5), (6, 11), (12, 19), (20, 24)]
    word_ids = [0, 1, 2, 3]
    # "renal" is doubtful (O slightly above I-A): argmax gives two spans, viterbi one.
    p = probs([[0.05, 0.9, 0.05, 0, 0], [0.5, 0.05, 0.45, 0, 0], [0.1, 0.05, 0.85, 0, 0], [0.9, 0.05, 0.05, 0, 0]])
    argmax = decode_flat(offsets, word_ids, p, TAGS, text=text)
    viterbi = decode_flat(offsets, word_ids, p, TAGS, text=text, decoding="viterbi")
    assert [text[s.start : s.end] for s in argmax] == ["acute", "failure"]
    assert [text[s.start : s.end] for s in viterbi] == ["acute renal failure"]
    # Multi-label decodes each label's O/B/I layer the same way.
    layer = p[:, :3]
    multi = decode_multi_label(
        offsets, word_ids, np.concatenate([layer, layer], axis=1), ["A", "B"], text=text, decoding="viterbi"
    )
    assert [(text[s.start : s.end], s.label) for s in multi] == [
        ("acute renal failure", "A"),
        ("acute renal failure", "B"),
    ]


def test_label_space_keeps_its_decoding_and_reads_old_models_as_argmax():
    from toolkit.rundir import model_meta

    space = LabelSpace(("A",), False, False, "viterbi")
    assert model_meta(task="token_classification", **space.to_meta()).space == space
    old = {k: v for k, v in space.to_meta().items() if k != "decoding"}  # saved before `decoding` existed
    assert model_meta(**old).space.decoding == "argmax" and model_meta(**old).task == "token_classification"


def S(a, b, label="D"):
    return Span(start=a, end=b, label=label)


def test_error_analysis_names_each_kind():
    text = "hereditary breast cancer and colon cancer in male patients with tumors"
    #       0         11     18     25  29    35     42 45   50       59   64
    gold = [S(0, 24), S(29, 41), S(45, 58), S(64, 70)]
    pred = [
        S(11, 24),  # start late by one word: "hereditary" missing
        S(29, 34),
        S(35, 41),  # two fragments of "colon cancer": split
        S(
            45, 49, "X"
        ),  # wrong label? no: different offsets, so the gold span is missed by label and X is a false positive
        S(50, 58),  # start late by one word ("male")
    ]
    a = analyse_errors([text], [gold], [pred])
    kinds = {k: v["count"] for k, v in a["kinds"].items()}
    assert kinds["start late"] == 2 and a["kinds"]["start late"]["one_word"] == 2
    assert kinds["split span"] == 2
    assert kinds["false positive"] == 1 and a["top_false_positives"] == [("male", 1)]
    assert kinds["missed"] == 1 and a["top_missed"] == [("tumors", 1)]
    assert ("missing: hereditary", 1) in a["top_boundary_words"] and ("missing: male", 1) in a["top_boundary_words"]
    assert a["exact_matches"] == 0
    merged = analyse_errors([text], [gold], [[S(0, 41)]])
    assert merged["kinds"]["merged spans"]["count"] == 1
    relabelled = analyse_errors([text], [[S(0, 24)]], [[S(0, 24, "X")]])
    assert relabelled["kinds"]["wrong label"]["count"] == 1 and relabelled["kinds"]["false positive"]["count"] == 0
    assert any("Errors by kind" in line for line in error_lines(a))


def test_layer_depths_and_rates():
    assert parameter_depth("bert.embeddings.word_embeddings.weight", 6) == 0
    assert parameter_depth("bert.encoder.layer.0.attention.self.query.weight", 6) == 1
    assert parameter_depth("bert.encoder.layer.5.output.dense.weight", 6) == 6
    assert parameter_depth("model.layers.3.mlp.up_proj.weight", 30) == 4
    assert parameter_depth("model.norm.weight", 30) == 31
    names = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.output.dense.weight", "classifier.weight"]
    rates = learning_rates(names, ["classifier.weight"], 2, 1e-4, 0.5, 1e-3)
    assert rates == pytest.approx({names[0]: 1e-4 * 0.5**3, names[1]: 1e-4 * 0.5, "classifier.weight": 1e-3})
    assert learning_rates(names, ["classifier.weight"], 2, 1e-4, None, None) == dict.fromkeys(names, 1e-4)


def test_draw_documents_by_weight():
    records = load_records("sample:clinical_train")
    n = len(records)
    assert len(draw_documents(records, 1.0, 0)) == n
    half = draw_documents(records, 0.5, 0)
    assert len(half) == round(n / 2) and len({r.id for r in half}) == len(half)
    assert len(draw_documents(records, 2.5, 0)) == 2 * n + round(n / 2)


def test_extra_corpus_is_mapped_weighted_and_reported():
    cfg = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            "data.train=sample:clinical_train",
            "data.dev=sample:contracts_dev",
            "data.max_dev_docs=null",
            "data.extra_train=[{path: 'sample:clinical_dev', "
            "label_map: {Chemical: '', Disease: Condition}, weight: 0.5}]",
        ],
    )
    sources: list[dict] = []
    train, dev = load_splits(cfg.data, cfg.seed, sources)
    main, extra = sources
    assert main["documents_per_epoch"] == main["documents"] == len(load_records("sample:clinical_train"))
    assert extra["documents_per_epoch"] == round(extra["documents"] * 0.5)
    assert set(extra["spans_per_epoch"]) == {"Condition"} and extra["spans_dropped_by_label_map"]["Chemical"] > 0
    assert len(train) == main["documents_per_epoch"] + extra["documents_per_epoch"]
    # Dev is data.dev alone, untouched by the extra corpus's map.
    assert [r.id for r in dev] == [r.id for r in load_records("sample:contracts_dev")]


def test_extra_corpus_holding_dev_documents_is_refused():
    cfg = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            "data.train=sample:clinical_train",
            "data.dev=sample:clinical_dev",
            "data.extra_train=[{path: 'sample:clinical_dev'}]",
        ],
    )
    with pytest.raises(ToolkitError, match="also in data.dev"):
        load_splits(cfg.data, cfg.seed)


def test_encoder_options_refused_elsewhere_with_their_keys():
    with pytest.raises(
        ConfigError,
        match=r"train.layer_lr_decay: not an option of span_generation recipes \(it belongs to token_classification\)",
    ):
        load_recipe(REPO / "recipes" / "demo_clm.yaml", ["train.layer_lr_decay=0.9"])
    with pytest.raises(ConfigError, match="data.extra_train: not an option of span_generation"):
        load_recipe(REPO / "recipes" / "demo_clm.yaml", ["data.extra_train=[{path: x}]"])
    with pytest.raises(ConfigError, match="save_total_limit >= 3"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["train.average_checkpoints=3"])
    with pytest.raises(ConfigError, match="layer_lr_decay"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["train.layer_lr_decay=1.5"])


def test_tiny_run_with_every_option(tiny_bert, tmp_path):
    from toolkit.infer.tagger import Tagger
    from toolkit.tasks import run_recipe

    cfg = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            *OVERFIT_FIVE,
            "eval.bootstrap=0",
            "model.decoding=viterbi",
            "train.layer_lr_decay=0.8",
            "train.head_learning_rate=1e-2",
            "train.max_steps=6",
            "train.eval_every=2",
            "train.logging_steps=2",
            "train.save_total_limit=3",
            "train.average_checkpoints=3",
            "data.extra_train=[{path: 'sample:clinical_dev', weight: 0.1}]",
        ],
    )
    result = run_recipe(cfg, tmp_path / "demo_mlm")
    assert result.run["averaged_checkpoints"] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    # The Trainer logs its first group's rate: the embeddings', 0.8^3 of the base rate (2 layers + head).
    logged = [
        e
        for e in map(json.loads, (tmp_path / "demo_mlm" / "train_log.jsonl").read_text().splitlines())
        if "learning_rate" in e
    ]
    schedule = [3e-3 * (6 - k) / 6 for k in range(7)]  # linear decay over 6 steps, no warmup
    assert any(logged[0]["learning_rate"] == pytest.approx(r * 0.8**3) for r in schedule[1:-1])
    assert not any(logged[0]["learning_rate"] == pytest.approx(r) for r in schedule[1:-1])
    assert Tagger.load(tmp_path / "demo_mlm").space.decoding == "viterbi"
    plan = json.loads((tmp_path / "demo_mlm" / "data_report.json").read_text())
    assert [c["path"] for c in plan["train_corpora"]] == [cfg.data.train, "sample:clinical_dev"]
    assert "## Errors by kind" in (tmp_path / "demo_mlm" / "report.md").read_text()
    # The decoding travels with an exported artifact, so the service decodes as eval did.
    from toolkit.deploy.export import export_run

    export_run(tmp_path / "demo_mlm", tmp_path / "artifact", precision="fp32", parity_docs=2)
    assert Tagger.load(tmp_path / "artifact").space.decoding == "viterbi"
    assert json.loads((tmp_path / "artifact" / "manifest.json").read_text())["decoding"] == "viterbi"


def test_train_layers_freezes_the_embeddings_and_lower_layers_and_trains_the_top(tiny_bert, tmp_path):
    """model.train_layers=1 on a two-layer encoder: after training, the embeddings and layer 0 are the
    pretrained weights bit for bit, layer 1 and the head moved, and the plan counts only what trained."""
    import torch
    from transformers import AutoModel

    from toolkit.tasks import run_recipe

    overrides = [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *OVERFIT_FIVE, "eval.bootstrap=0"]
    with pytest.raises(ConfigError, match="model.train_layers"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", [*overrides, "model.train_layers=1", "model.lora.enabled=true"])
    cfg = load_recipe(REPO / "recipes" / "demo_mlm.yaml", [*overrides, "model.train_layers=1", "train.max_steps=4"])
    run_recipe(cfg, tmp_path / "top")
    before = AutoModel.from_pretrained(tiny_bert).state_dict()
    from safetensors.torch import load_file

    after = {k.removeprefix("bert."): v for k, v in load_file(tmp_path / "top" / "model" / "model.safetensors").items()}
    frozen = [k for k in before if k.startswith("embeddings.") or k.startswith("encoder.layer.0.")]
    top = [k for k in before if k.startswith("encoder.layer.1.") and k.endswith("weight")]
    assert frozen and top
    assert all(torch.equal(before[k], after[k]) for k in frozen)
    assert all(not torch.equal(before[k], after[k]) for k in top)
    plan = json.loads((tmp_path / "top" / "data_report.json").read_text())
    assert plan["trainable_parameters"] < plan["parameters"]
    assert plan["trainable_parameters"] == plan["parameters"] - sum(before[k].numel() for k in frozen)


def test_lora_adapts_attention_projections_where_peft_has_no_default():
    """peft knows BERT's and Llama's projections; MPNet's and DistilBERT's come from the toolkit; an unknown
    architecture is a config error that asks for model.lora.target_modules (not peft's ValueError)."""
    from types import SimpleNamespace

    from toolkit.models.building import default_lora_targets

    assert default_lora_targets(SimpleNamespace(model_type="bert")) is None  # peft's own default
    assert default_lora_targets(SimpleNamespace(model_type="mpnet")) == ["q", "v"]
    with pytest.raises(ConfigError, match="no default modules to adapt in a 'made_up' model") as e:
        default_lora_targets(SimpleNamespace(model_type="made_up"))
    assert "model.lora.target_modules" in str(e.value.fix)
