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
