"""Training: one flow per recipe `task:` (its `Task` in `toolkit.registry` names it), all run by the
same skeleton (`flow.run_flow`)."""

from __future__ import annotations

from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.registry import RecipeBase, task_of
from toolkit.registry.recipe_loader import load_recipe
from toolkit.rundir import METRICS_FILE, run_dir_for
from toolkit.tasks.flow import Flow, RunResult


def flow_for(recipe: RecipeBase) -> Flow:
    """The training flow of a recipe's task (its module imported on demand)."""
    return task_of(recipe).flow_class()()


def run_recipe(recipe: RecipeBase, run_dir: Path) -> RunResult | None:
    """Train, save and score one run of a recipe (None on processes other than rank 0)."""
    return flow_for(recipe).run(recipe, run_dir)


def plan_recipe(recipe: RecipeBase, estimate_cost: bool = True) -> dict:
    """What --dry-run shows: the data and model prepared, nothing trained; where the flow can, the run's cost on
    this machine, timed for a few steps (`estimate_cost`)."""
    flow = flow_for(recipe)
    return flow.plan(recipe, estimate_cost=True) if estimate_cost and flow.estimates_cost else flow.plan(recipe)


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
        raise ToolkitError(
            f"{ref}: neither a run directory nor a recipe", fix="pass runs/<name> or recipes/<name>.yaml"
        )
    return path
