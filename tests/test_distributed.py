"""The same recipe across 2 CPU processes (torchrun, gloo): both ranks finish, rank 0 alone writes."""

import json
import subprocess
import sys

import pytest
from conftest import REPO

from toolkit.deploy.launch import free_port


@pytest.mark.slow
def test_two_process_data_parallel_run(tiny_bert, tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        "--master_addr=127.0.0.1",
        "-m",
        "toolkit",
        "run",
        str(REPO / "recipes" / "demo_mlm.yaml"),
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        "data.train=sample:clinical_train",
        "data.dev=sample:clinical_dev",
        "data.max_train_docs=8",
        "data.max_dev_docs=4",
        "train.max_steps=4",
        "train.batch_size=2",
        "eval.bootstrap=10",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "rank 1/2: finished; rank 0 writes" in out  # rank 1 ran to the end and wrote nothing
    run_dir = tmp_path / "demo_mlm"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["run"]["world_size"] == 2
    assert metrics["run"]["optimizer_steps"] == 4
    # Rank 0 wrote each output once: one predictions line per dev document, one config.
    assert len((run_dir / "predictions.jsonl").read_text().splitlines()) == 4
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [
            "checkpoints",
            "config.yaml",
            "data_report.json",
            "metrics.json",
            "model",
            "predictions.jsonl",
            "report.md",
            "train_log.jsonl",
        ]
    )
