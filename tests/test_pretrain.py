"""Domain-adaptive pre-training on tiny models: masking rates, packing, loss falling, reuse downstream."""

import json

import pytest
from conftest import REPO
from tiny import sample_texts

from toolkit.data.corpora import TextReport, pack_blocks, read_texts, split_blocks
from toolkit.errors import ConfigError, DataError
from toolkit.models.pretrained import load_tokenizer
from toolkit.registry.recipe_loader import load_recipe, recipe_from_dict
from toolkit.tasks.pretrain import make_blocks, masking_collator


def pretrain_recipe(model, tmp_path, task="pretrain_mlm", **pretrain):
    return recipe_from_dict(
        {
            "task": task,
            "name": "adapt",
            "output_dir": str(tmp_path),
            "data": {"train": str(tmp_path / "train.txt"), "dev": str(tmp_path / "train.txt")},
            "model": {"name": str(model), "max_length": 64, "stride": 0},
            "train": {"epochs": 30, "learning_rate": 3e-3, "batch_size": 8, "warmup_ratio": 0, "eval_every": 1000},
            "pretrain": pretrain,
        }
    )


def masked_sample(tokenizer, recipe, blocks=600):
    texts = sample_texts() * 4
    data = make_blocks(tokenizer, texts, 128, True, "mlm", recipe.pretrain.whole_word_mask)[:blocks]
    collator = masking_collator(tokenizer, recipe, seed=7)
    original = [list(b["input_ids"]) for b in data]
    out = collator([dict(b) for b in data])
    return original, out["input_ids"].tolist(), out["labels"].tolist(), data


@pytest.mark.parametrize("rates", [(0.15, 0.8, 0.1), (0.25, 0.5, 0.3)])
def test_masking_rates_match_the_config_and_special_tokens_are_never_masked(tiny_bert, tmp_path, rates):
    p, mask_share, random_share = rates
    recipe = pretrain_recipe(
        tiny_bert, tmp_path, mlm_probability=p, mask_replace_prob=mask_share, random_replace_prob=random_share
    )
    tok = load_tokenizer(str(tiny_bert))
    original, inputs, labels, _ = masked_sample(tok, recipe)
    special = set(tok.all_special_ids)
    selected = masked = randomised = unchanged = candidates = 0
    for orig, ids, lab in zip(original, inputs, labels):
        for o, i, lb in zip(orig, ids, lab):
            if o in special:
                assert lb == -100 and i == o, "a special token was selected or changed"
                continue
            candidates += 1
            if lb == -100:
                assert i == o  # unselected tokens are never changed
                continue
            assert lb == o
            selected += 1
            masked += i == tok.mask_token_id
            unchanged += i == o
            randomised += i not in (o, tok.mask_token_id)
    assert candidates > 60_000
    # Binomial standard errors are about 0.0015 (selection) and 0.003-0.005 (shares): bounds of ~5 sigma.
    assert abs(selected / candidates - p) < 0.008
    assert abs(masked / selected - mask_share) < 0.02
    # A random replacement draws the original token with probability 1/|vocab|: counted as unchanged.
    assert abs(randomised / selected - random_share) < 0.02
    assert abs(unchanged / selected - (1 - mask_share - random_share)) < 0.02


def test_whole_word_masking_selects_every_piece_of_a_word(tiny_bert, tmp_path):
    recipe = pretrain_recipe(tiny_bert, tmp_path, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0)
    tok = load_tokenizer(str(tiny_bert))
    _, inputs, labels, data = masked_sample(tok, recipe, blocks=100)
    words_checked = 0
    for block, lab in zip(data, labels):
        offsets = block["offset_mapping"]
        word = []
        for k in range(len(offsets) + 1):
            new_word = k == len(offsets) or offsets[k][0] != offsets[k - 1][1] or offsets[k] == [0, 0]
            if new_word and word:
                chosen = {lab[j] != -100 for j in word}
                assert len(chosen) == 1, "a word was masked only in part"
                words_checked += len(word) > 1
                word = []
            if k < len(offsets) and offsets[k] != [0, 0]:
                word.append(k)
    assert words_checked > 50


def test_masking_config_errors_name_the_key(tiny_bert, tmp_path):
    with pytest.raises(ConfigError, match="pretrain") as info:
        pretrain_recipe(tiny_bert, tmp_path, mask_replace_prob=0.8, random_replace_prob=0.3)
    assert "must not exceed 1" in str(info.value)
    with pytest.raises(ConfigError, match="whole_word_mask"):
        pretrain_recipe(tiny_bert, tmp_path, whole_word_mask=True)
    with pytest.raises(ConfigError, match="mlm_probability"):
        pretrain_recipe(tiny_bert, tmp_path, mlm_probability=0)


def test_packing_and_splitting_are_exact():
    docs = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    assert pack_blocks(docs, 4) == [[1, 2, 3, 4], [5, 6, 7, 8]]  # the remainder [9] is dropped
    assert split_blocks(docs, 2) == [[1, 2], [3], [4, 5], [6, 7], [8, 9]]


def test_text_sources_and_bad_lines(tmp_path):
    (tmp_path / "a.txt").write_text("First contract text.", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.txt").write_text("Second.", encoding="utf-8")
    (tmp_path / "docs" / "c.txt").write_text("   ", encoding="utf-8")
    report = TextReport()
    assert read_texts(str(tmp_path / "docs"), report=report) == ["Second."]
    assert report.documents == 1 and len(report.blank_documents) == 1  # counted, not silently dropped
    assert read_texts(str(tmp_path / "a.txt")) == ["First contract text."]
    assert len(read_texts("sample:clinical_train")) > 10  # span files: their text
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"id": "x7", "body": "no text"}\n{oops\n', encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_texts(str(bad))
    rendered = info.value.render()
    assert "bad.jsonl:2" in rendered and "x7" in rendered and "bad.jsonl:3" in rendered


def _corpus(tmp_path, repeats: int = 40):
    # A short passage repeated: a tiny model can memorise it, so the drop is large and stable.
    (tmp_path / "train.txt").write_text(" ".join(sample_texts()[:2]) * repeats, encoding="utf-8")


# Slow tier (issue 76): pre-training end to end (14 epochs, then a fine-tune); masking, packing and the config
# checks stay fast.
@pytest.mark.slow
def test_tiny_mlm_adapts_and_its_model_fine_tunes(tiny_bert, tmp_path):
    from toolkit.tasks import run_recipe

    _corpus(tmp_path)
    recipe = pretrain_recipe(tiny_bert, tmp_path)
    recipe.train.epochs, recipe.train.learning_rate = 14, 5e-3  # half the steps of 30 at 3e-3, as far
    result = run_recipe(recipe, tmp_path / "adapt")
    assert result.metrics["after"]["loss"] < result.metrics["before"]["loss"] - 2.0  # about 6.3 -> 3.4
    assert (
        result.metrics["after"]["token_accuracy"] > result.metrics["before"]["token_accuracy"] + 0.06
    )  # about 0.08 -> 0.16 on a repeated passage
    plan = json.loads((tmp_path / "adapt" / "data_report.json").read_text())
    assert plan["mlm_head_initialised_from_embeddings"] is True
    model_dir = tmp_path / "adapt" / "model"
    assert (model_dir / "model.safetensors").is_file() and (tmp_path / "adapt" / "report.md").is_file()
    # Re-scoring the saved model reproduces "after" (same blocks, same seeded masks); a fixed
    # held-out rate masks about twice the tokens at 30% as at 15%, so rates compare on equal masks.
    from toolkit.tasks.pretrain import score_heldout

    rescore = pretrain_recipe(model_dir, tmp_path)
    assert score_heldout(rescore, tmp_path / "scratch") == pytest.approx(result.metrics["after"], rel=1e-4)
    rescore.train.eval_batch_size = 3  # the loss is a per-token mean: batching does not change it
    assert score_heldout(rescore, tmp_path / "scratch") == pytest.approx(result.metrics["after"], rel=1e-4)
    at_30 = score_heldout(pretrain_recipe(model_dir, tmp_path, eval_mlm_probability=0.3), tmp_path / "scratch")
    assert 1.6 < at_30["scored_tokens"] / result.metrics["after"]["scored_tokens"] < 2.4
    # The adapted checkpoint is a normal model directory for a fine-tuning recipe.
    ft = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={model_dir}",
            f"output_dir={tmp_path}",
            "data.max_train_docs=3",
            "data.max_dev_docs=2",
            "train.epochs=1",
            "eval.bootstrap=0",
        ],
    )
    out = run_recipe(ft, tmp_path / "ft")
    assert out.run["optimizer_steps"] >= 1


# Slow tier (issue 76): pre-training end to end (40 epochs); masking, packing and the config checks stay fast.
@pytest.mark.slow
def test_tiny_clm_adapts(tiny_llama, tmp_path):
    from toolkit.tasks import run_recipe

    # A decoder memorises the passage (perplexity about 900 -> 1.0) from a few repeats; the MLM's masked
    # tokens need the 40.
    _corpus(tmp_path, repeats=8)
    recipe = pretrain_recipe(tiny_llama, tmp_path, task="pretrain_clm")
    result = run_recipe(recipe, tmp_path / "adapt")
    assert result.metrics["after"]["perplexity"] < result.metrics["before"]["perplexity"] / 10
    assert (tmp_path / "adapt" / "model" / "model.safetensors").is_file()


def test_a_pretrained_base_is_not_an_extractor(tiny_bert, tmp_path):
    from toolkit.errors import ToolkitError
    from toolkit.evaluate.evaluation import evaluate_run

    meta_dir = tmp_path / "base" / "model"
    meta_dir.mkdir(parents=True)
    (meta_dir / "toolkit.json").write_text(json.dumps({"task": "pretrain_mlm"}))
    with pytest.raises(ToolkitError, match="domain-adapted base model") as info:
        evaluate_run(tmp_path / "base", "sample:clinical_dev")
    assert "model.name" in info.value.fix
