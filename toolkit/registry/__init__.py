"""The one place that knows each task (spaCy's registries are the model).

A task is one module here, holding its recipe (the sections it accepts) and its `Task` (flow,
predictor, and what export, the model card and compare need to know of it), plus one line in
`TASKS` below. A recipe is read as the union of the tasks' recipes, discriminated on `task:` (and on
`model.kind` for the linear baseline), so an option of another task is refused, with its key path,
before anything runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag, TypeAdapter

from toolkit.errors import ToolkitError
from toolkit.registry import (
    linear_model,
    pretraining,
    segment_classification,
    span_generation,
    token_classification,
)
from toolkit.registry.saved import ModelMeta
from toolkit.registry.task import RecipeBase, Task

TASKS: dict[str, Task] = {
    t.key: t
    for t in (
        token_classification.TASK,
        segment_classification.TASK,
        linear_model.TASK,
        span_generation.TASK,
        pretraining.MLM,
        pretraining.CLM,
    )
}
TASK_NAMES = tuple(dict.fromkeys(t.name for t in TASKS.values()))
_BY_RECIPE = {t.recipe: t for t in TASKS.values()}


def recipe_key(data: Any) -> str | None:
    """The registry key a recipe (a mapping, or a validated recipe) belongs to; None for an unknown task."""
    if isinstance(data, RecipeBase):
        return _BY_RECIPE[type(data)].key
    if not isinstance(data, dict):
        return None
    model = data.get("model")
    kind = model.get("kind") if isinstance(model, dict) else None
    key = f"{data.get('task')}/{kind}"
    if key in TASKS:
        return key
    return data.get("task") if data.get("task") in TASKS else None


Recipe = Annotated[
    Union[tuple(Annotated[t.recipe, Tag(t.key)] for t in TASKS.values())],  # noqa: UP007 - built from the registry
    Discriminator(
        recipe_key,
        custom_error_type="unknown_task",
        custom_error_message=f"task must be one of {', '.join(TASK_NAMES)}",
    ),
]
RECIPE = TypeAdapter(Recipe)


def task_of(recipe: RecipeBase) -> Task:
    """The Task of a validated recipe."""
    return _BY_RECIPE[type(recipe)]


def task_named(name: str, variant: str | None = None) -> Task:
    """The Task a saved model names (toolkit.json "task" and "classifier")."""
    key = f"{name}/{variant}" if variant else name
    if key not in TASKS:
        raise ToolkitError(
            f"task {key!r} is not known to this version of the toolkit", fix=f"use one of {', '.join(TASKS)}"
        )
    return TASKS[key]


def meta_class(data: dict) -> type[ModelMeta]:
    """The ModelMeta class of a toolkit.json mapping: its task's (models saved before "task" existed were
    taggers)."""
    return task_named(data.get("task", ModelMeta.model_fields["task"].default), data.get("classifier")).meta


def flow_modules() -> set[str]:
    """Every module that holds a training flow (reached through a Task, never imported directly)."""
    return {t.flow.partition(":")[0] for t in TASKS.values()}
