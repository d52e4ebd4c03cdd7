import csv

from conftest import REPO

from toolkit.registry.recipe_loader import load_recipe
from toolkit.tasks.sweep import grid_points, run_sweep

BASE = [
    "data.train=sample:clinical_train",
    "data.dev=sample:clinical_dev",
    "data.max_train_docs=5",
    "data.max_dev_docs=5",
    "train.max_steps=3",
    "train.batch_size=5",
    "eval.bootstrap=20",
    "train.early_stopping_patience=null",
]


def test_grid_points():
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]


def test_grid_sweep_writes_trials_summary_and_heatmap(tiny_bert, tmp_path):
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            *BASE,
            "sweep.params={model.dropout.embedding: [0.0, 0.1], train.learning_rate: [2e-5, 5e-5]}",
        ],
    )
    summary = run_sweep(recipe)
    base = tmp_path / "demo_mlm"
    rows = list(csv.DictReader((base / "summary.csv").open()))
    assert len(rows) == 4 and sum(r["best"] == "*" for r in rows) == 1
    assert {(r["model.dropout.embedding"], r["train.learning_rate"]) for r in rows} == {
        ("0.0", "2e-05"),
        ("0.0", "5e-05"),
        ("0.1", "2e-05"),
        ("0.1", "5e-05"),
    }
    assert all(float(r["train_seconds"]) > 0 for r in rows)
    for i in range(4):
        trial = base / "trials" / f"trial-{i:03d}"
        assert (trial / "metrics.json").is_file() and (trial / "config.yaml").is_file()
    saved = load_recipe(base / "trials" / "trial-003" / "config.yaml")
    assert (saved.model.dropout.embedding, saved.train.learning_rate) == (0.1, 5e-5)
    assert (base / "heatmap.png").stat().st_size > 1000 and (base / "summary.md").is_file()
    assert summary["best"] == next(r["trial"] for r in rows if r["best"] == "*") and len(summary["trials"]) == 4
    assert "train_seconds" in (base / "summary.md").read_text()
    # A rerun reuses the finished trials instead of training again.
    before = (base / "trials" / "trial-000" / "metrics.json").stat().st_mtime_ns
    run_sweep(recipe)
    assert (base / "trials" / "trial-000" / "metrics.json").stat().st_mtime_ns == before


def test_optuna_sweep(tiny_bert, tmp_path):
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            *BASE,
            "sweep={method: optuna, n_trials: 2, params: "
            "{train.learning_rate: {low: 1e-5, high: 1e-3, log: true}, model.dropout.hidden: [0.0, 0.2]}}",
        ],
    )
    run_sweep(recipe)
    rows = list(csv.DictReader((tmp_path / "demo_mlm" / "summary.csv").open()))
    assert len(rows) == 2 and all(1e-5 <= float(r["train.learning_rate"]) <= 1e-3 for r in rows)
