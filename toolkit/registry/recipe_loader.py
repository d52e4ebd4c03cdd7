"""Recipes: strict, typed configuration read from YAML.

One recipe file is one run, or one sweep when it has a `sweep:` block. A recipe is validated as the
recipe of its `task:` (`toolkit.registry`), whose sections are in `toolkit.registry.recipe_sections`: an unknown key,
or an option of another task, fails with its key path, and every error is reported at once with a fix.
`key=value` overrides on the command line use the same dotted paths (`train.learning_rate=2e-5`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from toolkit.errors import ConfigError
from toolkit.registry import RECIPE, TASKS, RecipeBase, recipe_key


def _section(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    """The section model a field of `model` holds (None for a plain value or mapping)."""
    annotation = model.model_fields[key].annotation
    args = getattr(annotation, "__args__", (annotation,))
    return next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _accepts(model: type[BaseModel], path: tuple) -> bool:
    """Whether `path` (keys from the recipe's top) names a field of `model` or of its sections."""
    node: type[BaseModel] | None = model
    for part in path:
        if node is None:
            return True  # below a plain value or mapping (label_map, sweep.params): any key
        if part not in node.model_fields:
            return False
        node = _section(node, part)
    return True


def _shown(value: Any) -> str:
    """The offending value, when it is short enough to help (never a whole section)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        text = repr(value)
        return f" (got {text[:60]}{'...' if len(text) > 60 else ''})"
    return ""


def _error_line(err: dict) -> str:
    loc = tuple(err["loc"])
    key = loc[0] if loc and loc[0] in TASKS else None
    path = loc[1:] if key else loc
    where = ".".join(str(p) for p in path)
    kind, msg = err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        owners = [k for k, t in TASKS.items() if k != key and _accepts(t.recipe, path)]
        if owners:
            null = f" (on the command line: {where}=null)" if len(path) == 1 else ""
            return (
                f"  {where}: not an option of {key} recipes (it belongs to {', '.join(owners)}); fix: remove it{null}, "
                f"or set the task it belongs to"
            )
        accepted = sorted(TASKS[key].recipe.model_fields) if key and len(path) == 1 else []
        listed = f" (keys here: {', '.join(accepted)})" if accepted else ""
        return f"  {where}: unknown key; fix: remove it or check its spelling{listed}"
    if kind == "missing":
        return f"  {where}: required; fix: add it"
    if kind == "unknown_task":
        return (
            f"  task: {msg}{_shown(err.get('input', {}).get('task') if isinstance(err.get('input'), dict) else None)}; "
            f"fix: set task"
        )
    problem, sep, fix = msg.rpartition(": ") if kind == "value_error" else ("", "", "")
    if sep:  # a rule across keys: its message names them, and ends in its fix
        return f"  {where + ': ' if where else ''}{problem}; fix: {fix}"
    return f"  {where}: {msg}{_shown(err.get('input'))}; fix: give a value that satisfies it"


def _format_errors(exc: ValidationError, source: str) -> ConfigError:
    lines = [_error_line(err) for err in exc.errors(include_url=False)]
    return ConfigError(
        f"{source}: {len(lines)} config error(s)\n" + "\n".join(lines), fix="edit the recipe or the key=value override"
    )


def parse_override(text: str) -> tuple[str, Any]:
    """'train.learning_rate=2e-5' -> ('train.learning_rate', 2e-05); values are parsed as YAML."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not key=value", fix="e.g. train.learning_rate=2e-5")
    return key.strip(), (_yaml(raw) if raw != "" else None)


def set_dotted(data: dict, key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads 2e-5 (no dot) as a string; resolve floats the YAML 1.2 way."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)$|^[-+]?(?:[0-9][0-9_]*)\.[0-9_]*$|^[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?$"
    ),
    list("-+0123456789."),
)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_recipe(path: Path | str, overrides: list[str] | None = None, linear_baseline: bool = False) -> RecipeBase:
    """Read, override and validate a recipe; raises ConfigError listing every problem. `linear_baseline`:
    a segment recipe read as its bag-of-words baseline's, the overrides applied to that."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such recipe", fix="pass a YAML file from recipes/ or your own")
    try:
        data = _yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})", fix="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a YAML mapping", fix="see recipes/demo_mlm.yaml")
    if not linear_baseline:
        return recipe_from_dict(data, overrides, str(path))
    task = TASKS.get(str(data.get("task")))
    if task is None or task.baseline is None:
        having = " or ".join(t.name for t in TASKS.values() if t.baseline)
        raise ConfigError(
            f"--linear-baseline fits a baseline, which only {having} recipes have; this recipe's task is "
            f"{data.get('task')}",
            fix=f"pass a {having} recipe",
        )
    baseline = task.baseline_data(data, lambda mapping: apply_overrides(mapping, overrides))
    return recipe_from_dict(baseline, None, str(path))


def _accepted_only(data: dict, model: type[BaseModel]) -> dict:
    """`data` without the keys `model` does not accept, at every level of its sections."""
    out = {}
    for key, value in data.items():
        if key in model.model_fields:
            section = _section(model, key)
            out[key] = _accepted_only(value, section) if section is not None and isinstance(value, dict) else value
    return out


def load_saved_recipe(path: Path | str) -> RecipeBase:
    """A run's (or artifact's) config.yaml. Versions before the task registry saved one recipe with every
    task's sections, filled with their defaults (their validation refused other values), and named the
    linear baseline `model.name: linear`: those are read as the recipe of their task."""
    data = _yaml(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("model"), dict) and data["model"].get("name") == "linear":
        data["model"] = {"kind": "linear"}
    key = recipe_key(data)
    if key is not None:
        data = _accepted_only(data, TASKS[key].recipe)
    return recipe_from_dict(data, source=str(path))


def apply_overrides(data: dict, overrides: list[str] | None) -> dict:
    """A copy of a recipe mapping with `key=value` overrides set."""
    data = copy.deepcopy(data)
    for text in overrides or []:
        key, value = parse_override(text)
        set_dotted(data, key, value)
    return data


def recipe_from_dict(data: dict, overrides: list[str] | None = None, source: str = "recipe") -> RecipeBase:
    """Validate a recipe mapping (after `key=value` overrides) as the recipe of its task."""
    data = apply_overrides(data, overrides)
    # SECTION=null on the command line removes a section (e.g. an encoder's train: from a linear recipe).
    data = {k: v for k, v in data.items() if v is not None}
    try:
        return RECIPE.validate_python(data)
    except ValidationError as exc:
        raise _format_errors(exc, source) from None


def with_params(recipe: RecipeBase, params: dict[str, Any]) -> RecipeBase:
    """A copy of `recipe` with dotted keys set (used by sweeps); validated again."""
    data = recipe.model_dump()
    data.pop("sweep", None)
    for key, value in params.items():
        set_dotted(data, key, value)
    return recipe_from_dict(data, source=f"trial {params}")


def dump_recipe(recipe: RecipeBase, path: Path) -> None:
    """Save the resolved config (every default filled in) beside a run's outputs."""
    path.write_text(
        yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
