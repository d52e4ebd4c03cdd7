import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from toolkit.data.sample import SAMPLE_FILES


def test_committed_sample_equals_the_generator_output(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_sample.py"), "--out", str(tmp_path / "out")],
        check=True,
        timeout=120,
    )
    for train, dev in SAMPLE_FILES.values():
        for path in (train, dev):
            assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes(), (
                f"{path.name}: run python scripts/build_sample.py"
            )


def tiny_demo(tiny_bert: Path, tiny_llama: Path, workdir: Path) -> list[str]:
    """`toolkit demo` arguments that run the main job on tiny models in seconds."""
    return [
        "demo",
        f"mlm.model.name={tiny_bert}",
        f"clm.model.name={tiny_llama}",
        "train.epochs=1",
        "clm.generation.max_new_tokens=16",
        "--workdir",
        str(workdir),
    ]


@pytest.mark.slow
def test_demo_main_job_runs_clean(tmp_path, tiny_bert, tiny_llama):
    # The real demo fine-tunes MiniLM and SmolLM2 for minutes; the test runs the same job on tiny models.
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", *tiny_demo(tiny_bert, tiny_llama, tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Round trips" in proc.stdout and "span F1 (exact)" in proc.stdout and "Traceback" not in proc.stderr
    assert "MLM vs CLM" in proc.stdout and "boundary recall (both) difference" in proc.stdout
    assert (tmp_path / "demo_mlm" / "metrics.json").is_file() and (tmp_path / "demo_clm" / "metrics.json").is_file()
    assert (tmp_path / "compare" / "compare.md").is_file() and (tmp_path / "compare" / "recall_by_length.png").is_file()


@pytest.mark.slow
def test_the_built_wheel_runs_the_demo_outside_the_repository(tmp_path, tiny_bert, tiny_llama):
    """The wheel, installed with --no-deps into a fresh virtual environment that sees the project's installed
    dependencies (not its source), runs the main job from a folder outside the repository."""
    import shutil
    import site
    import sysconfig

    # Built from a copy of the tracked files: an in-tree build would leave build/ in the checkout, whose
    # stale modules a later build could pack.
    source = tmp_path / "source"
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    )
    for name in filter(None, tracked):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_symlink():
            target.symlink_to((REPO / name).readlink())
        elif (REPO / name).is_file():
            shutil.copy2(REPO / name, target)
    wheels = tmp_path / "wheels"
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(wheels),
        str(source),
    ]
    subprocess.run(build, check=True, timeout=300, capture_output=True)
    wheel = next(wheels.glob("clause_entity_toolkit-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    # The project's dependencies by path only: the .pth files there (the editable install of this
    # checkout among them) are not run, so `toolkit` can only come from the wheel.
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (Path(purelib.stdout.strip()) / "project_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import toolkit; print(toolkit.__file__)"],
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(venv) in where.stdout, where.stdout
    listed = subprocess.run(
        [str(venv / "bin" / "toolkit"), "recipes"], cwd=outside, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0 and "demo_mlm" in listed.stdout and "ncbi_disease_mlm" in listed.stdout
    demo = [str(venv / "bin" / "toolkit"), *tiny_demo(tiny_bert, tiny_llama, outside / "demo")]
    proc = subprocess.run(demo, cwd=outside, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (outside / "demo" / "demo_mlm" / "metrics.json").is_file() and (
        outside / "demo" / "compare" / "compare.md"
    ).is_file()
