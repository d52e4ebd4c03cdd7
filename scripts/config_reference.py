"""Write docs/reference/config.md from the recipe models themselves (toolkit/registry, its recipe_sections.py)
and the service's settings (toolkit/deploy/settings.py): every section and key of every task, with its type,
default, allowed values and description, so the reference cannot drift from what `toolkit run` accepts.

    python scripts/config_reference.py          # rewrite the page
    python scripts/config_reference.py --check  # exit 1 when the page differs (a fast test runs this)

Written here rather than with a pydantic-to-docs plugin: the recipes are a union discriminated on
`task:` (and `model.kind`), and each task narrows shared sections (TaggerTrainConfig, ...), which a
JSON-schema dump would flatten into one tree with `anyOf`s a reader cannot map back to a recipe.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "config.md"
sys.path.insert(0, str(ROOT))

from toolkit.deploy.settings import ServeSettings  # noqa: E402
from toolkit.registry import TASKS  # noqa: E402

Row = tuple[str, str, str, str, str]  # key, type, default, allowed, description


def _sections(annotation: typing.Any, path: str = "") -> list[tuple[type[BaseModel], str]]:
    """The pydantic models a field's annotation holds (a section, an optional one, a list or mapping of
    them), each with how its keys are written under the field: "." , "[]." or ".<key>."."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, path + ".")]
    origin = typing.get_origin(annotation)
    step = {list: "[]", dict: ".<key>"}.get(origin, "")
    args = typing.get_args(annotation)[1:] if origin is dict else typing.get_args(annotation)
    return [found for arg in args for found in _sections(arg, path + step)]


def type_name(annotation: typing.Any) -> str:
    """How a reader writes the value in YAML: int, float, list[str], one of the literals, ..."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "string" if all(isinstance(a, str) for a in args) else " | ".join(map(repr, args))
    if origin in (typing.Union, types.UnionType):
        parts = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(parts)) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list[{', '.join(type_name(a) for a in args if a is not Ellipsis)}]"
    if origin is dict:
        return f"mapping {type_name(args[0])} -> {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if annotation is typing.Any:
        return "any"
    return {str: "string", int: "int", float: "float", bool: "bool", Path: "path"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def allowed(field: FieldInfo) -> str:
    """The literals a key takes, or its numeric bounds."""
    literals = [
        a
        for arg in (field.annotation, *typing.get_args(field.annotation))
        if typing.get_origin(arg) is typing.Literal
        for a in typing.get_args(arg)
    ]
    bounds = []
    for m in field.metadata:
        for kind, attr, sign in ((Ge, "ge", ">="), (Gt, "gt", ">"), (Le, "le", "<="), (Lt, "lt", "<")):
            if isinstance(m, kind):
                bounds.append(f"{sign} {getattr(m, attr)}")
    return ", ".join([f"`{a}`" for a in literals] + bounds)


def default(field: FieldInfo) -> str:
    """The default as YAML writes it."""
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if value is PydanticUndefined:
        return "required"
    return f"`{json.dumps(value)}`" if value is not None else "null"


def _describe(model: type[BaseModel], name: str, section: type[BaseModel] | None) -> str:
    """The key's description; a task that narrows a shared key (`task: Literal[...]`) keeps its base's."""
    inherited = (
        base.model_fields[name].description
        for base in model.__mro__
        if isinstance(base, type) and issubclass(base, BaseModel) and name in getattr(base, "model_fields", {})
    )
    text = next((d for d in inherited if d), None) or (section.__doc__ if section else None) or ""
    return " ".join(text.split()).replace("|", "\\|")


def rows(model: type[BaseModel], prefix: str = "") -> list[Row]:
    """One row per key of a model, sections first as their own row, then their keys (dotted)."""
    out: list[Row] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        sections = _sections(field.annotation)
        section, step = sections[0] if len(sections) == 1 else (None, "")
        out.append((key, type_name(field.annotation), default(field), allowed(field), _describe(model, name, section)))
        if section is not None:
            out.extend(rows(section, f"{key}{step}"))
    return out


def undocumented() -> list[str]:
    """Keys with no description of their own or of their section (what the test refuses)."""
    models = {f"task {key}": task.recipe for key, task in TASKS.items()} | {"ServeSettings": ServeSettings}
    return [f"{where}: {r[0]}" for where, model in models.items() for r in rows(model) if not r[4]]


def _table(table: list[Row]) -> list[str]:
    lines = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    lines += [f"| `{k}` | {t} | {d} | {a} | {desc} |" for k, t, d, a, desc in table]
    return lines


def render() -> str:
    """The whole page. Pure: the same models give the same text."""
    lines = [
        "# Config reference",
        "",
        "<!-- Generated by scripts/config_reference.py from the recipe models; do not edit by hand. -->",
        "",
        "A recipe is one YAML file: `task:` selects which sections it may hold, and every key below is checked "
        "(unknown keys, wrong types and out-of-range values are all reported at once, with their paths, before "
        "anything runs). Any key can be overridden on the command line: `toolkit run RECIPE train.epochs=2`.",
        "",
    ]
    for task in TASKS.values():
        title = f"`task: {task.name}`" + (f" with `model.kind: {task.variant}`" if task.variant else "")
        lines += [f"## {title}", "", task.summary[0].upper() + task.summary[1:] + ".", ""]
        lines += _table(rows(task.recipe)) + [""]
    lines += [
        "## Service settings",
        "",
        "`toolkit serve` and a bento read each setting from `TOOLKIT_<NAME>` (`TOOLKIT_MAX_TEXTS=16`); "
        "see the [deploying guide](../guides/deploy.md).",
        "",
        *_table(rows(ServeSettings)),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is not what the models give")
    args = parser.parse_args()
    page = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE.relative_to(ROOT)} differs from the recipe models: run python scripts/config_reference.py")
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
