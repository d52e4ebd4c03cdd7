import subprocess
import sys

import pytest
from conftest import REPO

from toolkit.data.sample import SAMPLE_FILES


def test_committed_sample_equals_the_generator_output(tmp_path):
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_sample.py"), "--out", str(tmp_path / "out")], check=True, timeout=120)
    for train, dev in SAMPLE_FILES.values():
        for path in (train, dev):
            assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes(), f"{path.name}: run python scripts/build_sample.py"


@pytest.mark.slow
def test_demo_main_job_runs_clean(tmp_path, tiny_bert, tiny_llama):
    # The real demo fine-tunes MiniLM and SmolLM2 for minutes; the test runs the same job on tiny models.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "demo",
            f"mlm.model.name={tiny_bert}",
            f"clm.model.name={tiny_llama}",
            "train.epochs=1",
            "clm.generation.max_new_tokens=16",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Round trips" in proc.stdout and "span F1 (exact)" in proc.stdout and "Traceback" not in proc.stderr
    assert "MLM vs CLM" in proc.stdout and "boundary recall (both) difference" in proc.stdout
    assert (tmp_path / "demo_mlm" / "metrics.json").is_file() and (tmp_path / "demo_clm" / "metrics.json").is_file()
    assert (tmp_path / "compare" / "compare.md").is_file() and (tmp_path / "compare" / "recall_by_length.png").is_file()
