"""Training: one flow per recipe `task:`, all run by the same skeleton (`flow.run_flow`)."""

from __future__ import annotations

import importlib
from pathlib import Path

from toolkit.config import Recipe, load_recipe
from toolkit.errors import ToolkitError
from toolkit.rundir import METRICS_FILE, run_dir_for
from toolkit.tasks.flow import Flow, RunResult, plan_flow, run_flow

# task -> (module, Flow class); modules are imported on demand.
FLOWS = {
    "token_classification": ("toolkit.tasks.token_classification", "TokenClassification"),
    "segment_classification": ("toolkit.tasks.segment_classification", "SegmentClassification"),
    "span_generation": ("toolkit.tasks.span_generation", "SpanGeneration"),
    "pretrain_mlm": ("toolkit.tasks.pretrain", "Pretraining"),
    "pretrain_clm": ("toolkit.tasks.pretrain", "Pretraining"),
}


def flow_for(task: str) -> Flow:
    if task not in FLOWS:
        raise ToolkitError(f"task {task!r} is not implemented", fix=f"use task: one of {', '.join(FLOWS)}")
    module, name = FLOWS[task]
    return getattr(importlib.import_module(module), name)()


def _is_linear(recipe: Recipe) -> bool:
    """The segment task's bag-of-words baseline (`model.name: linear`) trains without a Trainer."""
    return recipe.task == "segment_classification" and recipe.model.name == "linear"


def run_recipe(recipe: Recipe, run_dir: Path) -> RunResult | None:
    """Train, save and score one run of a recipe (None on processes other than rank 0)."""
    if _is_linear(recipe):
        from toolkit.tasks.segment_linear import run_linear

        return run_linear(recipe, run_dir)
    return run_flow(flow_for(recipe.task), recipe, run_dir)


def plan_recipe(recipe: Recipe) -> dict:
    """What --dry-run shows: the data and model prepared, nothing trained."""
    if _is_linear(recipe):
        from toolkit.tasks.segment_linear import plan_linear

        return plan_linear(recipe)
    return plan_flow(flow_for(recipe.task), recipe)


def ensure_run(ref: str | Path) -> Path:
    """A run directory, or a recipe's run directory (trained first when it has no finished run)."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml"):
        from toolkit.recipes import resolve_recipe

        recipe = load_recipe(resolve_recipe(path))
        if recipe.sweep is not None:
            raise ToolkitError(f"{ref} is a sweep", fix="compare the run directory of one trial (RUN/trials/trial-NNN)")
        run_dir = run_dir_for(recipe)
        if not (run_dir / METRICS_FILE).is_file():
            run_recipe(recipe, run_dir)
        return run_dir
    if not path.is_dir():
        raise ToolkitError(f"{ref}: neither a run directory nor a recipe", fix="pass runs/<name> or recipes/<name>.yaml")
    return path
