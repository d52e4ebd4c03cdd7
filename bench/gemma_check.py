"""Gemma 3 270M's rebuilt tokenizer against SentencePiece itself, and perplexity as a sanity figure (issue 29).

    make gemma && .venv/bin/python bench/gemma_check.py --data ../shared/data/cuad/dev.jsonl --docs 20

1. The reference: a SentencePiece BPE model built from the GGUF's own pieces, scores and types (what
   Gemma's tokenizer.model is), encoding the first `--docs` documents whole. The toolkit's tokenizer
   (`toolkit/gemma.py`) must give the very same ids; transformers 4.57's GGUF reading (Unigram) is shown
   beside it with its token count.
2. Perplexity of the converted model on `--passages` passages of `--tokens` tokens cut from those
   documents, with BOS first, for the rebuilt tokenizer and for transformers' GGUF tokenizer; SmolLM2 (the
   default decoder) on the same passages for scale (different tokenizers: per-token figures are not
   comparable across models, bits per character are).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.data.records import load_records  # noqa: E402
from toolkit.gemma import _assemble_gguf, gemma_tokenizer_from_gguf  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.pretrained import default_decoder, resolve_model_name  # noqa: E402


def sentencepiece_reference(gguf: Path):
    """A SentencePiece processor holding the GGUF's vocabulary as Gemma's BPE model (types are numbered alike)."""
    import sentencepiece as spm
    from gguf import GGUFReader
    from sentencepiece import sentencepiece_model_pb2 as pb

    fields = GGUFReader(gguf).fields
    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = True
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id, proto.trainer_spec.pad_id = (
        3,
        2,
        1,
        0,
    )
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = False
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    for token, score, kind in zip(
        fields["tokenizer.ggml.tokens"].contents(),
        fields["tokenizer.ggml.scores"].contents(),
        fields["tokenizer.ggml.token_type"].contents(),
    ):
        piece = proto.pieces.add()
        piece.piece = token.replace(" ", "▁") if kind == 4 else token
        piece.score = score
        piece.type = kind
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(proto.SerializeToString())
    return processor


def perplexity(model, passages: list[list[int]]) -> float:
    import torch

    nll, count = 0.0, 0
    with torch.inference_mode():
        for ids in passages:
            x = torch.tensor([ids])
            loss = model(input_ids=x, labels=x).loss.item()
            nll += loss * (len(ids) - 1)
            count += len(ids) - 1
    return math.exp(nll / count), nll, count


def passages_of(tokenizer, texts: list[str], n: int, length: int, bos: bool) -> tuple[list[list[int]], int]:
    """Up to n passages of `length` tokens (BOS first when asked) and the characters they cover."""
    out, chars = [], 0
    for text in texts:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        body = length - int(bos)
        for start in range(0, len(ids) - body + 1, body):
            piece = ids[start : start + body]
            chars += offsets[start + body - 1][1] - offsets[start][0]
            out.append(([tokenizer.bos_token_id] if bos else []) + piece)
            if len(out) == n:
                return out, chars
    return out, chars


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="../shared/data/cuad/dev.jsonl")
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--passages", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    header = benchmark_header()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = [r.text for r in load_records(args.data, args.docs)]
    result: dict = {"machine": header, "data": args.data, "docs": len(texts)}
    with tempfile.TemporaryDirectory() as tmp:
        gguf = _assemble_gguf(Path(tmp))
        if gguf is None:
            sys.exit("gemma3-270m is not installed: make gemma")
        ours = gemma_tokenizer_from_gguf(gguf)
        reference = sentencepiece_reference(gguf)
        unigram = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    t0 = time.perf_counter()
    ours_ids = [ours(t, add_special_tokens=False)["input_ids"] for t in texts]
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference_ids = [reference.encode(t) for t in texts]
    reference_s = time.perf_counter() - t0
    unigram_count = sum(len(unigram(t, add_special_tokens=False)["input_ids"]) for t in texts)
    differing = [i for i, (a, b) in enumerate(zip(ours_ids, reference_ids)) if a != b]
    chars = sum(len(t) for t in texts)
    result["tokenizer"] = {
        "characters": chars,
        "tokens_rebuilt_bpe": sum(map(len, ours_ids)),
        "tokens_sentencepiece": sum(map(len, reference_ids)),
        "tokens_transformers_gguf_unigram": unigram_count,
        "documents_differing_from_sentencepiece": len(differing),
        "decode_round_trip": all(ours.decode(ids) == t for ids, t in zip(ours_ids, texts)),
        "seconds_rebuilt_bpe": round(ours_s, 2),
        "seconds_sentencepiece": round(reference_s, 2),
        "example": {
            "text": "The Licensee shall not assign this Agreement.",
            "pieces": ours.tokenize("The Licensee shall not assign this Agreement."),
            "pieces_unigram": unigram.tokenize("The Licensee shall not assign this Agreement."),
        },
    }
    print(json.dumps(result["tokenizer"], indent=1), flush=True)

    rows = {}
    path = resolve_model_name("gemma3-270m")
    for name, model_path, tokenizer, bos in (
        ("gemma3-270m, rebuilt BPE tokenizer", path, ours, True),
        ("gemma3-270m, transformers' GGUF tokenizer", path, unigram, True),
        ("SmolLM2-135M (default decoder)", default_decoder(), None, False),
    ):
        tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path).eval()
        passages, covered = passages_of(tokenizer, texts, args.passages, args.tokens, bos)
        ppl, nll, count = perplexity(model, passages)
        rows[name] = {
            "perplexity": round(ppl, 2),
            "bits_per_character": round(nll / math.log(2) / covered, 3),
            "passages": len(passages),
            "tokens_scored": count,
        }
        print(name, rows[name], flush=True)
        del model
    result["perplexity"] = rows
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
