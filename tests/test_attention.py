"""A decoder that tags with its causal mask removed (model.attention: bidirectional), in every layer or the
top N: what the layers see, padding, saving and reloading, and export."""

import json

import pytest
import torch
from conftest import OVERFIT_FIVE, REPO

from toolkit.errors import ConfigError, ToolkitError
from toolkit.models.attention import CONFIG_KEY, make_bidirectional
from toolkit.registry.recipe_loader import load_recipe


def tagger(path, implementation="sdpa"):
    from transformers import AutoModelForTokenClassification

    torch.manual_seed(0)
    return AutoModelForTokenClassification.from_pretrained(
        path, num_labels=3, attn_implementation=implementation
    ).eval()


def logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask if mask is not None else torch.ones_like(ids)).logits


def test_bidirectional_layers_see_later_tokens_and_ignore_padding(tiny_llama):
    x = torch.tensor([[11, 12, 13, 14, 15, 16, 17, 18]])
    changed = x.clone()
    changed[0, -1] = 40
    model = tagger(tiny_llama)
    # Causal: what a token reads does not depend on the tokens after it.
    assert torch.equal(logits(model, x)[0, :-1], logits(model, changed)[0, :-1])
    assert make_bidirectional(model) == 2 and model.config.to_dict()[CONFIG_KEY] == 2
    assert not torch.allclose(logits(model, x)[0, 0], logits(model, changed)[0, 0])
    # A short row padded in a batch reads as it does alone: padding is masked, only padding.
    short = torch.tensor([[21, 22, 23, 24, 25]])
    batch = torch.tensor([x[0].tolist(), short[0].tolist() + [0, 0, 0]])
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    together = logits(model, batch, mask)
    assert torch.allclose(together[1, :5], logits(model, short)[0], atol=1e-5)
    assert torch.allclose(together[0], logits(model, x)[0], atol=1e-5)
    # The eager implementation gets the same mask as an additive one: same logits.
    eager = tagger(tiny_llama, "eager")
    make_bidirectional(eager)
    assert torch.allclose(logits(eager, batch, mask)[1, :5], together[1, :5], atol=1e-5)


def test_only_the_top_layers_when_asked(tiny_llama):
    model = tagger(tiny_llama)
    assert make_bidirectional(model, 1) == 1
    layers = model.model.layers
    assert layers[0].self_attn.is_causal and not layers[1].self_attn.is_causal
    x = torch.tensor([[11, 12, 13, 14, 15, 16]])
    changed = x.clone()
    changed[0, -1] = 40
    assert not torch.allclose(logits(model, x)[0, 0], logits(model, changed)[0, 0])  # the top layer reads ahead


def test_encoders_and_generation_refuse_it(tiny_bert, tiny_llama, tmp_path):
    with pytest.raises(ConfigError, match="no causal decoder layers"):
        make_bidirectional(tagger(tiny_bert))
    with pytest.raises(ConfigError, match="needs model.attention=bidirectional"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["model.bidirectional_layers=2"])
    with pytest.raises(ConfigError, match="model.attention"):  # a generating decoder must stay causal
        load_recipe(REPO / "recipes" / "demo_clm.yaml", ["model.attention=bidirectional"])


def test_a_bidirectional_decoder_tagger_trains_reloads_alike_and_exports_in_pytorch(tiny_llama, tmp_path):
    from toolkit.deploy.export import ParityBudgets, export_run
    from toolkit.evaluate.evaluation import evaluate_run
    from toolkit.models.runtimes import load_model_dir
    from toolkit.tasks import run_recipe

    overrides = [
        f"model.name={tiny_llama}",
        f"output_dir={tmp_path}",
        *OVERFIT_FIVE,
        "model.multi_label=false",
        "eval.bootstrap=0",
    ]
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [*overrides, "model.attention=bidirectional", "model.bidirectional_layers=1", "model.lora.enabled=true"],
    )
    result = run_recipe(recipe, tmp_path / "bidi")
    assert json.loads((tmp_path / "bidi" / "model" / "config.json").read_text())[CONFIG_KEY] == 1
    # Reloaded (as eval, predict and the service load it), the model reads as it was trained.
    model = load_model_dir(tmp_path / "bidi", "AutoModelForTokenClassification")[0]
    assert model.model.layers[0].self_attn.is_causal and not model.model.layers[1].self_attn.is_causal
    _, out = evaluate_run(tmp_path / "bidi", "sample:clinical_train", tmp_path / "eval", bootstrap=0)
    saved = (tmp_path / "bidi" / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(line)["spans"] for line in saved] == [
        json.loads(line)["spans"] for line in (out / "predictions.jsonl").read_text().splitlines()[: len(saved)]
    ]
    assert result.summary["span_f1"] > 0
    manifest = export_run(tmp_path / "bidi", tmp_path / "art", parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
    assert manifest["runtime"] == "pytorch" and manifest["parity"][manifest["path"]]["argmax_agreement"] == 1.0
    assert "bidirectional" in manifest["paths"]["onnx_fp32"]["skipped"]
    with pytest.raises(ToolkitError, match="runs in PyTorch"):
        export_run(tmp_path / "bidi", tmp_path / "onnx", precision="fp32", parity_docs=5)


# Slow tier (issue 76): a second decoder trained as a tagger through the same code the bidirectional-decoder test
# covers fast.
@pytest.mark.slow
def test_gemma3_tags_through_the_same_code(tiny_llama, tmp_path):
    """Gemma 3 text models have no token-classification class in transformers 4.57: the toolkit registers the
    generic head (toolkit/models/gemma.py). A tiny random Gemma 3 with the tiny Llama's tokenizer trains, saves and
    reloads as a bidirectional tagger."""
    from transformers import AutoConfig, AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    from toolkit.evaluate.evaluation import evaluate_run
    from toolkit.tasks import run_recipe

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        sliding_window=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    Gemma3ForCausalLM(config).save_pretrained(tmp_path / "gemma")
    tokenizer.save_pretrained(tmp_path / "gemma")
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tmp_path / 'gemma'}",
            f"output_dir={tmp_path}",
            *OVERFIT_FIVE,
            "model.multi_label=false",
            "eval.bootstrap=0",
            "model.attention=bidirectional",
        ],
    )
    result = run_recipe(recipe, tmp_path / "run")
    saved = AutoConfig.from_pretrained(tmp_path / "run" / "model")
    assert saved.architectures == ["Gemma3TextForTokenClassification"] and getattr(saved, CONFIG_KEY) == 2
    metrics, _ = evaluate_run(tmp_path / "run", "sample:clinical_train", tmp_path / "eval", bootstrap=0)
    assert result.summary["span_f1"] > 0 and metrics["counts"]["documents"] > 0
