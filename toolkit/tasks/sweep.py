"""Sweeps: a grid or an Optuna search over dotted config keys, one run directory per trial,
then a summary table (CSV + Markdown) and a heatmap of the dev metric with each trial's time cost."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

from toolkit.registry import RecipeBase
from toolkit.registry.recipe_loader import dump_recipe, with_params
from toolkit.registry.recipe_sections import FloatRange
from toolkit.rundir import CONFIG_FILE, prepare_run_dir, read_metrics
from toolkit.tasks import run_recipe
from toolkit.tasks.training import is_main_process


def _trial_recipe(recipe: RecipeBase, params: dict[str, Any], index: int, base: Path) -> RecipeBase:
    trial = with_params(recipe, params)
    return trial.model_copy(update={"name": f"trial-{index:03d}", "output_dir": str(base / "trials")})


def _run_trial(
    recipe: RecipeBase, params: dict[str, Any], index: int, base: Path, metric: str, overwrite: bool
) -> dict | None:
    trial = _trial_recipe(recipe, params, index, base)
    run_dir = Path(trial.output_dir) / trial.name
    saved = read_metrics(run_dir)
    if saved is not None and not overwrite:  # a resumed sweep keeps finished trials
        result = saved.model_dump(exclude_unset=True)
    else:
        prepare_run_dir(run_dir, overwrite)
        finished = run_recipe(trial, run_dir)
        if finished is None:  # not rank 0
            return None
        result = finished.metrics
    return {
        "trial": trial.name,
        **params,
        metric: result["summary"][metric],
        "ci95": result.get("ci95", {}).get(metric),
        "train_seconds": result["run"]["train_seconds"],
        "run_dir": str(run_dir),
    }


def grid_points(params: dict[str, list]) -> list[dict[str, Any]]:
    keys = list(params)
    return [dict(zip(keys, values)) for values in itertools.product(*(params[k] for k in keys))]


def plan_sweep(recipe: RecipeBase) -> dict:
    """The trials a sweep would run (`toolkit run --dry-run`); every grid trial's config is validated now."""
    sweep = recipe.sweep
    assert sweep is not None
    base = Path(recipe.output_dir) / recipe.name
    points = (
        grid_points(sweep.params)
        if sweep.method == "grid"
        else [f"{sweep.n_trials} Optuna trials over {sorted(sweep.params)}"]
    )
    for i, p in enumerate(points if sweep.method == "grid" else []):
        _trial_recipe(recipe, p, i, base)
    return {"method": sweep.method, "trials": points}


def run_sweep(recipe: RecipeBase, overwrite: bool = False) -> dict | None:
    """Run every trial (finished ones are kept) and write the summary; returns sweep.json's content
    (None on ranks other than 0)."""
    sweep = recipe.sweep
    assert sweep is not None
    base = Path(recipe.output_dir) / recipe.name
    main = is_main_process()
    if main:
        base.mkdir(parents=True, exist_ok=True)
        dump_recipe(recipe, base / CONFIG_FILE)
    rows: list[dict] = []
    if sweep.method == "grid":
        for i, params in enumerate(grid_points(sweep.params)):
            row = _run_trial(recipe, params, i, base, sweep.metric, overwrite)
            if row:
                rows.append(row)
    else:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=recipe.seed))

        def objective(trial: optuna.Trial) -> float:
            params = {}
            for key, space in sweep.params.items():
                if isinstance(space, FloatRange):
                    params[key] = trial.suggest_float(key, space.low, space.high, log=space.log)
                else:
                    params[key] = trial.suggest_categorical(key, space)
            row = _run_trial(recipe, params, trial.number, base, sweep.metric, overwrite)
            if row is None:
                return 0.0
            rows.append(row)
            return row[sweep.metric]

        study.optimize(objective, n_trials=sweep.n_trials)
    if not main:
        return None
    return write_summary(rows, list(sweep.params), sweep.metric, base)


def write_summary(rows: list[dict], keys: list[str], metric: str, base: Path) -> dict:
    """summary.csv, summary.md, sweep.json and heatmap.png; returns what sweep.json holds."""
    best = max(rows, key=lambda r: r[metric])
    fastest = min(r["train_seconds"] for r in rows) or 1.0
    columns = ["trial", *keys, metric, "ci95", "train_seconds", "time_vs_fastest", "best"]
    for r in rows:
        r["time_vs_fastest"] = round(r["train_seconds"] / fastest, 2)
        r["best"] = "*" if r is best else ""
    with (base / "summary.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        ci = r["ci95"]
        cells = [
            str(r["trial"]),
            *[str(r[k]) for k in keys],
            f"{r[metric]:.4f}",
            f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "",
            f"{r['train_seconds']:.0f}",
            f"{r['time_vs_fastest']:.2f}x",
            r["best"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    (base / "summary.md").write_text(
        f"# Sweep: dev {metric}\n\nBest: {best['trial']} ({best[metric]:.4f}).\n\n{table}\n", encoding="utf-8"
    )
    summary = {"metric": metric, "params": keys, "trials": rows, "best": best["trial"], "directory": str(base)}
    (base / "sweep.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    plot_heatmap(rows, keys, metric, base / "heatmap.png")
    return summary


def sweep_table(summary: dict):
    """The trials side by side for a terminal: trials as columns, parameters and figures as rows."""
    from toolkit.tables import SystemsTable

    metric = summary["metric"]
    rows = [*summary["params"], f"dev {metric}", "95% CI", "train seconds", "time vs fastest"]
    trials = {}
    for r in summary["trials"]:
        ci = r["ci95"]
        name = f"{r['trial']} (best)" if r["trial"] == summary["best"] else r["trial"]
        trials[name] = [
            *(f"{r[k]:g}" if isinstance(r[k], float) else str(r[k]) for k in summary["params"]),
            f"{r[metric]:.4f}",
            f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "",
            f"{r['train_seconds']:.0f}",
            f"{r['time_vs_fastest']:.2f}x",
        ]
    notes = [f"written: {summary['directory']}/summary.md, summary.csv, sweep.json, heatmap.png"]
    return SystemsTable(f"sweep: dev {metric} per trial", rows, trials, first_header="trial", notes=notes)


def plot_heatmap(rows: list[dict], keys: list[str], metric: str, path: Path) -> None:
    """Dev metric over the first two swept keys (best over any others), each cell with its training time; best trial
    outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    x_key = keys[0]
    y_key = keys[1] if len(keys) > 1 else None
    xs = sorted({r[x_key] for r in rows}, key=lambda v: (v is None, v))
    ys = sorted({r[y_key] for r in rows}, key=lambda v: (v is None, v)) if y_key else [None]
    cells: dict[tuple, dict] = {}
    for r in rows:
        key = (r[x_key], r[y_key] if y_key else None)
        if key not in cells or r[metric] > cells[key][metric]:
            cells[key] = r
    import numpy as np

    grid = np.full((len(ys), len(xs)), np.nan)
    for (x, y), r in cells.items():
        grid[ys.index(y), xs.index(x)] = r[metric]
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(xs), 1.4 + 1.1 * len(ys)))
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label=f"dev {metric}")
    best = max(rows, key=lambda r: r[metric])
    for (x, y), r in cells.items():
        i, j = ys.index(y), xs.index(x)
        ax.text(
            j, i, f"{r[metric]:.3f}\n{r['train_seconds']:.0f} s", ha="center", va="center", color="white", fontsize=9
        )
        if r is best:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=3))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key or "")
    extra = f" (best over {', '.join(keys[2:])})" if len(keys) > 2 else ""
    ax.set_title(f"dev {metric}, training time per cell{extra}; best outlined")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
