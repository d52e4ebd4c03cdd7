"""The run contract: a run, its model/ folder and its artifact open alike; recipes resolve to their runs."""

import pytest
from conftest import REPO

from toolkit.errors import ToolkitError
from toolkit.rundir import open_run, records_for
from toolkit.tasks import ensure_run


def test_a_run_its_model_folder_and_its_artifact_open_alike(tiny_mlm_run, tiny_mlm_artifact):
    run, model, artifact = open_run(tiny_mlm_run), open_run(tiny_mlm_run / "model"), open_run(tiny_mlm_artifact)
    assert run.model_dir == model.model_dir == tiny_mlm_run / "model" and artifact.model_dir == tiny_mlm_artifact
    assert run.task == model.task == artifact.task == "token_classification"
    assert run.labels == model.labels == artifact.labels == ["Chemical", "Disease"]
    assert run.config_path == model.config_path == tiny_mlm_run / "config.yaml"
    assert artifact.recipe == run.recipe and not run.is_artifact and artifact.is_artifact
    # The documents a run is scored on: only its labels, the others counted.
    records = records_for(run, "sample:contracts_dev", max_docs=3)
    assert len(records) == 3 and all(not r.spans for r in records)


def test_ensure_run_resolves_recipes_and_refuses_what_is_neither(tiny_mlm_run, tmp_path):
    assert ensure_run(tiny_mlm_run) == tiny_mlm_run
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"task: token_classification\nname: {tiny_mlm_run.name}\noutput_dir: {tiny_mlm_run.parent}\n"
        "data: {train: sample:clinical_train, dev: sample:clinical_dev}\n"
    )
    assert ensure_run(recipe) == tiny_mlm_run  # finished: reused, not retrained
    with pytest.raises(ToolkitError, match="is a sweep"):
        ensure_run(REPO / "recipes" / "ncbi_disease_dropout_lr_mlm.yaml")
    with pytest.raises(ToolkitError, match="neither a run directory nor a recipe"):
        ensure_run(tmp_path / "missing")
    with pytest.raises(ToolkitError, match="no trained model here"):
        open_run(tmp_path)


def test_files_written_by_this_version_read_back_unchanged(tiny_mlm_run, tmp_path):
    """toolkit.json and metrics.json are typed (ModelMeta, Metrics): what a run writes reads back and
    writes again byte for byte, so nothing in them is lost or reinterpreted by the types."""
    from toolkit.registry.recipe_loader import dump_recipe
    from toolkit.rundir import load_meta, read_metrics, write_meta, write_metrics_file

    run = open_run(tiny_mlm_run)
    write_meta(tmp_path, load_meta(run.model_dir))
    assert (tmp_path / "toolkit.json").read_bytes() == (run.model_dir / "toolkit.json").read_bytes()
    write_metrics_file(tmp_path, read_metrics(run.path))
    assert (tmp_path / "metrics.json").read_bytes() == (run.path / "metrics.json").read_bytes()
    dump_recipe(run.recipe, tmp_path / "config.yaml")
    assert (tmp_path / "config.yaml").read_bytes() == run.config_path.read_bytes()
    assert run.spec.name == run.meta.task == "token_classification" and run.meta.space.multi_label


def test_a_run_saved_before_the_task_registry_still_loads_and_predicts_the_same(tiny_mlm_run, tmp_path):
    """Earlier versions saved one recipe with every task's sections (at their defaults) and a toolkit.json
    without `task` or `decoding`: such a run opens as its task's run and predicts what it predicted."""
    import json
    import shutil

    import yaml

    from toolkit.infer import load_predictor
    from toolkit.registry.pretraining import PretrainConfig
    from toolkit.registry.segment_classification import SegmentsConfig
    from toolkit.registry.span_generation import GenerationConfig

    old = tmp_path / "old_run"
    shutil.copytree(tiny_mlm_run, old)
    config = yaml.safe_load((old / "config.yaml").read_text())
    config["generation"] = GenerationConfig().model_dump(mode="json")
    config["segments"] = SegmentsConfig().model_dump(mode="json")
    config["pretrain"] = {**PretrainConfig().model_dump(mode="json"), "mlm_probability": 0.15}
    config["model"]["quantization"] = "none"
    (old / "config.yaml").write_text(yaml.safe_dump(config))
    meta = json.loads((old / "model" / "toolkit.json").read_text())
    (old / "model" / "toolkit.json").write_text(
        json.dumps({k: v for k, v in meta.items() if k not in ("task", "decoding")})
    )

    run = open_run(old)
    assert type(run.recipe).__name__ == "TokenClassificationRecipe" and run.recipe == open_run(tiny_mlm_run).recipe
    assert run.task == "token_classification" and run.meta.decoding == "argmax"
    texts = [r.text for r in records_for(run, "sample:clinical_dev", max_docs=3)]
    assert load_predictor(run).predict(texts) == load_predictor(tiny_mlm_run).predict(texts)


def test_older_model_files_of_the_other_tasks_read_as_their_task(tmp_path):
    from toolkit.registry import task_named
    from toolkit.registry.recipe_loader import load_saved_recipe
    from toolkit.rundir import model_meta

    # span_generation kept its generation settings at the top level of toolkit.json.
    flat = {
        "task": "span_generation",
        "labels": ["Disease"],
        "max_length": 64,
        "stride": 8,
        "target": "segments",
        "max_new_tokens": 40,
    }
    meta = model_meta(**flat)
    assert (
        meta.generation.target == "segments"
        and meta.generation.max_new_tokens == 40
        and meta.generation.batch_size == 8
    )
    spec = task_named(meta.task)
    assert spec.generates and spec.predictor.endswith(":SpanGenerator")
    # The linear baseline was `model.name: linear`, saved beside the encoder's sections.
    saved = tmp_path / "config.yaml"
    saved.write_text(
        "task: segment_classification\nname: old_linear\ndata: "
        "{train: sample:contracts_train, dev: sample:contracts_dev}\n"
        "model: {name: linear, max_length: 256, stride: 64}\ntrain: {learning_rate: 5.0e-05}\nwindows: "
        "{negative_ratio: null}\n"
        "segments: "
        "{min_overlap: 0.5, loss_weights: balanced, focal_gamma: 0.0, thresholds: tuned, hard_negatives: null}\n"
    )
    recipe = load_saved_recipe(saved)
    assert (
        type(recipe).__name__ == "LinearModelRecipe"
        and recipe.model.kind == "linear"
        and recipe.segments.thresholds == "tuned"
    )
    with pytest.raises(ToolkitError, match="toolkit.json: labels"):
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "toolkit.json").write_text('{"task": "token_classification", "labels": "Disease"}')
        open_run(tmp_path / "model")
