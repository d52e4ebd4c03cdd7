"""Benchmark conditions: another process busy on a core is measured, warned about, and recorded, and
timings then use only the free cores."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager

from typer.testing import CliRunner

from toolkit import hardware
from toolkit.cli import app

STAT = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n"
SELF_STAT = "4242 (python (my) worker) S 1 4242 4242 0 -1 4194560 100 0 0 0 70 30 4 2 20 0 3 0 100 0 0\n"


def test_ticks_are_read_from_proc_text():
    assert hardware.cpu_ticks(STAT) == (160, 980)
    # The command name may hold spaces and parentheses; utime and stime follow it.
    assert hardware.process_ticks(SELF_STAT) == 100


def test_other_processes_busy_cores_leave_out_this_process():
    # 200 ticks over 2 cores: 100 busy, of which 40 were this process's -> 0.6 cores by others.
    assert hardware.others_busy_cores((0, 0, 0), (100, 200, 40), cores=2) == 0.6
    assert hardware.others_busy_cores((0, 0, 0), (10, 200, 40), cores=2) == 0.0
    assert hardware.others_busy_cores((5, 5, 0), (5, 5, 0), cores=2) == 0.0


def test_free_cores_leave_out_what_others_use():
    assert hardware.free_cores_for(2, 0.05) == 2
    assert hardware.free_cores_for(2, 0.5) == 1
    assert hardware.free_cores_for(2, 1.0) == 1
    assert hardware.free_cores_for(2, 2.0) == 1
    assert hardware.free_cores_for(8, 2.5) == 5


@contextmanager
def busy_core(seconds: float = 20):
    """One other process spinning on a core (ended when the block ends, or after `seconds`)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"]
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_busy_core_is_measured_and_warned_about():
    with busy_core():
        conditions = hardware.measure_conditions(seconds=0.5)
    assert conditions["others_busy_cores"] >= 0.5, conditions
    assert conditions["free_cores"] == max(1, conditions["cores"] - 1) or conditions["others_busy_cores"] > 1.2
    assert "other processes kept" in conditions["warning"] and "run benchmarks alone" in conditions["warning"]
    assert "WARNING: other processes kept" in hardware.describe_conditions(conditions)


def test_export_warns_of_a_busy_core_records_it_and_times_on_the_free_cores(tiny_mlm_run, tmp_path):
    out = tmp_path / "artifact"
    with busy_core():
        result = CliRunner().invoke(
            app, ["export", str(tiny_mlm_run), "--out", str(out), "--precision", "fp32", "--parity-docs", "2"]
        )
    assert result.exit_code == 0, result.output
    assert "warning: other processes kept" in result.stderr
    conditions = json.loads((out / "manifest.json").read_text())["conditions"]
    assert conditions["others_busy_cores"] >= 0.5 and conditions["warning"]
    assert 1 <= conditions["threads"] <= conditions["free_cores"] < conditions["cores"] or conditions["cores"] == 1
    hardware.set_inference_threads(None)
