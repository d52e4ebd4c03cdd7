"""The clause guide's walk-through runs as written: every command of its marked blocks, in order, in an
empty folder, on the embedded sample, with the real default encoder (slow tier)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO

MARK = "<!-- guide: {name} -->"


def guide_commands(text: str, name: str) -> list[str]:
    """The commands of the blocks marked `<!-- guide: NAME -->`, in order (one a line; comments kept out)."""
    blocks = re.findall(re.escape(MARK.format(name=name)) + r"\s*```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_guide_marks_its_commands():
    commands = guide_commands((REPO / "docs" / "guides" / "clauses.md").read_text(encoding="utf-8"), "clauses")
    assert commands[0].startswith("toolkit export-data") and any(c.startswith("toolkit serve") for c in commands)
    assert commands[-1].startswith("curl ")


def _wait_ready(port: int, server: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, "toolkit serve exited before it was ready"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"toolkit serve was not ready within {seconds} s")


@pytest.mark.slow
def test_the_clause_guide_runs_as_written(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the guide's last step uses it)")
    commands = guide_commands((REPO / "docs" / "guides" / "clauses.md").read_text(encoding="utf-8"), "clauses")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("OMP_NUM_THREADS", None)  # the guide's user runs with the machine's defaults
    server = None
    answers = []
    try:
        for command in commands:
            if command.startswith("toolkit serve"):
                # The guide runs it in one terminal and curl in another: here it runs in the background.
                server = subprocess.Popen(shlex.split(command), cwd=tmp_path, env=env, start_new_session=True)
                _wait_ready(int(command.split("--port")[1].split()[0]), server)
                continue
            done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            if command.startswith("curl "):
                answers.append(json.loads(done.stdout))
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    assert (tmp_path / "runs" / "clauses" / "report.md").is_file()
    assert (tmp_path / "runs" / "compare" / "compare.md").is_file()
    assert (tmp_path / "review.html").is_file()
    [answer] = answers
    assert any(s["label"] == "Governing Law" for s in answer["spans"]), answer
