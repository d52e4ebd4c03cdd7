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
    assert {package_of(d) for d in graph["toolkit.evaluate.scorer"]} <= {"toolkit.spans", "toolkit.scoring_defaults"}
    assert graph["toolkit.scoring_defaults"] == set()


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


# The segment method's package in layers: a module imports only modules of the layers before its own, so the
# method reads from its parts (features, the linear model, the stack) up to its flows.
SEGMENTS = PACKAGE / "tasks" / "segments"
SEGMENT_LAYERS = (
    {"features", "linear_model", "stacking", "frozen_layers", "thresholding"},  # parts, no state of the method
    {"combination", "prepared"},  # the combination over the stack; the method's state and strategy interface
    {"trainer", "held_out"},  # training an encoder; choosing on held-out documents
    {"cross_fit"},  # one encoder per fold
    {"evidence"},  # a strategy per segments.thresholds mode
    {"cost"},  # the run's cost, timed before it runs, and the plan a budget allows
    {"method", "linear_flow"},  # the flows: the encoder's method and the linear model's
)


def test_the_segment_package_imports_in_layers():
    modules = {p.stem for p in SEGMENTS.glob("*.py") if p.name != "__init__.py"}
    assert modules == set().union(*SEGMENT_LAYERS), "place every module of tasks/segments in SEGMENT_LAYERS"
    layer = {m: i for i, names in enumerate(SEGMENT_LAYERS) for m in names}
    prefix = "toolkit.tasks.segments."
    wrong = {
        (m, d)
        for name, deps in import_graph().items()
        if name.startswith(prefix) and (m := name.removeprefix(prefix)) in layer
        for d in (x.removeprefix(prefix) for x in deps if x.startswith(prefix))
        if layer[d] >= layer[m]
    }
    assert wrong == set(), f"these imports run sideways or back up the segment package's layers: {sorted(wrong)}"


def thresholds_mode_read(node: ast.AST) -> bool:
    """`<...>.segments.thresholds`, or `s.thresholds` where `s = recipe.segments` (the package's habit)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "thresholds"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "segments") or (
        isinstance(owner, ast.Name) and owner.id == "s"
    )


def test_the_segment_flow_asks_its_strategy_and_never_branches_on_the_thresholds_mode():
    """segments.thresholds is read once, by evidence.choose_strategy; the flow asks the strategy."""
    for name in ("method.py", "trainer.py", "cross_fit.py"):
        tree = ast.parse((SEGMENTS / name).read_text(encoding="utf-8"))
        reads = [n.lineno for n in ast.walk(tree) if thresholds_mode_read(n)]
        assert reads == [], f"tasks/segments/{name} reads segments.thresholds at lines {reads}: ask p.strategy"
    planted = "def f(recipe, s, choice):\n    a = recipe.segments.thresholds\n    b = s.thresholds\n"
    planted += "    c = choice.thresholds\n"
    assert [n.lineno for n in ast.walk(ast.parse(planted)) if thresholds_mode_read(n)] == [2, 3]


def test_tasks_holds_few_modules_at_its_top_level():
    top = sorted(p.name for p in (PACKAGE / "tasks").glob("*.py"))
    assert len(top) <= 12, f"group these into a package of their method: {top}"


def test_model_meta_has_one_import_path():
    """ModelMeta is defined in toolkit.registry.saved and imported from there only."""
    elsewhere = sorted(
        f"{module_name(path)}:{node.lineno}"
        for path in [*PACKAGE.rglob("*.py"), *(REPO / "tests").rglob("*.py")]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and node.module not in (None, "toolkit.registry.saved")
        and any(a.name == "ModelMeta" for a in node.names)
    )
    assert elsewhere == [], f"import ModelMeta from toolkit.registry.saved: {elsewhere}"


# Functions over LONG_FUNCTION lines, each with why it stays whole.
LONG_FUNCTION = 80
LONG_FUNCTIONS = {
    "toolkit.cli.predict:predict": "a typer command: 40 of its lines declare its options in the signature",
    "toolkit.data.validation:check_spans": "one pass over a record's spans that reports every problem at once; "
    "the checks read as one list in the order a user fixes them",
    "toolkit.data.validation:validate_files": "the same, over a file's lines: each problem with line, field, fix",
    "toolkit.deploy.model_card:render_model_card": "the card's Markdown, section by section, as it reads",
    "toolkit.evaluate.review:review_html": "the review page's HTML template with its few substitutions",
    "toolkit.tasks.token_classification:_trainer_class": "a factory whose body is the Trainer subclass, defined on "
    "first use so that importing the module does not import torch",
}


def long_functions(source: str, module: str) -> dict[str, int]:
    """`module:function` -> lines, for every function (methods and nested ones too) over LONG_FUNCTION lines."""
    return {
        f"{module}:{node.name}": node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > LONG_FUNCTION
    }


def test_functions_stay_short_outside_a_named_list():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        found |= long_functions(path.read_text(encoding="utf-8"), module_name(path))
    assert set(found) - set(LONG_FUNCTIONS) == set(), f"split these into their steps: {found}"
    assert set(LONG_FUNCTIONS) <= set(found), "a function on the list is short now: take it off"
    planted = "def f():\n" + "    x = 1\n" * LONG_FUNCTION
    assert long_functions(planted, "m") == {"m:f": LONG_FUNCTION + 1}
