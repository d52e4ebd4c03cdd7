import json
import subprocess
import sys

import pytest
from conftest import FIXTURES

from toolkit.data.importers import run_export, run_import
from toolkit.data.sample import SAMPLE_FILES
from toolkit.demo import span_keys
from toolkit.spans.overlaps import flat_loss


def spans_of(rec):
    return [(rec.text[s.start : s.end], s.label) for s in rec.spans]


def kinds(log):
    return sorted(p.kind for p in log.problems)


# ---------------------------------------------------------------- CoNLL
EXPECTED_NOTE_1 = [("Aspirin", "Chemical"), ("severe migraine", "Disease"), ("fever", "Disease")]


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "bioes", "bilou"])
def test_conll_schemes_decode_to_the_same_spans(scheme):
    records, log = run_import("conll", [FIXTURES / "conll" / f"{scheme}.tsv"], None, {"scheme": scheme})
    assert [r.id for r in records] == ["note-1", "note-2"]
    assert records[0].text == "Aspirin relieved the severe migraine .\nNo fever ."
    assert spans_of(records[0]) == EXPECTED_NOTE_1
    assert spans_of(records[1]) == [("Warfarin", "Chemical"), ("aspirin", "Chemical")]
    assert log.problems == []


def test_conll_auto_scheme_reports_iob1_style_tags():
    records, log = run_import("conll", [FIXTURES / "conll" / "iob1.tsv"], None)  # guessed IOB2
    assert spans_of(records[0]) == EXPECTED_NOTE_1
    assert {p.kind for p in log.problems} == {"tag_sequence"}
    assert {p.line for p in log.problems} == {3, 6, 11, 16, 18}
    assert all("--scheme" in p.fix for p in log.problems)


def test_conll_bad_tags_are_reported_with_lines():
    records, log = run_import("conll", [FIXTURES / "conll" / "bad_tags.tsv"], None)
    (rec,) = records
    # An I- tag that opens a chunk starts one (reported); an unknown prefix reads as O (reported).
    assert spans_of(rec) == [("Renal failure", "Disease")]
    lines = {p.line: p.message for p in log.problems}
    assert (
        set(lines) == {1, 3}
        and "starts a new one" in lines[1]
        and "prefix 'Q' is not part of IOB2; read as O" in lines[3]
    )


# ---------------------------------------------------------------- BRAT
def test_brat_discontinuous_mismatch_and_ignored_lines():
    records, log = run_import("brat", [FIXTURES / "brat"], None)
    (rec,) = records
    assert spans_of(rec) == [("acute kidney injury", "Disease"), ("sepsis", "Disease"), ("cefazolin", "Chemical")]
    assert kinds(log) == ["discontinuous", "text_mismatch"]
    assert log.spans_dropped == 2
    assert dict(log.ignored) == {"relations": 1, "attributes": 1, "notes": 1}
    (disc,) = [p for p in log.problems if p.kind == "discontinuous"]
    assert disc.line == 3 and "--discontinuous split" in disc.fix


def test_brat_split_keeps_fragments():
    records, log = run_import("brat", [FIXTURES / "brat"], None, {"discontinuous": "split"})
    assert ("acute", "Disease") in spans_of(records[0]) and ("injury", "Disease") in spans_of(records[0])
    assert "discontinuous_split" in kinds(log)


# ---------------------------------------------------------------- PubTator
def test_pubtator_small():
    records, log = run_import("pubtator", [FIXTURES / "pubtator_small.txt"], None)
    assert [r.id for r in records] == ["1001", "1002"]
    assert (
        records[0].text == "Cisplatin nephrotoxicity in children. We describe renal damage after cisplatin treatment."
    )
    assert len(records[0].spans) == 4
    assert spans_of(records[1]) == [
        ("Lithium", "Chemical"),
        ("tremor", "Disease"),
        ("Tremor", "Disease"),
        ("lithium", "Chemical"),
    ]
    assert kinds(log) == ["duplicate_document", "mention_whitespace", "offset_out_of_range"]
    assert dict(log.ignored) == {"relation lines (CID)": 1}
    (dup,) = [p for p in log.problems if p.kind == "duplicate_document"]
    assert dup.line == 17


def test_pubtator_holdout_and_cross_file_leakage(tmp_path):
    dev = tmp_path / "dev.txt"
    dev.write_text("1002|t|Lithium and tremor.\n1002|a|Tremor  appeared on lithium.\n\n", encoding="utf-8")
    records, log = run_import("pubtator", [FIXTURES / "pubtator_small.txt"], None, holdout=[dev])
    assert [r.id for r in records] == ["1001"]
    assert "held_out" in kinds(log)
    records, log = run_import("pubtator", [dev, FIXTURES / "pubtator_small.txt"], None)
    assert "leakage" in kinds(log)


# ---------------------------------------------------------------- CUAD
def test_cuad_locates_pieces_and_reports_the_rest():
    cuad = FIXTURES / "cuad"
    records, log = run_import("cuad", [cuad / "clauses.csv", cuad / "texts"], None)
    assert [r.id for r in records] == ["ALPHA_SUPPLY AGREEMENT", "BETA-DISTRIBUTION AGREEMENT "]
    alpha, beta = records
    doc_name = [s for s in alpha.spans if s.label == "Document Name"]
    assert [(s.start, alpha.text[s.start : s.end]) for s in doc_name] == [(23, "SUPPLY AGREEMENT")]  # second occurrence
    assert ("This Agreement is governed by the laws of Ohio.", "Governing Law") in spans_of(alpha)
    assert ("Venue lies in Columbus.", "Governing Law") in spans_of(alpha)
    assert [t for t, lb in spans_of(beta) if lb == "Parties"] == ["Beta Retail LLC", "Delta Stores Co."]
    assert [s.start for s in beta.spans if s.label == "Document Name"] == [0]  # occurs once: that one
    assert kinds(log) == ["missing_text", "not_found", "repeated_clause"]
    (nf,) = [p for p in log.problems if p.kind == "not_found"]
    assert "Gamma Holdings" in nf.message and nf.line == 2 and nf.field == "Parties"


# ---------------------------------------------------------------- Label Studio
def test_labelstudio_utf16_offsets_and_annotation_choice(tmp_path):
    text = "Patient 🙂 reports asthma and takes salbutamol."
    # JavaScript offsets: the emoji counts as two code units.
    tasks = [
        {
            "id": 7,
            "data": {"text": text},
            "annotations": [
                {"id": 1, "was_cancelled": True, "result": []},
                {
                    "id": 2,
                    "result": [
                        {"type": "labels", "value": {"start": 19, "end": 25, "text": "asthma", "labels": ["Disease"]}},
                        {
                            "type": "labels",
                            "value": {"start": 36, "end": 46, "text": "salbutamol", "labels": ["Chemical"]},
                        },
                        {"type": "choices", "value": {"choices": ["reviewed"]}},
                    ],
                },
                {"id": 3, "result": []},
            ],
        },
        {"id": 8, "data": {"text": "Unlabeled."}, "annotations": []},
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    records, log = run_import("labelstudio", [path], None)
    (rec,) = records
    assert spans_of(rec) == [("asthma", "Disease"), ("salbutamol", "Chemical")]
    assert kinds(log) == ["several_annotations", "unlabeled_task"]
    assert dict(log.ignored) == {"choices results": 1}
    out = tmp_path / "again.json"
    run_export("labelstudio", records, out)
    assert json.loads(out.read_text())[0]["annotations"][0]["result"][0]["value"]["start"] == 19
    back, _ = run_import("labelstudio", [out], None)
    assert spans_of(back[0]) == spans_of(rec) and back[0].id == "7"


# ---------------------------------------------------------------- round trips
def _sample(domain):
    records, _ = run_import("jsonl", [SAMPLE_FILES[domain][0]], None)
    return records


def test_round_trip_jsonl_conll_jsonl_keeps_representable_and_reports_the_rest(tmp_path):
    records = _sample("contracts")
    log = run_export("conll", records, tmp_path / "c.conll")
    expected_loss = sum(flat_loss(r.spans) for r in records)
    assert expected_loss > 0  # the sample nests notice periods inside termination clauses
    assert log.spans_dropped == expected_loss
    assert {p.kind for p in log.problems} == {"not_representable"}
    back, import_log = run_import("conll", [tmp_path / "c.conll"], None)
    assert import_log.problems == []
    by_id = {r.id: r for r in back}
    kept = lost = 0
    for rec in records:
        want, got = span_keys(rec, True), span_keys(by_id[rec.id], True)
        assert not (got - want)  # nothing invented
        kept += sum((want & got).values())
        lost += sum((want - got).values())
    assert lost == expected_loss and kept == sum(len(r.spans) for r in records) - expected_loss


@pytest.mark.parametrize("domain", ["contracts", "clinical"])
def test_round_trip_jsonl_docbin_jsonl_is_exact(tmp_path, domain):
    records = _sample(domain)
    log = run_export("docbin", records, tmp_path / "s.spacy")
    assert log.spans_dropped == 0
    assert len([p for p in log.problems if p.kind == "not_in_ents"]) == sum(flat_loss(r.spans) for r in records)
    back, import_log = run_import("docbin", [tmp_path / "s.spacy"], None)
    assert import_log.problems == []
    assert [(r.id, r.text, r.spans) for r in back] == [(r.id, r.text, r.spans) for r in records]


def test_docbin_is_readable_by_spacy(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    records = _sample("clinical")[:3]
    run_export("docbin", records, tmp_path / "s.spacy")
    docs = list(DocBin().from_disk(tmp_path / "s.spacy").get_docs(spacy.blank("en").vocab))
    assert [d.text for d in docs] == [r.text for r in records]
    assert [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs] == [
        [(s.start, s.end, s.label) for s in r.spans] for r in records
    ]


@pytest.mark.parametrize("fmt", ["brat", "pubtator"])
def test_round_trip_other_formats(tmp_path, fmt):
    records = _sample("clinical")
    target = tmp_path / ("brat" if fmt == "brat" else "s.txt")
    run_export(fmt, records, target)
    back, log = run_import(fmt, [target], None)
    assert [(r.id, r.spans) for r in back] == [(r.id, r.spans) for r in records]


def test_cli_import_writes_jsonl_and_report(tmp_path):
    out, report = tmp_path / "o.jsonl", tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "import",
            "brat",
            str(FIXTURES / "brat"),
            "-o",
            str(out),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the text mismatch is an error
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(out.read_text().splitlines()) == 1
    summary = json.loads(report.read_text())
    assert summary["spans_dropped"] == 2 and summary["problems"]["by_kind"] == {"discontinuous": 1, "text_mismatch": 1}
    check = subprocess.run(
        [sys.executable, "-m", "toolkit", "check", str(out), "--no-tokenizer"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0
