"""Every table the CLI prints fits 80 columns with full names: systems (runs, trials, export paths)
as columns and metrics as rows, split over several tables rather than cut to `syst…` / `0.99…`."""

from conftest import invoke
from rich.console import Console

from toolkit.tables import SystemsTable

BOX_EDGES = "┏┃┡│└┓┩┤┘"


def render(renderable, width: int = 80) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def assert_fits(shown: str, width: int = 80) -> None:
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= width
    # Every table line keeps its right border: nothing was cropped at the terminal's edge.
    for line in shown.splitlines():
        if line.strip() and line.lstrip()[0] in BOX_EDGES:
            assert line.rstrip()[-1] in BOX_EDGES, line


def test_systems_that_do_not_fit_side_by_side_are_split_over_tables_with_full_names():
    names = [f"ncbi_disease_dropout_lr_trial_{i}" for i in range(5)]
    table = SystemsTable(
        "five runs",
        ["span F1", "boundary recall: both within 3 words"],
        {n: [f"0.{i}123\n0.70-0.80", "0.9000"] for i, n in enumerate(names)},
    )
    shown = render(table)
    assert_fits(shown)
    assert all(n in shown for n in names)
    parts = [line for line in shown.splitlines() if "five runs (" in line]
    assert len(parts) == len(table.chunks(80)) > 1
    # The row names are repeated in every part, values stay whole.
    assert shown.count("span F1") == len(parts) and "0.4123" in shown and "0.70-0.80" in shown
    # Wide enough, one table.
    assert "five runs (" not in render(table, width=400)


def test_a_system_without_a_cell_per_row_is_refused():
    import pytest

    with pytest.raises(ValueError, match="cells"):
        SystemsTable("t", ["a", "b"], {"x": ["1"]})


def test_export_table_lists_every_path_and_says_why_one_was_skipped():
    from toolkit.deploy.export import export_table

    paths = ["onnx_fp32", "onnx_fused", "onnx_int8", "pytorch_fp32", "pytorch_bf16"]
    figures = {
        "max_logit_diff": 2.4e-06,
        "span_f1": 0.766,
        "span_f1_drop": {"points": -0.12, "ci95_points": [-1.35, 0.88]},
    }
    manifest = {
        "paths": {
            **{p: {"span_f1": 0.766, "docs_per_second": 524.52, "chosen": p == "onnx_int8"} for p in paths[:4]},
            "pytorch_bf16": {"skipped": "this CPU has no bf16 units (avx512_bf16 or amx_bf16)"},
        },
        "parity": {p: figures for p in paths[:4]},
    }
    shown = render(export_table(manifest))
    assert_fits(shown)
    assert all(p in shown for p in paths) and "-1.35 to 0.88" in shown and "no bf16 units" in shown
    chosen_row = next(line for line in shown.splitlines() if line.startswith("│ chosen"))
    assert chosen_row.count("yes") == 1


def test_sweep_table_shows_each_trial_with_its_parameters():
    from toolkit.tasks.sweep import sweep_table

    trials = [
        {
            "trial": f"trial-{i:03d}",
            "model.dropout.embedding": d,
            "train.learning_rate": lr,
            "span_f1": 0.8 + i / 100,
            "ci95": [0.7, 0.9],
            "train_seconds": 100.0 + i,
            "time_vs_fastest": 1 + i / 100,
        }
        for i, (d, lr) in enumerate([(0.0, 2e-5), (0.0, 5e-5), (0.1, 2e-5), (0.1, 5e-5)])
    ]
    summary = {
        "metric": "span_f1",
        "params": ["model.dropout.embedding", "train.learning_rate"],
        "trials": trials,
        "best": "trial-003",
        "directory": "/runs/x",
    }
    shown = render(sweep_table(summary))
    assert_fits(shown)
    assert "trial-003 (best)" in shown and "model.dropout.embedding" in shown and "5e-05" in shown and "0.8300" in shown


def test_eval_prints_headline_and_per_label_tables_at_80_columns(tiny_mlm_run, tmp_path):
    args = ["eval", tiny_mlm_run, "--data", "sample:clinical_dev", "--bootstrap", "0", "--out", tmp_path / "e"]
    proc = invoke(args, columns=80)
    assert proc.exit_code == 0, proc.output
    assert_fits(proc.stdout)
    assert (
        "span F1 (exact)" in proc.stdout
        and "per label" in proc.stdout
        and "Disease" in proc.stdout
        and "Chemical" in proc.stdout
    )
    written = __import__("json").loads((tmp_path / "e" / "metrics.json").read_text())["summary"]
    as_json = invoke([*args, "--json"])
    # The one line carries the scores the tables showed and metrics.json holds.
    assert as_json.exit_code == 0 and __import__("json").loads(as_json.stdout)["span_f1"] == written["span_f1"]


def test_curves_table_puts_runs_side_by_side():
    from toolkit.evaluate.curve_comparison import curves_table

    point = {
        "step": 40,
        "train_seconds": 120.0,
        "inference_seconds_per_document": 2.5,
        "inference_precision": "bf16",
        "boundary_both_recall": 0.61,
        "boundary_both_within_3_recall": 0.7,
        "jaccard_recall": 0.8,
        "span_precision": 0.5,
    }
    summary = {
        "common_budget_seconds": 120.0,
        "at_common_budget": {
            "cuad_clauses_segments_mlm": {**point, "ci95": {"boundary_both_recall": [0.5, 0.7]}},
            "cuad_clauses_clm": None,
        },
    }
    shown = render(curves_table(summary, [3]))
    assert_fits(shown)
    assert "cuad_clauses_segments_mlm" in shown and "no checkpoint yet" in shown and "0.50-0.70" in shown
    assert "within 3 words" in shown  # long metric names wrap at a space, whole
    assert "2.50 (bf16)" in shown  # inference seconds per document, with the precision they were measured at
