"""Training budgets (train.max_seconds) and learning curves (eval.curve_docs), and `toolkit compare --curves`."""

import json
import subprocess
import sys

import pytest
from conftest import OVERFIT_FIVE, REPO

from toolkit.errors import ToolkitError
from toolkit.evaluate.curve_comparison import at_budget, compare_curves, summarize_curves
from toolkit.registry.recipe_loader import load_recipe
from toolkit.rundir import TRAIN_LOG_FILE, read_curve
from toolkit.tasks import run_recipe
from toolkit.tasks.learning_curve import CLOCK_FILE


def tagger_run(model, out, name, *overrides):
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={model}",
            f"output_dir={out}",
            f"name={name}",
            *OVERFIT_FIVE,
            "eval.bootstrap=20",
            "eval.curve_docs=3",
            "train.eval_every=10",
            *overrides,
        ],
    )
    return run_recipe(recipe, out / name)


def test_a_time_budget_stops_training_and_every_checkpoint_is_on_the_curve(tiny_bert, tmp_path):
    result = tagger_run(
        tiny_bert, tmp_path, "budget", "train.max_seconds=0.5", "train.epochs=1000", "train.eval_every=25"
    )
    run = result.run
    assert run["stopped_by_time_budget"] and 0.5 <= run["train_step_seconds"] < 10
    assert run["optimizer_steps"] < 1000  # an epoch is one step: cut short
    curve = read_curve(tmp_path / "budget")
    # One point per evaluation, the last one at the budget's final checkpoint, scored by the task's predictor.
    assert [p["step"] for p in curve] == sorted({*range(25, run["optimizer_steps"] + 1, 25), run["optimizer_steps"]})
    assert curve[-1]["train_seconds"] == pytest.approx(run["train_step_seconds"], abs=0.1)
    assert all(a["train_seconds"] <= b["train_seconds"] for a, b in zip(curve, curve[1:]))
    assert curve[-1]["documents"] == 3 and "boundary_both_within_3_recall" in curve[-1]["metrics"] and curve[-1]["ci95"]
    checkpoint = sorted(
        (tmp_path / "budget" / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])
    )[-1]
    assert json.loads((checkpoint / CLOCK_FILE).read_text())["step"] == run["optimizer_steps"]


def test_a_curve_over_the_whole_dev_set_is_the_evaluation_that_chooses_the_best_checkpoint(tiny_bert, tmp_path):
    def evaluations(name):
        log = (tmp_path / name / TRAIN_LOG_FILE).read_text().splitlines()
        return [e for e in map(json.loads, log) if "eval_span_f1" in e]

    every = ("train.epochs=4", "train.eval_every=1")
    whole = tagger_run(tiny_bert, tmp_path, "whole", "eval.curve_docs=5", *every)  # the five dev documents
    assert whole.run["dev_evaluation_during_training"] == "curve"
    curve, logged = read_curve(tmp_path / "whole"), evaluations("whole")
    # One scoring per checkpoint: the curve's, logged as the Trainer's evaluation (no evaluation loop ran).
    assert [e["eval_span_f1"] for e in logged] == [p["metrics"]["span_f1"] for p in curve] and len(curve) == 4
    assert not any("eval_runtime" in e for e in logged)
    assert whole.run["best_checkpoint_dev_span_f1"] == max(p["metrics"]["span_f1"] for p in curve)

    part = tagger_run(tiny_bert, tmp_path, "part", *every)  # three of five documents: the Trainer evaluates too
    assert part.run["dev_evaluation_during_training"] == "trainer"
    assert len(read_curve(tmp_path / "part")) == 4 and all("eval_runtime" in e for e in evaluations("part"))


# Slow tier (issue 76): trains two runs and compares them in a subprocess; summarize_curves is checked fast on fixed
# points.
@pytest.mark.slow
def test_compare_curves_puts_runs_side_by_side_at_a_common_budget(tiny_bert, tmp_path):
    tagger_run(tiny_bert, tmp_path, "short", "train.max_seconds=0.3")
    tagger_run(tiny_bert, tmp_path, "long")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "compare",
            str(tmp_path / "short"),
            str(tmp_path / "long"),
            "--curves",
            "--out",
            str(tmp_path / "cmp"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "cmp" / "curves.json").read_text())
    short, long_ = summary["systems"]["short"]["points"], summary["systems"]["long"]["points"]
    assert summary["common_budget_seconds"] == short[-1]["train_seconds"]
    # Each system is read at its last checkpoint within the common budget.
    assert summary["at_common_budget"]["short"]["step"] == short[-1]["step"]
    expected = at_budget(long_, summary["common_budget_seconds"])
    assert (summary["at_common_budget"]["long"] or {}).get("step") == (expected or {}).get("step")
    assert (tmp_path / "cmp" / "curves.png").stat().st_size > 0 and "| step | train s |" in (
        tmp_path / "cmp" / "curves.md"
    ).read_text()


# Slow tier (issue 76): trains three runs to reach two refusals.
@pytest.mark.slow
def test_curves_of_different_documents_are_refused(tiny_bert, tmp_path):
    short = "train.epochs=10"  # one checkpoint each: what is refused is the curves' documents, not their shape
    tagger_run(tiny_bert, tmp_path, "three", short)
    tagger_run(tiny_bert, tmp_path, "two", "eval.curve_docs=2", short)
    with pytest.raises(ToolkitError, match="different documents"):
        compare_curves([tmp_path / "three", tmp_path / "two"], tmp_path / "cmp", [3])
    tagger_run(tiny_bert, tmp_path, "none", "eval.curve_docs=null", short)
    with pytest.raises(ToolkitError, match="without a learning curve"):
        compare_curves([tmp_path / "three", tmp_path / "none"], tmp_path / "cmp", [3])


def test_summarize_curves_reads_each_system_at_its_last_point_within_the_budget():
    def point(step, seconds, recall, autocast=None):
        return {
            "step": step,
            "train_seconds": seconds,
            "inference_seconds_per_document": 0.5,
            "inference_autocast": autocast,
            "metrics": {"boundary_both_recall": recall},
            "ci95": {},
        }

    curves = {
        "a": {"points": [point(10, 5.0, 0.1), point(20, 10.0, 0.3)]},
        "b": {"points": [point(5, 4.0, 0.2), point(10, 8.0, 0.4), point(15, 12.0, 0.5)]},
    }
    s = summarize_curves(curves, [3])
    assert s["common_budget_seconds"] == 10.0
    assert s["at_common_budget"]["a"]["step"] == 20 and s["at_common_budget"]["b"]["step"] == 10
    # Two runs given 240 s: each stops at the first step that ends past it, so their last points differ by
    # less than a step; both are read at their last point.
    budget = {
        "fast": {"points": [point(100, 120.4, 0.1), point(200, 241.1, 0.2)]},  # 1.2 s steps
        "slow": {"points": [point(12, 123.9, 0.0), point(24, 246.7, 0.3, "bfloat16")]},  # 10.3 s steps
    }
    s = summarize_curves(budget, [3])
    assert s["at_common_budget"]["fast"]["step"] == 200 and s["at_common_budget"]["slow"]["step"] == 24
    # Each system's inference seconds are reported with the precision they were measured at.
    assert s["at_common_budget"]["fast"]["inference_precision"] == "fp32"
    assert s["at_common_budget"]["slow"]["inference_precision"] == "bf16"


def test_a_resumed_run_keeps_its_training_clock(tmp_path):
    from types import SimpleNamespace

    from toolkit.tasks.learning_curve import TrainingClock

    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-5" / CLOCK_FILE).write_text(json.dumps({"train_seconds": 12.5, "step": 5}))
    clock = TrainingClock(max_seconds=20)
    clock.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=5), None)
    assert clock.seconds == 12.5
    fresh = TrainingClock()
    fresh.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=0), None)
    assert fresh.seconds == 0.0


def test_budget_lr_factor_warms_up_then_decays_to_zero_over_the_budget():
    from toolkit.tasks.learning_curve import budget_lr_factor

    assert budget_lr_factor(0.0, 0.1) == 0.0 and budget_lr_factor(0.05, 0.1) == pytest.approx(0.5)
    assert budget_lr_factor(0.1, 0.1) == pytest.approx(1.0) and budget_lr_factor(0.55, 0.1) == pytest.approx(0.5)
    assert budget_lr_factor(1.0, 0.1) == 0.0 and budget_lr_factor(0.5, 0.0) == pytest.approx(0.5)


def test_a_schedule_by_seconds_checkpoints_at_each_interval_and_ends_with_the_rate_decayed(tiny_bert, tmp_path):
    result = run_recipe(
        load_recipe(
            REPO / "recipes" / "demo_mlm.yaml",
            [
                f"model.name={tiny_bert}",
                f"output_dir={tmp_path}",
                "name=seconds",
                *OVERFIT_FIVE,
                "eval.bootstrap=20",
                "eval.curve_docs=3",
                # Long enough that one step slowed by the other test worker is a small part of the schedule.
                "train.max_seconds=2.4",
                "train.eval_every_seconds=0.8",
                "train.schedule_by=seconds",
                "train.epochs=100000",
                "train.logging_steps=1",
                "train.warmup_ratio=0.1",
            ],
        ),
        tmp_path / "seconds",
    )
    assert result.run["stopped_by_time_budget"]
    curve = read_curve(tmp_path / "seconds")
    # A point each time the training seconds pass a multiple of 0.8 (a slow step may pass two at once), the last
    # at the budget. Points record seconds to 2 decimals, and 2.4 // 0.8 is 2.0 in floating point: a margin.
    seconds = [p["train_seconds"] for p in curve]
    intervals = [int(s / 0.8 + 1e-6) for s in seconds]
    assert len(curve) >= 2 and seconds[-1] >= 2.4 and intervals[0] >= 1
    assert all(a < b for a, b in zip(intervals, intervals[1:]))
    log = (tmp_path / "seconds" / "train_log.jsonl").read_text().splitlines()
    rates = [e["learning_rate"] for e in map(json.loads, log) if "learning_rate" in e]
    peak = max(rates)
    assert peak == pytest.approx(3e-3, rel=0.2)  # OVERFIT_FIVE's rate, reached after warmup
    assert rates[-1] < 0.1 * peak  # decayed by the end of the budget, not cut mid-schedule


def test_budget_settings_are_checked_with_their_fix():
    from toolkit.errors import ConfigError

    with pytest.raises(ConfigError, match="schedule_by=seconds.*max_seconds"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["train.schedule_by=seconds"])
    with pytest.raises(ConfigError, match="eval_every and train.eval_every_seconds"):
        load_recipe(REPO / "recipes" / "demo_mlm.yaml", ["train.eval_every=5", "train.eval_every_seconds=10"])
    with pytest.raises(ConfigError, match="generation.precision=prefer_bf16"):
        load_recipe(REPO / "recipes" / "demo_clm.yaml", ["eval.precision=prefer_bf16"])


def test_eval_precision_sets_the_curve_and_final_scoring_precision_and_records_it(tiny_bert, tmp_path):
    from toolkit.models.runtimes import preferred_autocast

    every = ("train.epochs=2", "train.eval_every=1")
    result = tagger_run(tiny_bert, tmp_path, "bf16_eval", "eval.precision=prefer_bf16", *every)
    # bfloat16 on a machine with bf16 units, fp32 (None) on one without: never emulated bf16.
    expected = preferred_autocast("prefer_bf16", "cpu")
    assert result.run["eval_autocast"] == expected
    assert {p["inference_autocast"] for p in read_curve(tmp_path / "bf16_eval")} == {expected}
    fp32 = tagger_run(tiny_bert, tmp_path, "fp32_eval", *every)
    assert fp32.run["eval_autocast"] is None
    assert {p["inference_autocast"] for p in read_curve(tmp_path / "fp32_eval")} == {None}


def point(epoch, value, low, high, seconds=None):
    key = "boundary_both_within_3_recall"
    return {
        "epoch": epoch,
        "train_seconds": seconds or 10.0 * epoch,
        "documents": 10,
        "metrics": {key: value},
        "ci95": {key: [low, high]},
    }


def test_the_plateau_rule_stops_when_a_doubling_adds_less_than_half_the_ci_width():
    from toolkit.evaluate.plateau import doubling_points, last_doubling, plateau_reached

    key = "boundary_both_within_3_recall"
    rising = [point(1, 0.2, 0.1, 0.3), point(2, 0.4, 0.3, 0.5)]  # +0.2 against a half width of 0.1
    assert not plateau_reached(rising, key)
    flat = [*rising, point(4, 0.45, 0.35, 0.55)]  # +0.05 < 0.1
    assert plateau_reached(flat, key) and not plateau_reached(flat, key, min_epochs=8)
    assert last_doubling(flat, key) == {
        "from_epoch": 2,
        "to_epoch": 4,
        "gain": 0.05,
        "half_ci_width": 0.1,
        "seconds": 20.0,
    }
    # Flat at a perfect score (no CI width) has plateaued; flat at zero has not started.
    assert plateau_reached([point(1, 1.0, 1.0, 1.0), point(2, 1.0, 1.0, 1.0)], key)
    assert not plateau_reached([point(1, 0.0, 0.0, 0.0), point(2, 0.0, 0.0, 0.0)], key)
    # A first rise from zero inside a wide CI (a decoder's epochs 2 to 4 on 10 documents) is the curve starting.
    assert not plateau_reached([point(2, 0.0, 0.0, 0.0), point(4, 0.065, 0.0, 0.154)], key)
    every_epoch = [point(e, 0.1 * e, 0, 1) for e in (1, 2, 3, 4, 5, 6, 7, 8)]
    assert [p["epoch"] for p in doubling_points(every_epoch)] == [1, 2, 4, 8]


def test_a_doubling_curve_stops_at_its_plateau_and_keeps_the_model_it_stopped_with(tiny_bert, tmp_path):
    result = tagger_run(
        tiny_bert,
        tmp_path,
        "doubling",
        "train.eval_every=doubling",
        "train.epochs=512",
        "train.lr_schedule=constant",
        "train.warmup_steps=2",
        "train.plateau.min_epochs=4",
        "train.logging_steps=1",
    )
    curve, run = read_curve(tmp_path / "doubling"), result.run
    epochs = [p["epoch"] for p in curve]
    assert epochs == [2**i for i in range(len(curve))]  # read at doubling budgets only
    key = "boundary_both_within_3_recall"
    from toolkit.evaluate.plateau import plateau_reached

    # It stopped exactly when the rule first held, before the 512-epoch cap, and was not stopped by a time budget.
    assert run["stopped_at_plateau"] and not run["stopped_by_time_budget"] and epochs[-1] < 512
    assert plateau_reached(curve, key, 4) and not any(plateau_reached(curve[:i], key, 4) for i in range(len(curve)))
    # The model kept is the one at the plateau: the final dev score (the same 3 documents here) is its point's.
    assert run["epochs_completed"] == epochs[-1]
    log = (tmp_path / "doubling" / TRAIN_LOG_FILE).read_text().splitlines()
    rates = [e["learning_rate"] for e in map(json.loads, log) if "learning_rate" in e]
    assert rates[-1] == pytest.approx(max(rates))  # constant after warmup: no decay toward a 512-epoch end
    assert not any("eval_runtime" in e for e in map(json.loads, log))  # the curve was the only evaluation


def test_doubling_evaluates_at_the_last_epoch_too(tiny_bert, tmp_path):
    tagger_run(tiny_bert, tmp_path, "six", "train.eval_every=doubling", "train.epochs=6")
    assert [p["epoch"] for p in read_curve(tmp_path / "six")] == [1, 2, 4, 6]


def test_plateau_settings_are_checked_with_their_fix():
    from toolkit.errors import ConfigError

    demo = REPO / "recipes" / "demo_mlm.yaml"
    with pytest.raises(ConfigError, match="eval_every=doubling"):
        load_recipe(demo, ["train.plateau.min_epochs=4", "eval.curve_docs=3"])
    with pytest.raises(ConfigError, match="eval.curve_docs"):
        load_recipe(demo, ["train.eval_every=doubling", "train.plateau.min_epochs=4"])
    with pytest.raises(ConfigError, match="not a learning-curve score"):
        load_recipe(demo, ["train.eval_every=doubling", "train.plateau.metric=f2", "eval.curve_docs=3"])
    with pytest.raises(ConfigError, match="held-out plateau"):
        load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", ["train.eval_every=doubling"])
    with pytest.raises(ConfigError, match="lr_schedule=linear"):
        load_recipe(demo, ["train.max_seconds=10", "train.schedule_by=seconds", "train.lr_schedule=constant"])


def test_a_run_stopped_by_its_time_budget_logs_its_last_evaluation_once(tiny_bert, tmp_path):
    # eval_every=epoch: the clock scores the step the budget ran out at, and the Trainer's end of that epoch must
    # not score it again (a repeated point reads as a flat last gain).
    result = tagger_run(
        tiny_bert, tmp_path, "once", "train.max_seconds=0.5", "train.epochs=1000", "train.eval_every=epoch"
    )
    assert result.run["stopped_by_time_budget"]
    steps = [p["step"] for p in read_curve(tmp_path / "once")]
    log = (tmp_path / "once" / TRAIN_LOG_FILE).read_text().splitlines()
    logged = [e["step"] for e in map(json.loads, log) if "eval_span_f1" in e]
    assert steps == sorted(set(steps)) and steps[-1] == result.run["optimizer_steps"]
    assert logged == sorted(set(logged)) and len(logged) == len(steps)


def test_a_run_resumed_after_its_plateau_trains_no_further_step_and_keeps_its_curve(tiny_bert, tmp_path):
    plateau = ("train.eval_every=doubling", "train.epochs=512", "train.lr_schedule=constant", "train.warmup_steps=2")
    first = tagger_run(tiny_bert, tmp_path, "resumed", *plateau, "train.plateau.min_epochs=4")
    assert first.run["stopped_at_plateau"]
    curve = read_curve(tmp_path / "resumed")
    (tmp_path / "resumed" / "metrics.json").unlink()  # as if the process had died after its last checkpoint
    again = tagger_run(tiny_bert, tmp_path, "resumed", *plateau, "train.plateau.min_epochs=4")
    assert again.run["stopped_at_plateau"] and again.run["resumed_from_checkpoint"]
    assert again.run["optimizer_steps"] == first.run["optimizer_steps"]  # not one step past the plateau
    assert read_curve(tmp_path / "resumed") == curve
    assert again.summary == first.summary  # the same model, scored again


def test_the_point_a_time_budget_scores_between_doublings_does_not_stop_or_count_as_the_plateau():
    from types import SimpleNamespace

    from toolkit.tasks.learning_curve import PlateauStop, TrainingClock

    steep = [point(1, 0.0, 0, 0), point(2, 0.05, 0, 0.1), point(4, 0.2, 0.1, 0.3), point(8, 0.4, 0.3, 0.5)]
    at_budget = point(8.7, 0.41, 0.3, 0.52)  # flat against epoch 8, but not a doubling
    clock = TrainingClock()
    stop = PlateauStop(SimpleNamespace(points=[*steep, at_budget]), clock, "boundary_both_within_3_recall", 4)
    control = SimpleNamespace(should_training_stop=False)
    stop.on_evaluate(None, None, control)
    assert not control.should_training_stop and not clock.stopped_at_plateau

    import importlib.util

    spec = importlib.util.spec_from_file_location("curve_records", REPO / "scripts" / "curve_records.py")
    records = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(records)
    both = {"stopped_at_plateau": True, "stopped_by_time_budget": True}  # as such a run recorded it before
    summary = records.summarize_curve([*steep, at_budget], both)
    assert summary["ended_by"] == "time budget" and summary["plateau_epoch"] is None
    assert summary["last_doubling"]["to_epoch"] == 8
