import json
import subprocess
import sys

from conftest import invoke

from toolkit.data.check import run_check
from toolkit.data.sample import SAMPLE_FILES
from toolkit.data.stats import TokenOffsets, distribution
from toolkit.models.pretrained import load_tokenizer


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_distribution_nearest_rank():
    d = distribution(list(range(1, 101)))
    assert (d["min"], d["median"], d["p90"], d["p99"], d["max"], d["mean"]) == (1, 50, 90, 99, 100, 50.5)
    assert distribution([]) == {"count": 0}


def test_report_on_hand_built_corpus(tmp_path):
    f = write(
        tmp_path / "c.jsonl",
        [
            {
                "id": "1",
                "text": "Either party may terminate on thirty days notice.",
                "spans": [
                    {"start": 0, "end": 49, "label": "Termination"},
                    {"start": 30, "end": 48, "label": "Notice Period"},
                    {"start": 0, "end": 49, "label": "Renewal"},
                ],
            },
            {"id": "2", "text": "No clauses here.", "spans": []},
        ],
    )
    result = run_check([f])
    r = result.report
    assert result.exit_code() == 0
    assert (r["documents"], r["spans"], r["documents_without_spans"]) == (2, 3, 1)
    assert r["labels"] == {"Termination": 1, "Notice Period": 1, "Renewal": 1}
    assert r["overlaps"]["pairs"] == {"identical_extent": 1, "duplicate": 0, "nested": 2, "crossing": 0}
    assert r["overlaps"]["flat_bio_loss"] == 2 and r["overlaps"]["per_label_bio_loss"] == 0
    assert r["doc_chars"]["max"] == 49 and r["span_chars"]["min"] == 18
    assert r["doc_tokens"] == {"count": 0}  # no tokenizer given


def test_token_statistics_with_a_real_fast_tokenizer(tmp_path, tiny_tokenizer_dir):
    f = write(
        tmp_path / "c.jsonl",
        [
            {
                "id": "1",
                "text": "aa bb cc dd ee ff",
                "spans": [{"start": 3, "end": 8, "label": "X"}, {"start": 4, "end": 8, "label": "Y"}],
            }
        ],
    )
    r = run_check([f], tokenizer=load_tokenizer(str(tiny_tokenizer_dir)), max_length=6).report
    assert r["doc_tokens"]["max"] == 6
    assert r["span_tokens"]["max"] == 2
    assert r["docs_over_max_length"] == {"count": 1, "ids": ["1"]}  # 6 tokens + [CLS] [SEP] > 6
    assert r["spans_misaligned_with_tokens"] == 1  # "b cc" starts inside "bb"


def test_token_offsets_arithmetic():
    t = TokenOffsets([0, 3, 6], [2, 5, 8])
    assert t.span_tokens(0, 8) == 3 and t.span_tokens(4, 5) == 1 and t.span_tokens(2, 3) == 0
    assert t.aligned(3, 8) and not t.aligned(4, 8)


def test_sample_is_clean():
    for train, dev in SAMPLE_FILES.values():
        result = run_check([train, dev])
        assert result.problems == []


def test_cli_json_output_lists_every_problem(tmp_path):
    bad = write(
        tmp_path / "bad.jsonl",
        [{"id": str(i), "text": f"abc {i}", "spans": [{"start": 0, "end": 9, "label": "X"}]} for i in range(150)],
    )
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "check", str(bad), "--no-tokenizer", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["problems"]["errors"] == 150 and len(report["problems"]["items"]) == 150
    assert report["files"][0]["spans_rejected"] == 150


def test_check_reports_the_segment_ceiling_per_label():
    report = run_check([SAMPLE_FILES["contracts"][0]]).report
    ceiling = report["segment_ceiling"]
    # The sample's clauses are whole sentences; its party names are phrases inside one.
    assert ceiling["Governing Law"]["both_ends"] == 1.0 and ceiling["Payment Terms"]["jaccard_05"] == 1.0
    assert ceiling["Parties"]["both_ends"] < 0.1
    assert ceiling["__all__"]["spans"] == report["spans"]


def test_empty_files_are_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    good = write(tmp_path / "good.jsonl", [{"id": "1", "text": "Aspirin.", "spans": []}])
    result = run_check([empty, blank, good])
    assert result.exit_code() == 1
    kinds = [(p.kind, p.file) for p in result.problems if p.severity == "error"]
    assert kinds == [("no_documents", str(empty)), ("no_documents", str(blank))]
    cli = invoke(["check", empty])
    assert cli.exit_code == 1 and "no documents" in cli.output and "No problems found" not in cli.stdout


def test_check_tables_fit_80_columns_without_cutting_names(tmp_path):
    long_dir = tmp_path / "a_rather_long_folder_name_for_contracts" / "another_level_of_folders"
    long_dir.mkdir(parents=True)
    label = "Unlimited/All-You-Can-Eat-License-And-Then-Some"
    f = write(
        long_dir / "contracts_with_a_long_name.jsonl",
        [{"id": "1", "text": "Licensee may use it without limit.", "spans": [{"start": 0, "end": 8, "label": label}]}],
    )
    proc = invoke(["check", f], columns=80)
    assert proc.exit_code == 0, proc.output
    table_lines = [line for line in proc.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert "…" not in proc.stdout and table_lines and max(len(line) for line in table_lines) <= 80
    # Long names fold onto a second line of their cell rather than being cut.
    first_cells = "".join(line.split("│")[1].strip() for line in table_lines if line.startswith("│"))
    assert label in first_cells and str(f) in first_cells
