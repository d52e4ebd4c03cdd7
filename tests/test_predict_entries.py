"""`toolkit predict` accounts for every entry of a folder: odd names, odd kinds, odd encodings, and a
slow file that must not hold back the rows already read."""

from __future__ import annotations

import codecs
import json
import os
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.data.documents import DocumentError, list_sources, read_documents
from toolkit.data.text_encoding import decode_text
from toolkit.infer.collection import PredictionSink, ReadAhead, failures_path
from toolkit.infer.rows import CHARS_PER_SLOT, batched_rows, encode_row, extract_file

TEXT = "The patient was given aspirin for chest pain and developed a rash."
BAD_NAME = os.fsdecode(b"bad_\xff\xfe_name.txt")  # legal on Linux; not UTF-8


def _hostile_folder(root: Path) -> dict[str, str]:
    """A folder holding one entry of each hostile kind; returns name -> what should become of it."""
    root.mkdir()
    (root / "good.txt").write_text(TEXT, encoding="utf-8")
    (root / BAD_NAME).write_text(TEXT, encoding="utf-8")
    (root / "utf16.txt").write_bytes(codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"))
    (root / "utf32.txt").write_bytes(codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"))
    (root / "utf16_no_bom.txt").write_bytes(TEXT.encode("utf-16-le"))
    (root / "records.jsonl").write_text(json.dumps({"id": "lone\ud800id", "text": TEXT}) + "\n", encoding="utf-8")
    os.mkfifo(root / "pipe.txt")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "socket.txt"))
    server.close()
    os.symlink("loop_b.txt", root / "loop_a.txt")
    os.symlink("loop_a.txt", root / "loop_b.txt")
    os.symlink("nowhere.txt", root / "dangling.txt")
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_text(TEXT, encoding="utf-8")
    os.symlink("..", root / "sub" / "up")  # a link cycle: the folder is read once
    (root / ".hidden.txt").write_text(TEXT, encoding="utf-8")
    (root / "notes.md").write_text("not read", encoding="utf-8")
    return {
        "good.txt": "row",
        BAD_NAME: "row",
        "utf16.txt": "row",
        "utf32.txt": "row",
        "records.jsonl": "row",
        "inner.txt": "row",
        "utf16_no_bom.txt": "failure",
        "pipe.txt": "failure",
        "socket.txt": "failure",
        "loop_a.txt": "failure",
        "loop_b.txt": "failure",
        "dangling.txt": "failure",
        ".hidden.txt": "skipped",
        "notes.md": "skipped",
    }


def test_every_entry_of_a_hostile_folder_ends_as_a_row_a_failure_or_a_skip(tiny_mlm_artifact, tmp_path):
    expected = _hostile_folder(tmp_path / "in")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", str(tiny_mlm_artifact), str(tmp_path / "in"), "-o", str(out)])
    assert result.exit_code == 1, result.output  # failures: exit 1, with a summary and no traceback
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    # Both output files are UTF-8 JSON lines; the name that is not UTF-8 comes back exactly.
    rows = [json.loads(line) for line in out.read_bytes().decode("utf-8").splitlines()]
    failures = [json.loads(line) for line in failures_path(out).read_bytes().decode("utf-8").splitlines()]
    written = {Path(r["meta"]["source"]).name for r in rows}
    failed = {Path(f["source"]).name: f for f in failures}
    assert written == {n for n, fate in expected.items() if fate == "row"}
    assert set(failed) == {n for n, fate in expected.items() if fate == "failure"}
    assert os.fsencode(next(r["meta"]["source"] for r in rows if "bad_" in r["meta"]["source"])).endswith(
        b"bad_\xff\xfe_name.txt"
    )
    assert next(r["id"] for r in rows if r["meta"]["source"].endswith("records.jsonl")) == "lone\ud800id"
    assert all(r["text"] == TEXT for r in rows)  # UTF-16 and UTF-32 with a byte-order mark are read
    assert "FIFO" in failed["pipe.txt"]["reason"] and "socket" in failed["socket.txt"]["reason"]
    assert "loop" in failed["loop_a.txt"]["reason"] and "broken symbolic link" in failed["dangling.txt"]["reason"]
    assert "UTF-16LE without a byte-order mark" in failed["utf16_no_bom.txt"]["fix"]
    assert all(f["reason"] and f["fix"] for f in failures)
    # The summary counts every entry: 14 above, and sub/up, the link back to the folder (read once).
    assert f"{len(failed)} failed (15 entries in the inputs)" in result.stdout, result.stdout
    assert "bad_\\xff\\xfe_name.txt" in result.stderr or "bad_" not in result.stderr
    assert "skipped 3 entries (other types, hidden, or read already)" in result.stderr


def test_a_named_fifo_or_broken_link_is_refused_with_its_kind(tmp_path):
    from toolkit.errors import ToolkitError

    os.mkfifo(tmp_path / "pipe.txt")
    os.symlink("nowhere.txt", tmp_path / "dangling.txt")
    with pytest.raises(ToolkitError, match="not a regular file \\(a FIFO\\)"):
        list_sources([tmp_path / "pipe.txt"])
    with pytest.raises(ToolkitError, match="broken symbolic link"):
        list_sources([tmp_path / "dangling.txt"])


@pytest.mark.parametrize(
    "data, expected",
    [
        (codecs.BOM_UTF8 + "café".encode(), "café"),
        (codecs.BOM_UTF16_LE + "café".encode("utf-16-le"), "café"),
        (codecs.BOM_UTF16_BE + "café".encode("utf-16-be"), "café"),
        (codecs.BOM_UTF32_LE + "café".encode("utf-32-le"), "café"),
        (codecs.BOM_UTF32_BE + "café".encode("utf-32-be"), "café"),
        ("café".encode(), "café"),
    ],
)
def test_text_with_a_byte_order_mark_is_read_in_its_encoding(data, expected):
    assert decode_text(data) == expected


@pytest.mark.parametrize(
    "data, fix",
    [
        ("café".encode("cp1252"), "iconv -f cp1252"),
        ("a long enough text".encode("utf-16-le"), "iconv -f utf-16le"),
        ("a long enough text".encode("utf-16-be"), "iconv -f utf-16be"),
        (codecs.BOM_UTF16_LE + b"\x00\xd8", "re-save it"),  # the mark says UTF-16; a lone surrogate follows
    ],
)
def test_text_that_cannot_be_decoded_gets_the_conversion_that_fixes_it(data, fix):
    with pytest.raises(DocumentError) as caught:
        decode_text(data)
    assert fix in caught.value.fix


def test_jsonl_with_a_utf8_bom_is_read_and_utf16_jsonl_is_refused(tmp_path):
    good = tmp_path / "bom.jsonl"
    good.write_bytes(codecs.BOM_UTF8 + json.dumps({"id": "a", "text": TEXT}).encode() + b"\n")
    assert [d.id for d in read_documents(good)] == ["a"]
    wide = tmp_path / "wide.jsonl"
    wide.write_bytes(codecs.BOM_UTF16_LE + json.dumps({"text": TEXT}).encode("utf-16-le"))
    with pytest.raises(DocumentError, match="UTF-16 or UTF-32"):
        list(read_documents(wide))


class RecordingPredictor:
    """The model's place in `batched_rows`: it records each call's documents and finds no spans."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def predict(self, texts, batch_size=16):
        self.calls.append(list(texts))
        return [[] for _ in texts]


def _doc(i: int, text: str) -> str:
    return encode_row({"kind": "document", "id": str(i), "text": text, "source": f"f{i}.txt", "meta": {}})


def test_a_huge_document_goes_alone_and_small_ones_are_not_held_back_by_it():
    predictor = RecordingPredictor()
    small, huge = "a small document", "x" * (20 * CHARS_PER_SLOT)
    rows = [_doc(0, small), _doc(1, small), _doc(2, huge), _doc(3, small)]
    out = list(batched_rows(rows, predictor, "m", batch_size=16))
    assert [json.loads(str(r))["id"] for r in out] == ["0", "1", "2", "3"]
    assert predictor.calls == [[small, small], [huge], [small]]


def test_rows_already_read_are_predicted_while_a_slow_file_is_read():
    """The reader blocks on the second file until the first row is out: with a read-ahead thread the
    first prediction is written meanwhile (without one, this would wait forever)."""
    first_written = threading.Event()

    def slow_reader():
        yield _doc(0, "a small document")
        assert first_written.wait(timeout=30), "the first row was held back by the file after it"
        yield _doc(1, "x" * 5_000)

    predictor = RecordingPredictor()
    ahead = ReadAhead(slow_reader(), max_chars=16 * CHARS_PER_SLOT)
    got = []
    for row in batched_rows(ahead, predictor, "m", batch_size=16, ready=ahead.ready):
        got.append(json.loads(str(row))["id"])
        first_written.set()
    assert got == ["0", "1"] and len(predictor.calls) == 2


def test_the_read_ahead_holds_at_most_its_bound_of_text():
    produced = []

    def reader():
        for i in range(50):
            produced.append(i)
            yield _doc(i, "y" * 900)

    ahead = ReadAhead(reader(), max_chars=4_000)
    import time

    time.sleep(0.3)
    assert len(produced) <= 6, produced  # about 4,000 characters of rows (plus the one the reader holds)
    assert len(list(ahead)) == 50


# Entry kinds the property builds; each maps to what must become of it.
KINDS = ("txt", "latin1_txt", "utf16_txt", "empty_txt", "md", "fifo", "dangling", "loop", "jsonl", "dir")
names = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(names, st.sampled_from(KINDS), min_size=1, max_size=8))
def test_any_names_and_kinds_are_each_accounted_for_and_written_losslessly(tmp_path_factory, entries):
    root = tmp_path_factory.mktemp("entries")
    for raw, kind in entries.items():
        path = os.path.join(
            os.fsencode(root), raw + (b".md" if kind == "md" else b".jsonl" if kind == "jsonl" else b".txt")
        )
        if kind == "txt":
            Path(os.fsdecode(path)).write_text(TEXT)
        elif kind == "latin1_txt":
            Path(os.fsdecode(path)).write_bytes("caf\xe9".encode("latin-1"))
        elif kind == "utf16_txt":
            Path(os.fsdecode(path)).write_bytes(codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"))
        elif kind == "empty_txt":
            Path(os.fsdecode(path)).write_text("  ")
        elif kind == "md":
            Path(os.fsdecode(path)).write_text(TEXT)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dangling":
            os.symlink(b"no-such-target", path)
        elif kind == "loop":
            os.symlink(path, path)
        elif kind == "jsonl":
            Path(os.fsdecode(path)).write_text(json.dumps({"id": os.fsdecode(raw), "text": TEXT}) + "\n")
        elif kind == "dir":
            os.mkdir(path)
            Path(os.fsdecode(path), "inside.txt").write_text(TEXT)
    try:
        sources = list_sources([root])
    except Exception as exc:  # only "no readable files" may stop it before any row
        assert "no .jsonl/.txt/.pdf/.docx files" in str(exc)
        readable = ("txt", "latin1_txt", "utf16_txt", "empty_txt", "jsonl", "dir")
        assert not any(k in readable and not raw.startswith(b".") for raw, k in entries.items())
        return
    out = root.parent / f"{root.name}.out.jsonl"
    sink = PredictionSink(out)
    for path, reason, fix in sources.unreadable:
        sink.write(encode_row({"kind": "failure", "source": str(path), "id": None, "reason": reason, "fix": fix}))
    rows = (row for p in sources.files for row in extract_file(str(p)))
    for row in batched_rows(rows, RecordingPredictor(), "m", batch_size=3):
        sink.write(row)
    sink.close()
    predicted = [json.loads(line) for line in out.read_bytes().decode("utf-8").splitlines()]
    failed = [json.loads(line) for line in failures_path(out).read_bytes().decode("utf-8").splitlines()]
    hidden = sum(raw.startswith(b".") for raw in entries)
    # Every entry is one row, one failure or one skip (a hidden entry is skipped whatever its kind).
    assert len(predicted) + len(failed) + len(sources.skipped) == len(entries), (entries, predicted, failed)
    assert len(sources.skipped) == hidden + sum(k == "md" and not r.startswith(b".") for r, k in entries.items())
    # Each name comes back byte for byte.
    written = {os.fsencode(r["meta"]["source"]) for r in predicted} | {os.fsencode(f["source"]) for f in failed}
    for raw, kind in entries.items():
        if raw.startswith(b".") or kind == "md":
            continue
        suffix = b".jsonl" if kind == "jsonl" else b".txt"
        target = os.path.join(os.fsencode(root), raw + suffix) + (b"/inside.txt" if kind == "dir" else b"")
        assert target in written, (target, written)


@pytest.mark.parametrize("before", [600, 6000])  # a file under 4 KB, and one whose NUL run lies past 4 KB
def test_a_nul_run_inside_utf8_text_is_replaced_and_counted_not_taken_for_utf16(tmp_path, before):
    head = ("The Licensee shall pay the fees. " * (before // 33 + 1))[:before]
    data = head.encode() + b"\0" * 1000 + "Signed in Zürich.".encode()
    path = tmp_path / "contract.txt"
    path.write_bytes(data)
    (document,) = read_documents(path)
    expected = head + " " * 1000 + "Signed in Zürich."
    assert document.text == expected and len(document.text) == len(data.decode())  # offsets unchanged
    assert document.meta["nul_characters_replaced"] == 1000


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("repeat", [2, 400])  # under 4 KB, and over it
def test_wide_text_without_a_mark_is_refused_with_its_own_codec_whatever_its_size(codec, repeat):
    data = ("Governing law: New York. " * repeat).encode(codec)
    with pytest.raises(DocumentError) as caught:
        decode_text(data)
    assert f"iconv -f {''.join(codec.rsplit('-', 1))}" in caught.value.fix and "NUL" in str(caught.value)
