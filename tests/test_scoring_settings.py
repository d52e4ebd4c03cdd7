"""The scoring settings a run records are the ones used: eval, compare, thresholds and the ranking metrics
match at the run's eval.jaccard_threshold, and --bootstrap 0 means no resampling anywhere."""

import shutil

import numpy as np
import pytest
import yaml

from toolkit.data.schema import Span
from toolkit.errors import ToolkitError
from toolkit.evaluate.compare import compare
from toolkit.evaluate.evaluation import evaluate_run
from toolkit.evaluate.thresholds import threshold_counts
from toolkit.scoring_defaults import span_summary_names


def with_jaccard(run_dir, tmp_path, threshold: float):
    copy = tmp_path / f"jaccard_{threshold}"
    shutil.copytree(run_dir, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["eval"]["jaccard_threshold"] = threshold
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    return copy


def test_eval_matches_at_the_recorded_jaccard_threshold_unless_told(tiny_mlm_run, tmp_path):
    strict = with_jaccard(tiny_mlm_run, tmp_path, 0.9)
    metrics, _ = evaluate_run(strict, "sample:clinical_dev", tmp_path / "e1", bootstrap=0)
    assert metrics["settings"]["jaccard_threshold"] == metrics["ranking"]["settings"]["jaccard_threshold"] == 0.9
    metrics, _ = evaluate_run(strict, "sample:clinical_dev", tmp_path / "e2", bootstrap=0, jaccard_threshold=0.3)
    assert metrics["settings"]["jaccard_threshold"] == metrics["ranking"]["settings"]["jaccard_threshold"] == 0.3
    assert metrics["settings"]["bootstrap"] == 0 and metrics["ci95"] == {}


def test_compare_uses_the_runs_threshold_refuses_a_mix_and_bootstrap_0_means_none(tiny_mlm_run, tmp_path):
    strict = with_jaccard(tiny_mlm_run, tmp_path, 0.9)
    with pytest.raises(ToolkitError, match="different Jaccard thresholds"):
        compare([tiny_mlm_run, strict], "sample:clinical_dev", tmp_path / "mixed", bootstrap=0, max_docs=4)
    summary = compare(
        [tiny_mlm_run, strict], "sample:clinical_dev", tmp_path / "c", bootstrap=0, max_docs=4, jaccard_threshold=0.7
    )
    assert {m["settings"]["jaccard_threshold"] for m in summary["systems"].values()} == {0.7}
    paired = next(iter(summary["paired_bootstrap"].values()))
    assert (
        all(v["ci95"] is None and v["p_value"] is None for v in paired.values())
        and paired["span_f1"]["difference"] == 0.0
    )
    assert "n/a (--bootstrap 0)" in (tmp_path / "c" / "compare.md").read_text()
    resampled = compare([tiny_mlm_run, tiny_mlm_run], "sample:clinical_dev", tmp_path / "r", bootstrap=50, max_docs=4)
    assert next(iter(resampled["paired_bootstrap"].values()))["span_f1"]["ci95"] == [0.0, 0.0]


def test_thresholds_are_chosen_at_the_jaccard_threshold_given():
    text = "one two three four. five six."
    gold = [[Span(start=0, end=18, label="A")]]  # four words
    segments = [[(0, 8), (8, 19), (20, 29)]]  # "one two" / " three four." / "five six."
    probs = [np.array([[0.9], [0.1], [0.1]])]  # at 0.5 only the first segment: 2 of 4 words, Jaccard 0.5
    at = {
        j: threshold_counts([text], gold, segments, probs, ["A"], grid=(0.5,), jaccard_threshold=j)[0, 0, 0]
        for j in (0.5, 0.6)
    }
    assert at[0.5].tolist() == [1, 1, 1] and at[0.6].tolist() == [0, 1, 1]


def test_the_summary_names_are_the_ones_the_scorer_writes():
    from toolkit.evaluate.scorer import score

    written = score(["a b"], [[Span(start=0, end=1, label="A")]], [[]], tolerances=[2, 5], bootstrap=0)["summary"]
    assert set(written) == set(span_summary_names([2, 5]))
