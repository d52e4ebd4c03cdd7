"""Tiny models built from config, with tokenizers trained on the embedded sample: fast, offline tests."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from toolkit.data.sample import SAMPLE_FILES

# Tokenizers trained on the sample once and kept here. The trainers break ties between equally frequent pairs in
# a per-process hash order, so a tokenizer trained anew differed from process to process (its vocabulary and its
# ids), and with it every tiny model's training: a fixture that reached span F1 1.0 in most runs reached 0.94 in one.
TOKENIZERS = Path(__file__).resolve().parent / "fixtures" / "tokenizers"


def trained_once(name: str, train: Callable[[], object]):
    """The tokenizer kept as fixtures/tokenizers/<name>.json, trained by `train()` and kept there if missing."""
    from tokenizers import Tokenizer

    path = TOKENIZERS / f"{name}.json"
    if not path.is_file():
        TOKENIZERS.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        train().save(str(partial))
        os.replace(partial, path)  # whole or absent: workers may train it at once
    return Tokenizer.from_file(str(path))


def sample_texts() -> list[str]:
    texts = []
    for train, dev in SAMPLE_FILES.values():
        for path in (train, dev):
            texts += [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    return texts


def make_tiny_bert(
    directory: Path, hidden: int = 64, layers: int = 2, max_positions: int = 512, cased: bool = False
) -> Path:
    """A 2-layer BERT with a WordPiece tokenizer trained on the embedded sample (lower-cased, as MiniLM's
    and BiomedBERT's; `cased=True` keeps case and accents, as BioBERT's and bert-base-cased's)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    def train() -> Tokenizer:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=not cased, strip_accents=False if cased else None)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok.train_from_iterator(sample_texts(), trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials))
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return tok

    tok = trained_once(f"wordpiece_{'cased' if cased else 'uncased'}", train)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_positions,
        do_lower_case=not cased,
    )
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=max_positions,
        pad_token_id=0,
    )
    directory.mkdir(parents=True, exist_ok=True)
    import torch

    torch.manual_seed(0)  # the same tiny model on every run
    BertModel(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_tiny_llama(directory: Path, hidden: int = 64, layers: int = 2) -> Path:
    """A 2-layer Llama with a byte-level BPE tokenizer trained on the embedded sample (SmolLM2-style specials)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    def train() -> Tokenizer:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        prompts = [
            "Extract the spans of these labels, copied verbatim from the text: Chemical, Disease.\nText:\nSpans:\n"
            "none\n"
        ] * 20
        tok.train_from_iterator(
            sample_texts() + prompts,
            trainers.BpeTrainer(
                vocab_size=900, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
            ),
        )
        return tok

    tok = trained_once("byte_bpe", train)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token="<|im_start|>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=2048,
        bos_token_id=None,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    directory.mkdir(parents=True, exist_ok=True)
    import torch

    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def make_tiny_roberta(directory: Path, hidden: int = 64, layers: int = 2, max_tokens: int = 128) -> Path:
    """A 2-layer RoBERTa with a byte-level BPE tokenizer trained on the embedded sample (cased, `<s>`/`</s>`,
    a prefix space, offsets trimmed of it), and RoBERTa's positions: `max_tokens` plus the padding offset,
    as roberta-base's 514 positions hold 512 tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    def train() -> Tokenizer:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok.train_from_iterator(
            sample_texts(),
            trainers.BpeTrainer(
                vocab_size=900, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
            ),
        )
        tok.post_processor = processors.RobertaProcessing(
            sep=("</s>", tok.token_to_id("</s>")),
            cls=("<s>", tok.token_to_id("<s>")),
            trim_offsets=True,
            add_prefix_space=True,
        )
        return tok

    tok = trained_once("byte_bpe_roberta", train)
    fast = RobertaTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        add_prefix_space=True,
        trim_offsets=True,
        model_max_length=max_tokens,
    )
    config = RobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=max_tokens + 2,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        type_vocab_size=1,
    )
    directory.mkdir(parents=True, exist_ok=True)
    import torch

    torch.manual_seed(0)
    RobertaModel(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory
