"""No single input file can end a `toolkit predict` run: malformed and hostile files become failure
records (source, reason, fix), and the readers bound what they inflate."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from document_files import make_docx, make_pdf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.data import documents
from toolkit.infer.rows import extract_file

SAMPLE = Path(__file__).resolve().parent.parent / "toolkit" / "data" / "sample" / "clinical_dev.jsonl"


def _sample_texts(n: int) -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()[:n]]


def _kinds(rows: list[str]) -> list[str]:
    return [json.loads(r)["kind"] for r in rows]


def _only_failure(rows) -> dict:
    rows = list(rows)
    assert _kinds(rows) == ["failure"], rows
    failure = json.loads(rows[0])
    assert failure["reason"] and failure["fix"] and failure["source"]
    return failure


def _docx_bytes(tmp_path: Path) -> bytes:
    return make_docx(tmp_path / "template.docx", ["A paragraph."]).read_bytes()


def _rezip(data: bytes, replace: dict[str, bytes] | None = None, drop: tuple[str, ...] = ()) -> bytes:
    """A copy of a zip archive with some entries replaced (or added) and some dropped."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename in drop:
                continue
            dst.writestr(info.filename, (replace or {}).get(info.filename, src.read(info.filename)))
        for name in set(replace or {}) - set(src.namelist()):
            dst.writestr(name, replace[name])
    return out.getvalue()


def test_a_docx_that_is_not_a_zip_is_a_failure_record(tmp_path):
    path = tmp_path / "plain.docx"
    path.write_bytes(b"this was saved as text with a .docx name")
    assert "not a zip archive" in _only_failure(extract_file(str(path)))["reason"]


@pytest.mark.parametrize(
    "change",
    [
        {"replace": {"[Content_Types].xml": b"<Types>not the schema python-docx expects</Types>"}},
        {"replace": {"[Content_Types].xml": b"\x00\xff not xml at all"}},
        {"replace": {"word/document.xml": b"<w:document>unclosed"}},
        {"drop": ("word/document.xml",)},
        {"drop": ("[Content_Types].xml",)},
    ],
    ids=["content-types-wrong-schema", "content-types-not-xml", "body-not-xml", "no-body", "no-content-types"],
)
def test_a_zip_that_python_docx_cannot_parse_is_a_failure_record(tmp_path, change):
    path = tmp_path / "broken.docx"
    path.write_bytes(_rezip(_docx_bytes(tmp_path), **change))
    failure = _only_failure(extract_file(str(path)))
    assert "not a readable .docx" in failure["reason"]


def test_a_docx_entry_that_would_inflate_past_the_bound_is_refused_unread(tmp_path, monkeypatch):
    # 4 MB of zeros deflate to a few KB: a small zip bomb against a bound lowered for the test.
    path = tmp_path / "bomb.docx"
    path.write_bytes(_rezip(_docx_bytes(tmp_path), {"word/media/pad.bin": b"\0" * 4_000_000}))
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(documents, "MAX_ZIP_ENTRY_BYTES", 1_000_000)

    def never(*args, **kwargs):
        raise AssertionError("python-docx opened an archive over the bound")

    monkeypatch.setattr("docx.Document", never)
    failure = _only_failure(extract_file(str(path)))
    assert "'word/media/pad.bin' inflates to 4,000,000 bytes" in failure["reason"]
    monkeypatch.setattr(documents, "MAX_ZIP_ENTRY_BYTES", 10_000_000)
    monkeypatch.setattr(documents, "MAX_ZIP_TOTAL_BYTES", 2_000_000)
    assert "over the bound of 2,000,000" in _only_failure(extract_file(str(path)))["reason"]


def test_encrypted_and_truncated_pdfs_are_failure_records(tmp_path):
    from pypdf import PdfReader, PdfWriter

    good = make_pdf(tmp_path / "good.pdf", _sample_texts(1))
    writer = PdfWriter()
    writer.append(PdfReader(good))
    writer.encrypt("secret", algorithm="RC4-128")
    with (tmp_path / "locked.pdf").open("wb") as f:
        writer.write(f)
    assert "encrypted" in _only_failure(extract_file(str(tmp_path / "locked.pdf")))["reason"]
    (tmp_path / "cut.pdf").write_bytes(good.read_bytes()[:120])
    assert _only_failure(extract_file(str(tmp_path / "cut.pdf")))["reason"].startswith(
        ("not a readable PDF", "no text layer")
    )


def test_an_exception_no_reader_expects_is_still_that_files_failure(tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("text")

    def explode(path):
        raise RuntimeError("a reader bug")

    monkeypatch.setattr(documents, "_txt", explode)
    assert _only_failure(extract_file(str(path)))["reason"] == "reading failed: RuntimeError: a reader bug"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=2048),
    suffix=st.sampled_from([".pdf", ".docx", ".txt", ".jsonl"]),
    prefix=st.sampled_from([b"", b"%PDF-1.4\n", b"PK\x03\x04"]),
)
def test_arbitrary_bytes_never_raise_from_any_reader(tmp_path, data, suffix, prefix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(prefix + data)
    rows = extract_file(str(path))
    for row in rows:
        obj = json.loads(row)
        assert obj["kind"] in ("document", "failure")
        if obj["kind"] == "failure":
            assert obj["reason"] and obj["fix"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=4000), flip=st.integers(min_value=0, max_value=4000))
def test_damaged_docx_files_never_raise(tmp_path, cut, flip):
    data = bytearray(make_docx(tmp_path / "t.docx", ["One.", "Two."]).read_bytes())
    data[flip % len(data)] ^= 0xFF
    path = tmp_path / "damaged.docx"
    path.write_bytes(bytes(data[: max(1, len(data) - cut)]))
    for row in extract_file(str(path)):
        assert json.loads(row)["kind"] in ("document", "failure")


def test_predict_over_a_folder_of_broken_files_reports_each_and_writes_the_good_ones(tiny_mlm_run, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    texts = _sample_texts(2)
    (inputs / "a_plain.docx").write_bytes(b"not a zip")
    (inputs / "b_types.docx").write_bytes(_rezip(_docx_bytes(tmp_path), {"[Content_Types].xml": b"<Types/>"}))
    (inputs / "c_random.pdf").write_bytes(bytes(range(256)) * 4)
    (inputs / "d_good.txt").write_text(texts[0])
    make_docx(inputs / "e_good.docx", [texts[1]])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", str(tiny_mlm_run), str(inputs), "-o", str(out)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert sorted(Path(json.loads(line)["meta"]["source"]).name for line in out.read_text().splitlines()) == [
        "d_good.txt",
        "e_good.docx",
    ]
    failures = [json.loads(line) for line in (tmp_path / "out.jsonl.failures.jsonl").read_text().splitlines()]
    assert sorted(Path(f["source"]).name for f in failures) == ["a_plain.docx", "b_types.docx", "c_random.pdf"]
    for name in ("a_plain.docx", "b_types.docx", "c_random.pdf"):
        assert name in result.stderr
