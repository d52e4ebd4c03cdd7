"""A long .txt file read from the file as it is sliced (`toolkit.data.file_text`): the same text, the same errors
and the same prediction rows as the file read whole, and memory that does not grow with the file."""

from __future__ import annotations

import codecs
import random

import pytest
from tiny import sample_texts

from toolkit.data import documents
from toolkit.data.documents import DocumentError
from toolkit.data.file_text import FileChanged, FileText
from toolkit.data.text_encoding import decode_text, read_file_text, replace_nuls

TEXT = "Ünïcode — text ✓ 合同 \0 emoji 🙂 end.\n" * 40


@pytest.mark.parametrize(
    "data",
    [
        TEXT.encode("utf-8"),
        codecs.BOM_UTF8 + TEXT.encode("utf-8"),
        codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),  # 🙂 is a surrogate pair in UTF-16
        codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"),
        b" \t\n" * 100,
    ],
    ids=["utf8", "utf8_bom", "utf16le_bom", "utf32be_bom", "whitespace"],
)
def test_a_file_text_is_the_decoded_text_slice_for_slice(tmp_path, data):
    path = tmp_path / "doc.txt"
    path.write_bytes(data)
    expected, nuls = replace_nuls(decode_text(data))
    text = read_file_text(path)
    assert isinstance(text, FileText) and text.nuls == nuls
    small = FileText(path, text.codec, text._bytes[0], block_bytes=7)  # blocks end inside multi-byte characters
    rng = random.Random(0)
    for t in (text, small):
        assert len(t) == len(expected) and str(t) == expected and t.isspace() == expected.isspace()
        for _ in range(300):
            a, b = sorted(rng.randrange(-5, len(expected) + 5) for _ in range(2))
            assert t[a:b] == expected[a:b]
        assert [t[i] for i in (0, 1, len(expected) - 1, -1, -len(expected))] == [
            expected[i] for i in (0, 1, len(expected) - 1, -1, -len(expected))
        ]
    with pytest.raises(IndexError):
        small[len(expected)]


@pytest.mark.parametrize(
    "data",
    [
        ("Either party " * 50).encode() + b"\xff\xfe" + b"tail" * 20,
        codecs.BOM_UTF8 + b"ok" * 30 + b"\xc3",
        codecs.BOM_UTF16_LE + "ok".encode("utf-16-le") + b"\x00\xdc" + b"o\x00" * 10,  # a lone low surrogate
        ("Either party may terminate. " * 100).encode("utf-16-le"),  # no mark: NULs where UTF-16 puts them
    ],
    ids=["utf8", "utf8_bom_cut", "utf16_lone_surrogate", "utf16_without_mark"],
)
def test_a_file_text_refuses_what_decode_text_refuses_with_the_same_reason(tmp_path, data):
    path = tmp_path / "doc.txt"
    path.write_bytes(data)
    with pytest.raises(DocumentError) as whole:
        decode_text(data)
    with pytest.raises(DocumentError) as read:
        read_file_text(path)
    assert (read.value.reason, read.value.fix) == (whole.value.reason, whole.value.fix)


def test_a_file_that_changes_while_it_is_read_is_said_to_have_changed(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("Either party may terminate. " * 100, encoding="utf-8")
    text = FileText(path, "utf-8", 0, block_bytes=100)
    assert text[:6] == "Either"
    path.write_text("Either party may end it. " * 100, encoding="utf-8")
    with pytest.raises(FileChanged, match="changed while it was read"):
        text[2000:2010]


def test_a_long_text_file_is_predicted_from_the_file_as_it_is_when_read_whole(tiny_bert, tmp_path, monkeypatch):
    from test_long_documents import _untrained

    from toolkit.infer.rows import batched_rows, file_items
    from toolkit.infer.tagger import Tagger

    tagger = _untrained(tiny_bert, Tagger, labels=["Parties", "Term"], multi_label=True)
    tagger.long_document_chars, tagger.group_windows, tagger.chunk_chars = 0, 2, 257
    path = tmp_path / "contract.txt"
    path.write_text("\n\n".join(sample_texts()[:3]) + " Ünïcode — ✓ 合同.", encoding="utf-8")

    def rows(lazy_bytes: int) -> list[str]:
        monkeypatch.setattr(documents, "LAZY_TEXT_BYTES", lazy_bytes)
        items = list(file_items(str(path)))
        assert isinstance(items[0].text, FileText) == (lazy_bytes == 0)
        return [str(row) for row in batched_rows(items, tagger, "m", 1)]

    held, from_file = rows(1 << 30), rows(0)
    assert '"spans": [{' in held[0] and from_file == held


class SpanEvery100Chars:
    """A predictor that reads its text a piece at a time, as the long-document path does, and finds a span every
    100 characters (about CUAD's density under the demo tagger), as columns."""

    reads_file_text = True
    last_report: dict = {}

    def predict(self, texts, batch_size=None):
        from toolkit.spans.decoding import PredictedSpan
        from toolkit.spans.span_columns import SpanColumns

        out = []
        for text in texts:
            spans = SpanColumns()
            for lo in range(0, len(text), 200_000):
                piece = text[lo : lo + 200_000]
                spans.extend(PredictedSpan(lo + k, lo + k + 6, "Term", 0.5) for k in range(0, len(piece) - 6, 100))
            out.append(spans)
        return out


def peak_growth(tmp_path, sizes: tuple[int, int]) -> tuple[int, int]:
    """Python's peak allocations predicting and writing a .txt file of each size (bytes), after the first."""
    import tracemalloc

    from toolkit.infer.collection import ReadAhead
    from toolkit.infer.rows import batched_rows, file_items

    peaks = []
    sentence = "Either party may terminate this Agreement — on notice. "  # a dash: 2 bytes a character in a str
    for size in sizes:
        source = tmp_path / f"long_{size}.txt"
        source.write_text((sentence * (size // len(sentence) + 1))[:size], encoding="utf-8")
        tracemalloc.start()
        try:
            documents_ = ReadAhead(file_items(str(source)), 16_000)
            written = 0
            for row in batched_rows(documents_, SpanEvery100Chars(), "m", 16, ready=documents_.ready):
                written += sum(len(piece) for piece in row.pieces())
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert written > size
    return peaks[0], peaks[1]


# A 0.5M- and a 2M-character file: the longer may add this much to the peak (columns of its spans, not its text).
SIZES = (500_000, 2_000_000)
GROWTH_BYTES_PER_CHAR = 0.5


def test_predicting_a_text_file_four_times_as_long_holds_neither_its_text_nor_span_objects(tmp_path, monkeypatch):
    from toolkit.data import file_text
    from toolkit.infer import rows

    # What is held whatever the length, small beside the files: the blocks kept decoded, the text escaped at once.
    monkeypatch.setattr(file_text, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(rows, "ESCAPE_CHARS", 1 << 16)
    monkeypatch.setattr(documents, "LAZY_TEXT_BYTES", 1 << 18)  # both files read from the file
    short, long = peak_growth(tmp_path, SIZES)
    bound = GROWTH_BYTES_PER_CHAR * (SIZES[1] - SIZES[0])
    assert long - short < bound, f"grew {(long - short) / 1e6:.2f} MB"
    # The planted fallback: every file held whole, as before FileText, fails the same bound.
    monkeypatch.setattr(documents, "LAZY_TEXT_BYTES", 1 << 40)
    short, long = peak_growth(tmp_path, SIZES)
    assert long - short > bound, f"grew {(long - short) / 1e6:.2f} MB"
