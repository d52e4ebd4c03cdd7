"""Memory, measured: a document read through `spans.streaming` peaks at about the same RSS whatever its length,
for ordinary text and for text without whitespace; a planted fallback to reading the whole document fails the
same measurement. Each kind of text is read in a process of its own: the shorter document first, then the longer,
each peak read after its reading (the peak only rises, so the longer one's growth shows)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Characters of the shorter document; the longer one has GROWTH_FACTOR times as many.
N_CHARS = 1_000_000
GROWTH_FACTOR = 4
# What the longer document's reading may add to the shorter one's peak: a few pieces' tokens, not the document's.
MAX_GROWTH_MB = 50

READ = r"""
import base64, json, random, sys
from tokenizers import Tokenizer
from toolkit.spans import streaming


class Fast:
    # What spans.streaming asks of a transformers fast tokenizer, over the same Rust tokenizer: importing
    # transformers (and with it torch) would cost seconds and hundreds of MB before the first reading.
    def __init__(self, path):
        self.tok = Tokenizer.from_file(path + "/tokenizer.json")

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False):
        enc = self.tok.encode(text, add_special_tokens=add_special_tokens)
        return Encoding(enc)


class Encoding(dict):
    def __init__(self, enc):
        super().__init__(input_ids=enc.ids, offset_mapping=enc.offsets)
        self.enc = enc

    def word_ids(self):
        return self.enc.word_ids

tokenizer, kind, planted, reader = sys.argv[1], sys.argv[2], sys.argv[3] == "whole", sys.argv[4]
sizes = [int(n) for n in sys.argv[5:]]
tok = Fast(tokenizer)
random.seed(0)
if kind == "contract":
    sentence = "Either party may terminate this Agreement on thirty (30) days written notice. "
    longest = (sentence * (max(sizes) // len(sentence) + 1))[: max(sizes)]
else:  # an attachment pasted as base64: no whitespace at all
    longest = base64.b64encode(random.randbytes(max(sizes) * 3 // 4 + 3)).decode()[: max(sizes)]
texts = [longest[:n] for n in sizes]  # every text made before the first peak is read
if planted:  # the fallback the streaming path exists to avoid: the whole document as one piece
    streaming._next_cut = lambda tokenizer, text, lo, chunk_chars: (len(text), True)
if reader == "segments":  # a segment model's inputs: base64 is one segment, never buffered whole
    from toolkit.spans.segment_streaming import stream_segment_windows
    read = lambda text, tally: stream_segment_windows(tok, text, 96, 16, chunk_chars=20_000, tally=tally)
else:  # a tagger's windows
    read = lambda text, tally: streaming.stream_windows(tok, text, 64, 16, chunk_chars=20_000, tally=tally)
list(read(longest[:1000], {}))  # the tokenizer warmed up
readings = []
for text in texts:
    tally = {}
    windows = sum(1 for _ in read(text, tally))
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the parent (pytest, with torch loaded)
    # across fork and exec, while VmHWM is this process's own peak.
    status = open("/proc/self/status").read()
    peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
    readings.append({"chars": len(text), "peak_mb": peak, "windows": windows, "hard_cuts": tally.get("hard_cuts", 0)})
print(json.dumps(readings))
"""


def growth_mb(tokenizer, kind: str, planted: bool = False, reader: str = "windows") -> float:
    """How much higher the peak RSS is after reading the longer document than after the shorter one."""
    sizes = (N_CHARS, N_CHARS * GROWTH_FACTOR)
    mode = "whole" if planted else "pieces"
    done = subprocess.run(
        [sys.executable, "-c", READ, str(tokenizer), kind, mode, reader, *map(str, sizes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    short, long = json.loads(done.stdout.strip().splitlines()[-1])
    assert long["windows"] >= short["windows"] > 0  # (base64 read as segments is one segment: one input)
    return long["peak_mb"] - short["peak_mb"]


@pytest.mark.parametrize("kind", ["contract", "base64"])
def test_reading_a_document_four_times_as_long_peaks_at_about_the_same_memory(tiny_tokenizer_dir, kind):
    assert growth_mb(tiny_tokenizer_dir, kind) <= MAX_GROWTH_MB


def test_a_segment_input_buffers_its_first_tokens_not_the_whole_segment(tiny_tokenizer_dir, monkeypatch):
    """One segment of about 20 pieces (no sentence end, no line break, just under MAX_SEGMENT_CHARS): its input is
    made after reading a few pieces, not all 20 (which would also concatenate the buffer 20 times over)."""
    from transformers import AutoTokenizer

    from toolkit.spans import segment_streaming

    pulled = []

    def counted(*args, **kwargs):
        for piece in token_pieces(*args, **kwargs):
            pulled.append(piece)
            yield piece

    token_pieces = segment_streaming.token_pieces
    monkeypatch.setattr(segment_streaming, "token_pieces", counted)
    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    text = "either party may terminate on thirty days notice " * 199  # 9,751 characters, one segment
    windows = segment_streaming.stream_segment_windows(tok, text, 96, 16, chunk_chars=500)
    first = next(windows)
    assert len(first.input_ids) == 96 + 16 + 2 and len(pulled) <= 3
    assert list(windows) == [] and len(pulled) <= 3  # the rest of the segment is never read: its input is made


def test_a_planted_fallback_to_the_whole_document_fails_the_memory_bound(tiny_tokenizer_dir):
    assert growth_mb(tiny_tokenizer_dir, "base64", planted=True) > MAX_GROWTH_MB


def test_text_without_whitespace_is_cut_where_the_tokenizer_allows_and_else_cut_hard_and_counted(tiny_tokenizer_dir):
    import base64
    import random

    from transformers import AutoTokenizer

    from toolkit.spans.streaming import _encode, token_pieces

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    text = base64.b64encode(random.Random(0).randbytes(60_000)).decode()
    tally: dict = {}
    pieces = list(token_pieces(tok, text, 20_000, tally))
    assert len(pieces) >= 4 and tally == {}  # cut at characters where tokenizing across gives the same tokens
    assert [i for p in pieces for i in p.ids.tolist()] == _encode(tok, text)[0]
    word = "x" * 100_000  # one word: no place to cut gives the whole document's tokens
    pieces = list(token_pieces(tok, word, 20_000, tally))
    assert len(pieces) == 5 and tally == {"hard_cuts": 4}
    assert pieces[-1].offsets[-1, 1] == len(word)


def test_predict_holds_a_long_document_once(tmp_path):
    """`toolkit predict`'s local path, read to written row around a model that finds nothing: a 4 MB text file
    costs its bytes and its text while it is decoded (2x), never its JSON row or a stripped copy as well (it
    peaked at 7x when documents crossed the reader thread as JSON rows)."""
    import tracemalloc

    from toolkit.infer.collection import ReadAhead
    from toolkit.infer.rows import batched_rows, file_items

    class FindsNothing:
        last_report: dict = {}

        def predict(self, texts, batch_size=None):
            return [[] for _ in texts]

    size = 4_000_000
    source = tmp_path / "long.txt"
    source.write_text(("Either party may terminate this Agreement on notice. " * (size // 50))[:size], encoding="utf-8")
    tracemalloc.start()
    try:
        documents = ReadAhead(file_items(str(source)), 16_000)
        written = 0
        for row in batched_rows(documents, FindsNothing(), "m", 16, ready=documents.ready):
            written += sum(len(piece) for piece in row.pieces())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written > size
    assert peak < 2.5 * size, f"peak {peak / 1e6:.1f} MB of Python allocations for a {size / 1e6:.0f} MB document"
