import subprocess
import sys

import pytest
from conftest import FIXTURES

from toolkit.data.validation import ValidationSummary, check_record, collect, validate_files

BROKEN = FIXTURES / "broken"

# file -> (problem kind, line, field) that validation must report
CASES = {
    "malformed_json": ("json", 2, None),
    "not_utf8": ("encoding", 2, None),
    "missing_field": ("missing_field", 2, "spans"),
    "extra_field": ("extra_field", 2, "source"),
    "extra_span_field": ("extra_field", 2, "spans[0].confidence"),
    "wrong_type": ("wrong_type", 2, "spans[0].start"),
    "span_text_mismatch": ("text_mismatch", 2, "spans[0].text"),
    "score_out_of_range": ("score_out_of_range", 2, "spans[0].score"),
    "offset_out_of_range": ("offset_out_of_range", 2, "spans[0].end"),
    "negative_offset": ("offset_out_of_range", 2, "spans[0].start"),
    "inverted_span": ("inverted_span", 2, "spans[0]"),
    "empty_span": ("empty_span", 2, "spans[0]"),
    "blank_span": ("blank_span", 2, "spans[0]"),
    "whitespace_edge": ("whitespace_edge", 2, "spans[0]"),
    "unknown_label": ("unknown_label", 2, "spans[0].label"),
    "duplicate_id": ("duplicate_id", 2, "id"),
    "not_an_object": ("not_an_object", 2, None),
}
LABELS = frozenset({"Chemical", "Disease"})


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_broken_file_yields_its_error(name):
    kind, line, field = CASES[name]
    summary = collect([BROKEN / f"{name}.jsonl"], LABELS)
    errors = summary.errors
    assert [(p.kind, p.line, p.field) for p in errors] == [(kind, line, field)], [p.render() for p in errors]
    problem = errors[0]
    assert problem.file.endswith(f"{name}.jsonl")
    assert problem.fix  # every problem says how to fix it
    assert summary.records[str(BROKEN / f"{name}.jsonl")] == 2


def test_fixes_are_specific():
    (ws,) = collect([BROKEN / "whitespace_edge.jsonl"]).errors
    assert "start=7, end=13" in ws.fix
    (lb,) = collect([BROKEN / "unknown_label.jsonl"], LABELS).errors
    assert "'Disease'" in lb.fix
    (rng,) = collect([BROKEN / "offset_out_of_range.jsonl"]).errors
    assert "11 characters" in rng.message


def test_leakage_between_train_and_dev():
    summary = collect([BROKEN / "leak_train.jsonl", BROKEN / "leak_dev.jsonl"])
    (leak,) = summary.errors
    assert leak.kind == "leakage" and leak.line == 2 and leak.record_id == "d-2"
    assert "leak_train.jsonl:2" in leak.message  # whitespace differences do not hide a duplicate


def test_every_problem_of_a_record_is_reported_at_once():
    obj = {
        "id": "x",
        "text": "Fever and cough.",
        "extra": 1,
        "spans": [
            {"start": "0", "end": 5, "label": "Disease"},
            {"start": 10, "end": 99, "label": "Disease"},
            {"start": 9, "end": 15, "label": "Symptom"},
        ],
    }
    checked, problems = check_record(obj, frozenset({"Disease"}), "f.jsonl", 7)
    assert checked is None
    assert sorted((p.kind, p.field) for p in problems) == [
        ("extra_field", "extra"),
        ("offset_out_of_range", "spans[1].end"),
        ("unknown_label", "spans[2].label"),
        ("whitespace_edge", "spans[2]"),
        ("wrong_type", "spans[0].start"),
    ]
    assert all(p.line == 7 and p.record_id == "x" for p in problems)


def test_valid_records_stream_with_bad_spans_counted():
    summary = ValidationSummary()
    records = list(validate_files([BROKEN / "whitespace_edge.jsonl"], None, summary))
    assert [r.record.id for r in records] == ["ok-1", "b-1"]
    assert [len(r.spans) for r in records] == [1, 0]
    assert summary.spans_rejected[str(BROKEN / "whitespace_edge.jsonl")] == 1


@pytest.mark.parametrize("name", ["malformed_json", "not_utf8", "offset_out_of_range"])
def test_cli_check_exits_1_without_traceback(name):
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "check", str(BROKEN / f"{name}.jsonl"), "--no-tokenizer"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert f"{name}.jsonl:2" in proc.stdout


def test_cli_missing_file_is_a_clean_error():
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "check", "no/such.jsonl", "--no-tokenizer"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr
