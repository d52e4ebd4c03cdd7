"""Training on tiny models built from config (about 30 ms a step): real numbers, fast."""

import json
import subprocess

import pytest
from conftest import OVERFIT_FIVE, REPO, invoke

from toolkit.evaluate.evaluation import evaluate_run
from toolkit.registry.recipe_loader import load_recipe
from toolkit.tasks import plan_recipe, run_recipe

BASE = [*OVERFIT_FIVE, "eval.bootstrap=50"]


def recipe(tiny_bert, tmp_path, *extra):
    return load_recipe(
        REPO / "recipes" / "demo_mlm.yaml", [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *BASE, *extra]
    )


# Slow tier (issue 76): the single-label tagger; the fast tier keeps the multi-label one, the demo recipe's default.
@pytest.mark.parametrize("multi_label", [pytest.param(False, marks=pytest.mark.slow), True])
def test_tiny_model_overfits_five_documents(tiny_bert, tmp_path, multi_label):
    cfg = recipe(tiny_bert, tmp_path, f"model.multi_label={str(multi_label).lower()}")
    run_dir = tmp_path / "demo_mlm"
    result = run_recipe(cfg, run_dir)
    assert result.summary["span_f1"] == 1.0
    assert result.summary["boundary_both_recall"] == 1.0
    for name in (
        "config.yaml",
        "metrics.json",
        "report.md",
        "predictions.jsonl",
        "train_log.jsonl",
        "data_report.json",
        "model/toolkit.json",
    ):
        assert (run_dir / name).is_file(), name
    saved = load_recipe(run_dir / "config.yaml")
    assert saved.model.multi_label is multi_label and saved.train.learning_rate == 3e-3
    first = json.loads((run_dir / "predictions.jsonl").read_text().splitlines()[0])
    assert {"start", "end", "label", "score", "text"} <= set(first["spans"][0])
    # `toolkit eval` on the same file reproduces the run's own dev scores exactly.
    metrics, out = evaluate_run(run_dir, "sample:clinical_train", tmp_path / "eval", bootstrap=0)
    assert metrics["counts"]["documents"] == 60
    assert (out / "metrics.json").is_file() and (out / "report.md").is_file()


def test_eval_reproduces_run_scores(tiny_bert, tmp_path):
    cfg = recipe(tiny_bert, tmp_path, "data.max_dev_docs=null", "data.dev=sample:clinical_dev", "train.epochs=10")
    result = run_recipe(cfg, tmp_path / "demo_mlm")
    metrics, _ = evaluate_run(
        tmp_path / "demo_mlm", "sample:clinical_dev", tmp_path / "e", bootstrap=cfg.eval.bootstrap
    )
    assert metrics["summary"] == result.summary


def test_resume_after_a_crash(tiny_bert, tmp_path):
    cfg = recipe(
        tiny_bert, tmp_path, "train.max_steps=4", "train.eval_every=2", "train.save_total_limit=5", "train.batch_size=1"
    )
    run_dir = tmp_path / "demo_mlm"
    run_recipe(cfg, run_dir)
    for name in ("metrics.json", "model"):
        p = run_dir / name
        subprocess.run(["rm", "-rf", str(p)], check=True)  # as if the process died after checkpoint-4
    cfg = recipe(
        tiny_bert, tmp_path, "train.max_steps=6", "train.eval_every=2", "train.save_total_limit=5", "train.batch_size=1"
    )
    result = run_recipe(cfg, run_dir)
    assert result.run["resumed_from_checkpoint"] == "checkpoint-4"
    assert result.run["optimizer_steps"] == 6
    # tokens/s counts only what this process trained: the epochs after checkpoint-4.
    at_4 = json.loads((run_dir / "checkpoints" / "checkpoint-4" / "trainer_state.json").read_text())["epoch"]
    assert result.run["epochs_trained_this_process"] == pytest.approx(result.run["epochs_completed"] - at_4, abs=1e-3)
    assert 0 < result.run["epochs_trained_this_process"] < result.run["epochs_completed"]
    # One dev evaluation (step 6) ran inside this process's training; its time is reported apart.
    assert 0 < result.run["evaluation_seconds_during_training"] <= result.run["train_seconds"] + 0.05
    assert result.run["train_step_tokens_per_second"] >= result.run["train_tokens_per_second"]


def test_lora_trains_few_parameters_and_saves_a_merged_model(tiny_bert, tmp_path):
    cfg = recipe(
        tiny_bert,
        tmp_path,
        "model.lora.enabled=true",
        "model.lora.target_modules=[query,value]",
        "model.lora.r=4",
        "train.epochs=2",
    )
    plan = plan_recipe(cfg)
    assert plan["trainable_parameters"] < plan["parameters"] / 5
    run_recipe(cfg, tmp_path / "demo_mlm")
    assert (tmp_path / "demo_mlm" / "model" / "adapter" / "adapter_config.json").is_file()
    assert not any(p.name.startswith("adapter_model") for p in (tmp_path / "demo_mlm" / "model").iterdir())
    metrics, _ = evaluate_run(tmp_path / "demo_mlm", "sample:clinical_train", tmp_path / "e", bootstrap=0)
    assert metrics["counts"]["documents"] == 60


def test_cli_run_dry_run_and_errors(tiny_bert, tmp_path):
    args = ["run", REPO / "recipes" / "demo_mlm.yaml", f"model.name={tiny_bert}", f"output_dir={tmp_path}"]
    proc = invoke([*args, "--dry-run"])
    assert proc.exit_code == 0, proc.output
    plan = json.loads(proc.stdout)
    assert plan["labels"] == [
        "Confidentiality",
        "Governing Law",
        "Limitation of Liability",
        "Notice Period",
        "Parties",
        "Payment Terms",
        "Termination",
    ]
    assert plan["train"]["spans_not_representable"] == 0  # multi_label holds the nested notice periods
    assert not (tmp_path / "demo_mlm").exists()
    proc = invoke([*args, "train.learnin_rate=1", "--dry-run"])
    assert proc.exit_code == 1 and "train.learnin_rate" in proc.stderr and "Traceback" not in proc.output
    proc = invoke([*args, "data.train=missing.jsonl", "--dry-run"])
    assert proc.exit_code == 1 and "missing.jsonl" in proc.stderr and "Traceback" not in proc.output


def test_prefer_bf16_follows_the_hardware(monkeypatch):
    """prefer_bf16: bf16 on a CPU with bf16 units, fp32 (no error) on one without."""
    import torch

    from toolkit import hardware
    from toolkit.tasks.training import precision_flags

    if torch.cuda.is_available():
        pytest.skip("the CPU rule is what is tested here")
    monkeypatch.setattr(hardware, "describe", lambda: {"cpu": "x", "cpu_flags": ["avx2"], "bf16": False, "cuda": None})
    assert precision_flags("prefer_bf16") == {"bf16": False, "fp16": False}
    monkeypatch.setattr(
        hardware, "describe", lambda: {"cpu": "x", "cpu_flags": ["avx512_bf16"], "bf16": True, "cuda": None}
    )
    assert precision_flags("prefer_bf16") == {"bf16": True, "fp16": False, "use_cpu": True}
