"""Tiny models built from config, with tokenizers trained on the fly: fast, offline tests."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.sample import SAMPLE_FILES


def sample_texts() -> list[str]:
    texts = []
    for train, dev in SAMPLE_FILES.values():
        for path in (train, dev):
            texts += [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    return texts


def make_tiny_bert(directory: Path, hidden: int = 64, layers: int = 2, max_positions: int = 512) -> Path:
    """A 2-layer BERT with a WordPiece tokenizer trained on the embedded sample."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(sample_texts(), trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        model_max_length=max_positions,
    )
    config = BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=max_positions, pad_token_id=0,
    )
    directory.mkdir(parents=True, exist_ok=True)
    BertModel(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory
