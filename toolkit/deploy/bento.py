"""`toolkit bento DIR` (`make bento ARTIFACT=DIR`): a bento of the extraction service with one exported
artifact, whose Python environment is the project's lock.

The build context is written under build/bento/<artifact name>: the service entry point
(serving/service.py), the artifact, the toolkit's own wheel, a requirements file made from
requirements/lock.txt and the bentofile. `bentoml build` then packs it without resolving anything
(`lock_packages: false`): the container installs exactly the locked, hash-checked set.

- Every requirement keeps the lock's hashes. torch is named by the direct URL of its CPU wheel on
  PyTorch's CPU index (hash-checked too), so no index lookup can fetch the multi-GB CUDA build.
- The no-deps packages (requirements/lock-nodeps.txt) are in it too: the container installs with
  `--no-deps`, as `make install` does, since the lock is the whole set.
- bentoml itself is named by a link to its wheel inside the bento (hash-checked like the rest):
  otherwise BentoML appends an unhashed `bentoml==X`, which pip's hash-checking mode refuses.
- The bento's env sets only names the service reads (TOOLKIT_ARTIFACT, TOOLKIT_MAX_BATCH_SIZE);
  every other TOOLKIT_* setting can be given to the container at run time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from toolkit.deploy.batcher import MAX_BATCH_DOCS
from toolkit.errors import ToolkitError
from toolkit.infer.rows import model_id_of
from toolkit.rundir import MANIFEST, verify_artifact

ROOT = Path(__file__).resolve().parents[2]
# The lock and the no-deps packages: the set `make install` installs, each package hash-checked.
LOCKS = (ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "lock-nodeps.txt")
SERVICE = ROOT / "serving" / "service.py"
BENTO_NAME = "clause-entity-extraction"
# The lock is resolved for CPython 3.11 on Linux x86-64 (Makefile, LOCK_PYTHON); so is this wheel.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_WHEEL_TAGS = "cp311-cp311-manylinux_2_28_x86_64"
# Where BentoML puts python.wheels in a bento; links there are rewritten to ./wheels/<file>.
BUNDLED_WHEELS = "env/python/wheels"
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def lock_requirements(lock_text: str, bundled: dict[str, str] | None = None) -> str:
    """The lock as the bento's requirements file: each pinned requirement with its hashes (comments
    dropped), torch as its CPU wheel's direct URL, and each package in `bundled` (name -> wheel file)
    as that wheel inside the bento. Pure: text in, text out."""
    bundled = {k.lower(): v for k, v in (bundled or {}).items()}
    blocks: list[list[str]] = []
    for line in lock_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if REQUIREMENT.match(stripped):
            blocks.append([stripped.rstrip(" \\")])
        elif stripped.startswith("--hash=") and blocks:
            blocks[-1].append(stripped.rstrip(" \\"))
        else:
            raise ToolkitError(
                f"requirements/lock.txt: cannot read the line {line!r}",
                fix="regenerate the lock with `make lock`",
            )
    out = []
    for head, *hashes in blocks:
        if not hashes:
            raise ToolkitError(f"requirements/lock.txt: {head} has no hash", fix="regenerate the lock with `make lock`")
        name, version = REQUIREMENT.match(head).groups()  # type: ignore[union-attr]
        if name.lower() == "torch":
            if not version.endswith("+cpu"):
                raise ToolkitError(f"the lock pins {head}, not a CPU build", fix="pin torch==X+cpu and `make lock`")
            wheel = f"torch-{version.replace('+', '%2B')}-{TORCH_WHEEL_TAGS}.whl"
            head = f"torch @ {TORCH_CPU_INDEX}/{wheel}"
        elif name.lower() in bundled:
            # BentoML adds an unhashed `bentoml==X` unless the file names bentoml by a link; a link into
            # the bento's wheels keeps the lock's hash (and pip's hash-checking mode) intact.
            head = f"{name} @ file:///{BUNDLED_WHEELS}/{bundled[name.lower()]}"
        out.append(" \\\n    ".join([head, *hashes]))
    return "\n".join(out) + "\n"


def build_context(artifact: Path, where: Path) -> Path:
    """Write the bento's build context for `artifact` into `where` (emptied first); returns the bentofile."""
    verify_artifact(artifact)
    if where.exists():
        shutil.rmtree(where)
    (where / "wheels").mkdir(parents=True)
    shutil.copy2(SERVICE, where / "service.py")
    shutil.copytree(artifact, where / "artifact")
    lock = "\n".join(p.read_text(encoding="utf-8") for p in LOCKS)
    # The toolkit itself, without its dependencies (the lock has them) and offline (the venv's build tools).
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(where / "wheels"), str(ROOT))
    wheel = next((where / "wheels").glob("clause_entity_toolkit-*.whl"))
    # BentoML's own wheel, checked against the lock's hashes (from pip's index or cache).
    pinned = where / "bentoml.txt"
    pinned.write_text(_block(lock, "bentoml"), encoding="utf-8")
    _pip("download", "--no-deps", "--require-hashes", "-d", str(where / "wheels"), "-r", str(pinned))
    pinned.unlink()
    bentoml_wheel = next((where / "wheels").glob("bentoml-*.whl"))
    requirements = lock_requirements(lock, {"bentoml": bentoml_wheel.name})
    (where / "requirements.txt").write_text(requirements, encoding="utf-8")
    bentofile = {
        "service": "service:Extraction",
        "name": BENTO_NAME,
        "labels": {"project": "clause-entity-toolkit", "model_id": model_id_of(artifact)},
        "include": ["service.py", "artifact/**"],
        "envs": [
            {"name": "TOOLKIT_ARTIFACT", "value": "artifact"},
            {"name": "TOOLKIT_MAX_BATCH_SIZE", "value": str(MAX_BATCH_DOCS)},
        ],
        "python": {
            "requirements_txt": "requirements.txt",
            "wheels": [f"wheels/{wheel.name}", f"wheels/{bentoml_wheel.name}"],
            "lock_packages": False,
            # The lock is the whole set, installed as `make install` installs it; hash checking is on
            # because every line has hashes. The container's install.sh passes these to pip (or uv).
            "pip_args": "--no-deps",
        },
    }
    path = where / "bentofile.yaml"
    path.write_text(yaml.safe_dump(bentofile, sort_keys=False), encoding="utf-8")
    return path


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolkitError(f"pip {args[0]} failed: {done.stderr.strip()[-1500:]}", fix="read pip's message above")


def _block(lock_text: str, name: str) -> str:
    """The lock's lines for one package (its pin and hashes)."""
    lines, keep = [], False
    for line in lock_text.splitlines():
        if REQUIREMENT.match(line):
            keep = line.lower().startswith(f"{name.lower()}==")
        if keep and (REQUIREMENT.match(line) or line.strip().startswith("--hash=")):
            lines.append(line)
    if not lines:
        raise ToolkitError(f"requirements/lock.txt pins no {name}", fix="regenerate the lock with `make lock`")
    return "\n".join(lines) + "\n"


def build_bento(artifact: Path, where: Path | None = None) -> tuple[str, Path]:
    """Build the bento (in BentoML's store, $BENTOML_HOME); returns its tag and its directory."""
    artifact = Path(artifact).resolve()
    if not (artifact / MANIFEST).is_file():
        raise ToolkitError(f"{artifact}: no {MANIFEST}", fix="pass a directory made by `toolkit export`")
    where = where or ROOT / "build" / "bento" / artifact.name
    bentofile = build_context(artifact, where)
    # The service module reads its artifact when BentoML imports it to build: point it at the context's copy.
    env = {**os.environ, "TOOLKIT_ARTIFACT": str(where / "artifact")}
    done = subprocess.run(
        [sys.executable, "-m", "bentoml", "build", "-f", str(bentofile), "--output", "tag", str(where)],
        env=env,
        cwd=where,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ToolkitError(
            f"bentoml build failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}",
            fix=f"read the build context in {where}",
        )
    tag = done.stdout.strip().splitlines()[-1].removeprefix("__tag__:")
    return tag, bento_path(tag)


def bento_path(tag: str) -> Path:
    import bentoml

    return Path(bentoml.bentos.get(tag).path)
