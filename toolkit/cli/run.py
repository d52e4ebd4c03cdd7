"""`toolkit run`: train a recipe (one run, or a sweep) and print its dev scores."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from toolkit.cli.common import console, err_console


def run(
    recipe: Annotated[
        str, typer.Argument(help="Recipe YAML, or the name of a packaged recipe (`toolkit recipes` lists them).")
    ],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value overrides, e.g. train.learning_rate=2e-5")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate the recipe and data, show the plan, train nothing.")
    ] = False,
    estimate: Annotated[
        bool,
        typer.Option(
            help="With --dry-run: time a few training and scoring steps and estimate the run's wall time here "
            "(segment recipes; a few seconds to a minute).",
        ),
    ] = True,
    overwrite: Annotated[bool, typer.Option(help="Replace a finished run of the same name.")] = False,
    linear_baseline: Annotated[
        bool,
        typer.Option(
            "--linear-baseline",
            help="Fit a segment recipe's bag-of-words baseline instead (same data and scoring; run name + _linear).",
        ),
    ] = False,
) -> None:
    """Run a recipe: one training run, or a sweep when the recipe has a `sweep:` block."""
    from toolkit.recipes import resolve_recipe
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import prepare_run_dir, run_dir_for
    from toolkit.tasks import flow_for, plan_recipe, run_recipe
    from toolkit.tasks.training import finish_distributed

    cfg = load_recipe(resolve_recipe(recipe), overrides or [], linear_baseline=linear_baseline)
    if cfg.sweep is not None:
        from toolkit.tasks.sweep import plan_sweep, run_sweep, sweep_table

        if dry_run:
            print(json.dumps(plan_sweep(cfg), indent=2, default=str))
            return
        summary = run_sweep(cfg, overwrite=overwrite)
        finish_distributed()
        if summary is not None:
            console.print(sweep_table(summary))
        return
    if dry_run:
        print_plan(plan_recipe(cfg, estimate_cost=estimate))
        return
    run_dir = run_dir_for(cfg)
    prepare_run_dir(run_dir, overwrite)
    result = run_recipe(cfg, run_dir)
    finish_distributed()  # torchrun: every rank waits for rank 0's scores, then the process group closes
    if result is None:
        import os

        console.print(
            f"rank {os.environ.get('RANK')}/{os.environ.get('WORLD_SIZE')}: finished; rank 0 writes {run_dir}"
        )
        return
    console.print(flow_for(cfg).summary(cfg, result))
    run_info = result.run
    # The linear segment baseline reports neither tokens/s nor memory: it has no Trainer.
    figures = [f"train {run_info['train_seconds']} s"]
    figures += [f"{run_info['train_tokens_per_second']} tokens/s"] if "train_tokens_per_second" in run_info else []
    figures += [f"peak RSS {run_info['peak_rss_mib']} MiB"] if "peak_rss_mib" in run_info else []
    console.print(", ".join(figures))
    if "too_few_to_tune" in run_info:
        err_console.print(f"warning: {run_info['too_few_to_tune']}", soft_wrap=True, markup=False)
    if "combination_note" in run_info:  # segments.combination=fitted: what fine-tuning added, said plainly
        console.print(f"combination: {run_info['combination_note']}", soft_wrap=True, markup=False)


def print_plan(plan: dict) -> None:
    """--dry-run: the plan on stdout (JSON); on stderr, the segment task's cost estimate, evidence and warnings."""
    print(json.dumps(plan, indent=2))
    if "cost_estimate" in plan:
        cost = plan["cost_estimate"]
        low, expected, high = (round(cost["seconds"][k] / 60, 1) for k in ("low", "expected", "high"))
        epochs = cost["epochs"]
        err_console.print(
            f"estimate: {expected} minutes expected, {low}-{high} at the extremes, on {cost['cpu']} in "
            f"{cost['precision']} ({epochs['expected']:g} epochs expected, {epochs['low']:g}-{epochs['high']:g} at "
            f"the extremes; {cost['low_and_high']})",
            soft_wrap=True,
            markup=False,
        )
    if "evidence_strategy" in plan:  # the segment task: where its thresholds are chosen, and why
        strategy = plan["evidence_strategy"]
        err_console.print(f"evidence: {strategy['name']}: {strategy['why']}", soft_wrap=True, markup=False)
    if "too_few_to_tune" in plan:
        err_console.print(f"warning: {plan['too_few_to_tune']}", soft_wrap=True, markup=False)
