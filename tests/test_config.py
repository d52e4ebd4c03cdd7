from pathlib import Path

import pytest
from conftest import REPO, invoke

from toolkit.data.records import resolve_data_path
from toolkit.errors import ConfigError
from toolkit.recipes import describe_recipe
from toolkit.registry.recipe_loader import load_recipe, recipe_from_dict, with_params

MINIMAL = {
    "task": "token_classification",
    "name": "t",
    "data": {"train": "sample:clinical_train", "dev": "sample:clinical_dev"},
}


def task_named_by(stem: str) -> str:
    """The task a recipe's file name promises: <dataset>_<target>_<mlm|clm>, pre-training as ..._pretrain_<mlm|clm>."""
    objective = stem.rsplit("_", 1)[-1]
    assert objective in ("mlm", "clm"), f"{stem}: name recipes <dataset>_<target>_<mlm|clm>"
    if stem.endswith(("_pretrain_mlm", "_pretrain_clm")):
        return f"pretrain_{objective}"
    if stem.endswith("_segments_mlm"):
        return "segment_classification"
    return "token_classification" if objective == "mlm" else "span_generation"


@pytest.mark.parametrize("path", sorted((REPO / "recipes").glob("*.yaml")), ids=lambda p: p.name)
def test_every_recipe_validates_and_its_name_says_its_task(path):
    recipe = load_recipe(path)  # a ConfigError lists every problem
    assert path.stem == recipe.name, f"{path.name}: name the run after its file"
    expected = task_named_by(path.stem)
    # A decoder tagging tokens is still a token_classification recipe; its name says clm only when it generates.
    assert recipe.task == expected, f"{path.name}: task {recipe.task}, but the name promises {expected}"
    for ref in (recipe.data.train, recipe.data.dev):
        assert ref.startswith(("sample:", "../shared/data/")), (
            f"{path.name}: data {ref!r} is neither the sample nor the shared data"
        )
        if ref.startswith("sample:"):
            resolve_data_path(ref)
    if recipe.sweep is not None and recipe.sweep.method == "grid":
        with_params(recipe, {k: v[0] for k, v in recipe.sweep.params.items()})
    # `toolkit recipes` prints the first comment line as the recipe's one-line summary.
    summary = describe_recipe(path)
    assert summary and len(path.stem) + 2 + len(summary) <= 80, f"{path.name}: start it with a one-line summary comment"


def test_packaged_recipes_list_copy_and_run_by_name(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from toolkit.cli import app
    from toolkit.recipes import packaged_recipes, resolve_recipe

    # The repository's recipes/ is the package's own folder (a link), so the wheel ships what tests check.
    assert set(packaged_recipes()) == {p.stem for p in (REPO / "recipes").glob("*.yaml")}
    monkeypatch.chdir(tmp_path)  # outside the repository: names still resolve
    assert resolve_recipe("demo_mlm") == packaged_recipes()["demo_mlm"] == resolve_recipe("recipes/demo_mlm.yaml")
    runner = CliRunner()
    listed = runner.invoke(app, ["recipes"], terminal_width=80)
    assert listed.exit_code == 0 and all(name in listed.output for name in packaged_recipes())
    assert max(len(line) for line in listed.output.splitlines()) <= 80
    copied = runner.invoke(app, ["recipes", "cp", "ncbi_disease_mlm", str(tmp_path)])
    assert (
        copied.exit_code == 0
        and (tmp_path / "ncbi_disease_mlm.yaml").read_text() == packaged_recipes()["ncbi_disease_mlm"].read_text()
    )
    again = runner.invoke(app, ["recipes", "cp", "ncbi_disease_mlm", str(tmp_path)])
    # (main() prints a ToolkitError and exits 1; the runner calls the app beneath it.)
    assert "already exists" in str(again.exception)
    dry = runner.invoke(app, ["run", "demo_mlm", "--dry-run"])
    assert dry.exit_code == 0 and '"labels"' in dry.output
    wrong = runner.invoke(app, ["run", "demo_ml"])
    assert "did you mean demo_mlm" in wrong.exception.fix


def test_a_misnamed_recipe_is_caught():
    assert task_named_by("bc5cdr_domain_pretrain_mlm") == "pretrain_mlm"
    assert task_named_by("ncbi_disease_clm") == "span_generation"
    assert task_named_by("cuad_clauses_segments_mlm") == "segment_classification"
    with pytest.raises(AssertionError):
        task_named_by("ncbi_disease_tagger")


def test_every_error_is_reported_at_once_with_its_key_path():
    bad = {
        **MINIMAL,
        "model": {"dropout": {"hiden": 0.1, "attention": 1.5}},
        "train": {"learning_rate": -1, "epochs": "x"},
        "extra": 1,
    }
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(bad)
    text = err.value.message
    for path in ("model.dropout.hiden", "model.dropout.attention", "train.learning_rate", "train.epochs", "extra"):
        assert path in text, text
    assert "5 config error(s)" in text


def test_overrides_use_dotted_paths_and_yaml_values(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "task: token_classification\nname: r\ndata: {train: a.jsonl, dev: b.jsonl}\ntrain: {learning_rate: 5e-5}\n"
    )
    recipe = load_recipe(path, ["train.learning_rate=2e-5", "model.dropout.embedding=0.1", "model.lora.enabled=true"])
    assert (
        recipe.train.learning_rate == 2e-5
        and recipe.model.dropout.embedding == 0.1
        and recipe.model.lora.enabled is True
    )
    with pytest.raises(ConfigError, match="train.learnin_rate"):
        load_recipe(path, ["train.learnin_rate=1"])


def test_sweep_validation():
    with pytest.raises(ConfigError, match="'train.lr' is not a key of this recipe"):
        recipe_from_dict({**MINIMAL, "sweep": {"params": {"train.lr": [1, 2]}}})
    # The metric is checked before the first trial runs, against the summary this task writes.
    with pytest.raises(ConfigError, match="sweep.metric 'perplexity' is not a dev metric of task token_classification"):
        recipe_from_dict({**MINIMAL, "sweep": {"params": {"train.learning_rate": [1e-5]}, "metric": "perplexity"}})
    with pytest.raises(ConfigError, match="n_trials"):
        recipe_from_dict({**MINIMAL, "sweep": {"method": "optuna", "params": {"train.learning_rate": [1e-5]}}})
    with pytest.raises(ConfigError, match="ranges"):
        recipe_from_dict({**MINIMAL, "sweep": {"params": {"train.learning_rate": {"low": 1e-5, "high": 1e-4}}}})
    ok = recipe_from_dict(
        {
            **MINIMAL,
            "sweep": {
                "method": "optuna",
                "n_trials": 3,
                "params": {"train.learning_rate": {"low": 1e-5, "high": 1e-4, "log": True}},
            },
        }
    )
    assert ok.sweep.n_trials == 3


def test_stride_must_fit_the_window():
    with pytest.raises(ConfigError, match="stride"):
        recipe_from_dict({**MINIMAL, "model": {"max_length": 64, "stride": 40}})


def test_missing_recipe_file_is_a_clean_error():
    with pytest.raises(ConfigError, match="no such recipe"):
        load_recipe(Path("nope.yaml"))


def test_options_of_two_tasks_are_refused_with_every_error_at_once():
    with pytest.raises(ConfigError) as err:
        load_recipe(
            REPO / "recipes" / "ncbi_disease_mlm.yaml",
            ["segments.thresholds=tuned", "generation.max_new_tokens=8", "train.epochs=-1"],
        )
    lines = err.value.message.splitlines()
    assert lines[0].endswith("3 config error(s)")
    by_path = {line.split(":")[0].strip(): line for line in lines[1:]}
    assert set(by_path) == {"segments", "generation", "train.epochs"}
    assert "it belongs to segment_classification" in by_path["segments"] and "fix: remove it" in by_path["segments"]
    assert "it belongs to span_generation" in by_path["generation"]
    assert "greater than 0" in by_path["train.epochs"] and "(got -1)" in by_path["train.epochs"]
    # The message names keys and values, never the whole recipe.
    assert "{" not in err.value.message and len(err.value.message) < 800


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model.lora.enabled=true", "train.average_checkpoints=2"], "LoRA checkpoints hold adapters only"),
        (["train.average_checkpoints=3"], "set train.save_total_limit >= 3"),
        (["model.multi_label=true", "task=span_generation"], "model.multi_label: not an option of span_generation"),
        (["task=span_generation", "model.quantization=4bit"], "fix: set model.lora.enabled=true"),
        (["task=segment_classification", "segments.hard_negatives={}"], "fix: set windows.negative_ratio"),
        (["task=pretrain_mlm", "model.lora.enabled=true"], "model.lora: not an option of pretrain_mlm"),
        (
            ["task=pretrain_clm", "pretrain.mlm_probability=0.3"],
            "pretrain.mlm_probability: not an option of pretrain_clm",
        ),
        (["task=pretrain_mlm", "eval.curve_docs=4"], "eval: not an option of pretrain_mlm"),
        (["task=ner"], "task must be one of token_classification, segment_classification"),
    ],
)
def test_task_only_options_are_errors_before_anything_runs(overrides, expected):
    with pytest.raises(ConfigError) as err:
        recipe_from_dict(MINIMAL, overrides)
    assert expected in err.value.message, err.value.message


def test_the_linear_baseline_is_its_own_recipe():
    from toolkit.registry import task_of
    from toolkit.registry.linear_model import linear_baseline_of

    segments = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["eval.jaccard_threshold=0.6"])
    linear = linear_baseline_of(segments)
    assert task_of(linear).key == "segment_classification/linear" and linear.name == "demo_segments_mlm_linear"
    assert (
        linear.data == segments.data
        and linear.eval == segments.eval
        and linear.segments.thresholds == segments.segments.thresholds
    )
    assert task_of(recipe_from_dict(linear.model_dump())) is task_of(linear)  # its saved config.yaml reads back
    with pytest.raises(ConfigError) as err:  # encoder options are not options of the baseline
        recipe_from_dict(
            {**linear.model_dump(), "train": {"learning_rate": 1e-4}, "model": {"kind": "linear", "max_length": 64}}
        )
    assert "train: not an option of segment_classification/linear" in err.value.message
    assert "model.max_length: not an option of segment_classification/linear" in err.value.message
    with pytest.raises(ConfigError, match="this recipe's task is token_classification"):
        linear_baseline_of(recipe_from_dict(MINIMAL))
    dry = invoke(["run", "demo_segments_mlm", "--dry-run", "--linear-baseline"])
    assert dry.exit_code == 0 and '"classifier": "linear"' in dry.stdout
    # The sample's 16 dev documents hold too few clauses of each label to choose thresholds on: said before training.
    evidence, warning = dry.stderr.splitlines()[:2]
    assert warning.startswith("warning: fewer than 20 dev clauses for {") and "out_of_fold" in dry.stderr
    # Before it, where the thresholds will be chosen, and why.
    assert evidence == (
        "evidence: tuned: segments.thresholds=tuned: chosen on dev, dev figures cross-fitted over its two halves"
    )
    quiet = invoke(["run", "demo_segments_mlm", "--dry-run", "--linear-baseline", "segments.thresholds=out_of_fold"])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    refused = invoke(["run", "demo_mlm", "--dry-run", "--linear-baseline"])
    assert refused.exit_code == 1 and "--linear-baseline fits a baseline" in refused.stderr
