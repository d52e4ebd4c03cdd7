"""`toolkit predict`: reading txt/PDF/DOCX/JSONL, equality with `toolkit eval`, resuming, failures,
Label Studio pre-annotations, and Ray Data on a local instance."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from document_files import make_docx, make_pdf
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.data.documents import DocumentError, list_sources, read_documents
from toolkit.evaluate.evaluation import evaluate_run
from toolkit.infer.collection import predict_collection

SAMPLE = Path(__file__).resolve().parent.parent / "toolkit" / "data" / "sample" / "clinical_dev.jsonl"


def _sample_texts(n: int) -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLE.read_text().splitlines()[:n]]


def test_documents_are_read_from_each_format(tmp_path):
    texts = _sample_texts(2)
    make_pdf(tmp_path / "a.pdf", [texts[0], "", texts[1]])
    make_docx(tmp_path / "b.docx", ["First paragraph.", "Second one."], table=[["Drug", "Dose"], ["aspirin", "81 mg"]])
    (tmp_path / "c.txt").write_text(texts[0], encoding="utf-8")
    (tmp_path / "notes.md").write_text("not read")
    sources = list_sources([tmp_path])
    assert [f.name for f in sources.files] == ["a.pdf", "b.docx", "c.txt"]
    assert [(f.name, why) for f, why in sources.skipped] == [
        ("notes.md", "not .jsonl/.txt/.pdf/.docx")
    ] and not sources.unreadable
    pdf = next(read_documents(tmp_path / "a.pdf"))
    # Pages join with a form feed; the page without a text layer is named (1-based).
    assert pdf.text.split("\f")[0].split() == texts[0].split() and pdf.text.split("\f")[2].split() == texts[1].split()
    assert pdf.meta["pages"] == 3 and pdf.meta["pages_without_text"] == [2]
    docx_doc = next(read_documents(tmp_path / "b.docx"))
    assert docx_doc.text == "First paragraph.\nSecond one.\nDrug\tDose\naspirin\t81 mg" and docx_doc.meta["tables"] == 1
    assert next(read_documents(tmp_path / "c.txt")).text == texts[0]
    with pytest.raises(DocumentError, match="no text layer on any of its 2 pages"):
        next(read_documents(make_pdf(tmp_path / "scan.pdf", ["", ""])))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    with pytest.raises(DocumentError, match="not a readable PDF"):
        next(read_documents(tmp_path / "broken.pdf"))


def _spans(path: Path) -> dict[str, list[dict]]:
    return {r["id"]: r["spans"] for r in map(json.loads, path.read_text().splitlines())}


def test_predict_gives_the_spans_eval_gives_and_writes_checkable_text(tiny_mlm_run, tiny_mlm_artifact, tmp_path):
    for model in (tiny_mlm_run, tiny_mlm_artifact):
        out = tmp_path / f"{model.name}.jsonl"
        summary = predict_collection(model, [SAMPLE], out, batch_size=3)
        assert summary["predicted"] == len(SAMPLE.read_text().splitlines()) and summary["failed"] == 0
        _, eval_out = evaluate_run(model, str(SAMPLE), tmp_path / f"eval_{model.name}", bootstrap=0)
        assert _spans(out) == _spans(eval_out / "predictions.jsonl")
        # The output is span JSONL: `toolkit check` reads it, and every span's text matches its offsets.
        result = CliRunner().invoke(app, ["check", str(out)])
        assert result.exit_code == 0, result.output
        first = json.loads(out.read_text().splitlines()[0])
        assert first["meta"]["source"] == str(SAMPLE) and first["meta"]["line"] == 1 and first["meta"]["model"]


def test_a_crashed_run_resumes_where_it_stopped(tiny_mlm_run, tmp_path):
    full = tmp_path / "full.jsonl"
    predict_collection(tiny_mlm_run, [SAMPLE], full)
    lines = full.read_text().splitlines(keepends=True)
    # A crash after two documents, in the middle of writing the third.
    out = tmp_path / "resumed.jsonl"
    out.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    summary = predict_collection(tiny_mlm_run, [SAMPLE], out)
    assert summary["already_done"] == 2 and summary["repaired_torn_line"] and summary["predicted"] == len(lines) - 2
    assert out.read_text() == full.read_text()
    # Nothing left to do: a third run predicts nothing and leaves the file as it is.
    assert predict_collection(tiny_mlm_run, [SAMPLE], out)["predicted"] == 0 and out.read_text() == full.read_text()


def test_failed_documents_are_reported_and_the_rest_go_on(tiny_mlm_run, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    texts = _sample_texts(2)
    (inputs / "good.txt").write_text(texts[0])
    (inputs / "empty.txt").write_text("  \n")
    (inputs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    make_pdf(inputs / "scan.pdf", [""])
    make_pdf(inputs / "partial.pdf", ["", texts[1]])
    (inputs / "records.jsonl").write_text(
        json.dumps({"id": "r1", "text": texts[1]})
        + "\n{not json\n"
        + json.dumps({"id": "r1", "text": "again"})
        + "\n"
        + json.dumps({"id": "r2"})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["predict", str(tiny_mlm_run), str(inputs), "-o", str(out)])
    assert result.exit_code == 1, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(Path(r["meta"]["source"]).name for r in written) == ["good.txt", "partial.pdf", "records.jsonl"]
    failures = [json.loads(line) for line in (tmp_path / "out.jsonl.failures.jsonl").read_text().splitlines()]
    reasons = {(Path(f["source"]).name, f["id"]): f["reason"] for f in failures}
    assert reasons[("empty.txt", None)] == "no text"
    assert "not UTF-8" in reasons[("latin1.txt", None)]
    assert "no text layer" in reasons[("scan.pdf", None)]
    assert "line 2: not JSON" in reasons[("records.jsonl", "line 2")]
    assert "appears again" in reasons[("records.jsonl", "r1")]
    assert "no 'text'" in reasons[("records.jsonl", "line 4")]
    assert len(failures) == 6 and all(f["fix"] for f in failures)
    assert not any("no documents" in f["reason"] for f in failures)
    # stderr names each failure and the page without text, a line each; stdout holds the summary.
    problems = result.stderr.splitlines()
    assert any("partial.pdf: no text layer on page(s) 1;" in line for line in problems)
    for f in failures:
        assert sum(f["source"] in line and f["reason"] in line and f["fix"] in line for line in problems) >= 1, (
            f,
            problems,
        )
    assert "6 failed" in result.stdout and "failed " not in result.stdout.replace("6 failed", "")


def test_labelstudio_preannotations_round_trip(tiny_mlm_run, tmp_path):
    out = tmp_path / "tasks.json"
    predict_collection(tiny_mlm_run, [SAMPLE], out, fmt="labelstudio")
    tasks = json.loads(out.read_text())
    predicted = _spans(tmp_path / "tasks.json.spans.jsonl")
    assert len(tasks) == len(predicted)
    task = next(t for t in tasks if t["predictions"][0]["result"])
    region = task["predictions"][0]["result"][0]
    assert 0 <= region["score"] <= 1 and task["predictions"][0]["score"] == min(
        r["score"] for r in task["predictions"][0]["result"]
    )
    back = tmp_path / "back.jsonl"
    result = CliRunner().invoke(app, ["import", "labelstudio", str(out), "-o", str(back), "--predictions"])
    assert result.exit_code == 0, result.output
    imported = {r["id"]: r["spans"] for r in map(json.loads, back.read_text().splitlines())}
    # Every task comes back, those without predicted spans as documents without spans.
    as_tuples = {i: sorted((s["start"], s["end"], s["label"]) for s in spans) for i, spans in predicted.items()}
    assert {i: sorted((s["start"], s["end"], s["label"]) for s in spans) for i, spans in imported.items()} == as_tuples
    # Without --predictions the tasks hold no annotations, and the importer says how to read them.
    report = tmp_path / "report.json"
    CliRunner().invoke(
        app, ["import", "labelstudio", str(out), "-o", str(tmp_path / "none.jsonl"), "--report", str(report)]
    )
    problems = json.loads(report.read_text())["problems"]["items"]
    assert len(problems) == len(tasks) and all("pass --predictions to read them" in p["message"] for p in problems)


@pytest.mark.slow  # starting a local Ray instance takes most of its 15 s
def test_ray_data_on_a_local_instance_writes_what_the_local_path_writes(tiny_mlm_run, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]')")
    import ray

    inputs = tmp_path / "in"
    inputs.mkdir()
    for i, text in enumerate(_sample_texts(4)):
        (inputs / f"{i}.txt").write_text(text)
    (inputs / "empty.txt").write_text("")
    (inputs / "empty.jsonl").write_text("\n\n")
    (inputs / "nothing.jsonl").write_text("")
    make_docx(inputs / "d.docx", _sample_texts(2))
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    predict_collection(tiny_mlm_run, [SAMPLE, inputs], local, batch_size=4)

    def stuck(*_):
        # A Ray pipeline whose operators wait on each other's CPUs hangs rather than fails (seen while
        # building this); fail the test instead of the CI run.
        raise TimeoutError("the Ray pipeline made no progress in 240 s")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(240)
    try:
        summary = predict_collection(
            tiny_mlm_run, [SAMPLE, inputs], on_ray, batch_size=4, ray_address="local", ray_actors=2
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        ray.shutdown()
    assert summary["engine"] == "ray (local)" and summary["failed"] == 3
    assert on_ray.read_text() == local.read_text()
    assert (tmp_path / "ray.jsonl.failures.jsonl").read_text() == (tmp_path / "local.jsonl.failures.jsonl").read_text()


def test_jsonl_pieces_cover_every_line_once(tmp_path):
    from toolkit.data.documents import split_jsonl

    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"text\u2028{i}"}) + "\n" for i in range(10)) + "\n")
    pieces = split_jsonl(path, 3)
    assert [p[2] for p in pieces] == [1, 4, 7, 10]
    read = [d for piece in pieces for d in read_documents(path, piece)]
    assert [(d.id, d.meta["line"]) for d in read] == [(f"d{i}", i + 1) for i in range(10)]
    assert [(d.id, d.meta["line"]) for d in read_documents(path)] == [(f"d{i}", i + 1) for i in range(10)]
