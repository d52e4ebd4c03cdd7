"""The package's import graph: no cycles between modules or between subpackages, pure layers stay
pure, no module imports a training flow (flows are reached through the registry), no module
outside the registry branches on a task's name (it asks the task's `Task` instead), and none outside the
export-path and runtime registries branches on a path's or a runtime's name (it asks the `ExportPath` or
`Runtime`)."""

import ast
from pathlib import Path

from conftest import REPO

from toolkit.deploy.paths import PATHS
from toolkit.models.runtimes import RUNTIMES
from toolkit.registry import TASK_NAMES, TASKS, flow_modules

PACKAGE = REPO / "toolkit"
# Every flow of the registry (new tasks are covered as they are added).
FLOWS = flow_modules()
# The one package that may name tasks: each task's module and the registry.
REGISTRY = PACKAGE / "registry"
# The modules that may name export paths and runtimes: the two registries.
PATH_REGISTRIES = {PACKAGE / "deploy" / "paths.py", PACKAGE / "models" / "runtimes.py"}


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """module -> toolkit modules it imports (at module level or inside functions)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolkit"):
                deps |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                }
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("toolkit")}
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_import_cycles_between_modules():
    assert cycles(import_graph()) == []


def test_no_import_cycles_between_subpackages():
    packages: dict[str, set[str]] = {}
    for module, deps in import_graph().items():
        packages.setdefault(package_of(module), set()).update(
            package_of(d) for d in deps if package_of(d) != package_of(module)
        )
    assert cycles(packages) == []


def test_pure_layers_stay_pure():
    graph = import_graph()
    allowed = {
        "toolkit.spans": {"toolkit.spans"},
        "toolkit.data": {"toolkit.data", "toolkit.spans", "toolkit.errors", "toolkit.models.pretrained"},
    }
    for module, deps in graph.items():
        for prefix, ok in allowed.items():
            if module.startswith(prefix):
                assert {package_of(d) for d in deps} <= ok, f"{module} imports {sorted(deps)}"
    assert {package_of(d) for d in graph["toolkit.evaluate.scorer"]} <= {"toolkit.spans", "toolkit.scoring"}
    assert graph["toolkit.scoring"] == set()


def test_no_module_imports_a_training_flow():
    for module, deps in import_graph().items():
        assert not (deps & FLOWS), (
            f"{module} imports {sorted(deps & FLOWS)}: reach flows through toolkit.tasks.flow_for"
        )


def name_uses(source: str, names: set[str]) -> list[int]:
    """Lines where code compares with, or looks up by, one of `names` (a string literal equal to one).
    Docstrings and longer messages that mention one are not branches."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(
            node, (ast.Compare, ast.Dict, ast.Subscript, ast.Tuple, ast.List, ast.Set, ast.Call, ast.IfExp, ast.Match)
        ):
            for child in ast.walk(node):
                if isinstance(child, ast.Constant) and child.value in names:
                    found.append(child.lineno)
    return sorted(set(found))


def task_name_uses(source: str) -> list[int]:
    """Lines that branch on a task's name or registry key."""
    return name_uses(source, set(TASK_NAMES) | set(TASKS))


def path_name_uses(source: str) -> list[int]:
    """Lines that branch on an export path's or a runtime's name."""
    return name_uses(source, set(PATHS) | set(RUNTIMES))


def test_no_module_outside_the_registry_branches_on_a_task_name():
    offenders = {
        str(path.relative_to(REPO)): lines
        for path in PACKAGE.rglob("*.py")
        if REGISTRY not in path.parents and (lines := task_name_uses(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"ask the task's Task (toolkit.registry) instead of naming it: {offenders}"


def test_a_planted_task_branch_is_found():
    planted = (
        'def seconds(run):\n    if run.task == "span_generation":\n        return 4\n'
        '    return {"token_classification": 32}.get(run.task)\n'
    )
    assert task_name_uses(planted) == [2, 4]
    assert task_name_uses('"""A span_generation model."""\nMESSAGE = "fine-tune a token_classification recipe"\n') == []


def test_no_module_outside_the_export_registries_branches_on_a_path_or_runtime_name():
    offenders = {
        str(path.relative_to(REPO)): lines
        for path in PACKAGE.rglob("*.py")
        if path not in PATH_REGISTRIES and (lines := path_name_uses(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"ask the path's ExportPath or the Runtime instead of naming it: {offenders}"


def test_a_planted_export_path_branch_is_found():
    planted = (
        'def threads(run):\n    if run.meta.export.runtime == "openvino":\n        return 1\n'
        '    return {"onnx_int8": 2}.get(run.meta.export.path)\n'
        'WINDOWED = ("pytorch", "openvino")\n'
    )
    assert path_name_uses(planted) == [2, 4, 5]
    assert path_name_uses('"""An onnx_int8 artifact."""\nHELP = "export with --precision onnx_fp32"\n') == []


def test_modules_stay_small_and_the_top_level_holds_few():
    """A module over 450 lines holds more than one job; loose modules at the top belong in a package."""
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}, f"split these along a responsibility: {long}"
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 8, f"group these into packages: {loose}"
