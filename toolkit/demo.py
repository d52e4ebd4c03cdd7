"""The main job on the embedded sample (README Quick start).

1. `toolkit check` on both sample domains;
2. export/import round trips through every writable format, with what each keeps;
3. `toolkit run recipes/demo_mlm.yaml`: fine-tune the default MiniLM encoder to tag
   contract clauses, and print its dev scores;
4. `toolkit run recipes/demo_clm.yaml`: fine-tune SmolLM2-135M with LoRA to generate the
   same clauses, and print its dev scores;
5. `toolkit compare` of the two on the same dev documents (their saved predictions);
6. `toolkit export` of the MLM run (the fastest path within the parity budget), then the
   BentoML service over it: start, one request, the extracted spans, stop.

The budgets are sized for a first look (under 5 minutes on 2 CPU cores); the README says what
longer runs give. Overrides: `mlm.KEY=VALUE` / `clm.KEY=VALUE` go to one recipe, plain
`KEY=VALUE` to both.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolkit.data.check import render_check, run_check
from toolkit.data.importers import EXPORT_FORMATS, run_export, run_import
from toolkit.data.sample import SAMPLE_FILES
from toolkit.data.schema import SpanRecord
from toolkit.hardware import measure_conditions
from toolkit.models.pretrained import default_encoder, load_tokenizer
from toolkit.recipes import RECIPES_DIR  # shipped in the package: the demo runs from a wheel too
from toolkit.scoring_defaults import SCORING


def span_keys(rec: SpanRecord, ignore_whitespace: bool) -> Counter:
    """Multiset of (label, covered text) — whitespace removed for formats that rebuild the text."""

    def covered(s):
        t = rec.text[s.start : s.end]
        return "".join(t.split()) if ignore_whitespace else (s.start, s.end, t)

    return Counter((s.label, covered(s)) for s in rec.spans)


def round_trip(records: list[SpanRecord], fmt: str, workdir: Path) -> dict:
    """Export then re-import; count spans kept, reported as not representable, and lost without a report."""
    target = workdir / (f"{fmt}_out" if fmt == "brat" else f"sample.{fmt}")
    if target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    export_log = run_export(fmt, records, target)
    # BRAT types cannot hold spaces: the exporter writes '_' and says so; map back.
    label_map = {s.label.replace(" ", "_"): s.label for r in records for s in r.spans} if fmt == "brat" else None
    back, import_log = run_import(fmt, [target], None, label_map=label_map)
    by_id = {r.id: r for r in back}
    rebuilt_text = fmt == "conll"  # CoNLL keeps tokens, not the original whitespace
    kept = lost = 0
    for rec in records:
        want = span_keys(rec, rebuilt_text)
        got = span_keys(by_id[rec.id], rebuilt_text) if rec.id in by_id else Counter()
        kept += sum((want & got).values())
        lost += sum((want - got).values())
    reported = export_log.spans_dropped
    return {
        "format": fmt,
        "spans": sum(len(r.spans) for r in records),
        "kept": kept,
        "reported_not_representable": reported,
        "unreported_loss": lost - reported,
        "warnings": len(export_log.problems) + len(import_log.problems),
    }


def split_overrides(overrides: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"mlm": [], "clm": []}
    for o in overrides:
        track, dot, rest = o.partition(".")
        if dot and track in out:
            out[track].append(rest)
        else:
            out["mlm"].append(o)
            out["clm"].append(o)
    return out


def train_demo(recipe_name: str, workdir: Path, console: Console, overrides: list[str]) -> Path:
    from toolkit.evaluate.reporting import score_table
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.rundir import prepare_run_dir
    from toolkit.tasks import run_recipe

    recipe = load_recipe(RECIPES_DIR / f"{recipe_name}.yaml", [f"output_dir={workdir}", *overrides])
    run_dir = workdir / recipe.name
    console.rule(f"[bold]Training {recipe.name} ({recipe.task}): {recipe.model.name} on {recipe.data.train}")
    prepare_run_dir(run_dir, overwrite=True)
    result = run_recipe(recipe, run_dir)
    docs = (
        f"the first {recipe.data.max_dev_docs} documents of {recipe.data.dev}"
        if recipe.data.max_dev_docs
        else recipe.data.dev
    )
    console.print(score_table(f"{recipe.name} on {docs} (short demo budgets: README, Quick start)", result.metrics))
    info = result.run
    console.print(
        f"Training: {info['train_seconds']} s, {info['train_tokens_per_second']} tokens/s, peak RSS "
        f"{info['peak_rss_mib']} MiB. Run directory: {run_dir}"
    )
    return run_dir


def compare_demo(runs: list[Path], workdir: Path, console: Console) -> None:
    from toolkit.evaluate.compare import compare, terminal_table
    from toolkit.rundir import open_run

    console.rule("[bold]MLM vs CLM on the same dev documents")
    # On the dev documents the runs were scored on, whose saved predictions are reused rather than
    # predicted again.
    dev = open_run(runs[0]).recipe.data
    summary = compare(
        runs, dev.dev, workdir / "compare", bootstrap=SCORING.bootstrap, max_docs=dev.max_dev_docs, reuse=True
    )
    keep = [
        "span_recall",
        "boundary_start_recall",
        "boundary_end_recall",
        "boundary_both_recall",
        "jaccard_recall",
        "span_precision",
        "hallucination_rate",
    ]
    table = terminal_table(summary, list(SCORING.boundary_tolerance), keep)
    console.print(table)
    for pair, metrics in summary["paired_bootstrap"].items():
        v = metrics["boundary_both_recall"]
        console.print(
            f"{pair}: boundary recall (both) difference {v['difference']:+.3f}, 95% CI {v['ci95'][0]:+.3f} to "
            f"{v['ci95'][1]:+.3f}, p = {v['p_value']:.3f}"
        )
    console.print(
        f"Written: {workdir / 'compare'}/compare.md, compare.csv, compare.json, recall_by_length.png, pr_curve.png"
    )


DEMO_REQUEST = (
    "This Agreement shall be governed by the laws of the State of Delaware. Either party may terminate "
    "this Agreement upon sixty (60) days written notice to the other party."
)


def serve_demo(run: Path, workdir: Path, console: Console) -> None:
    import json

    from toolkit.deploy.export import export_run
    from toolkit.deploy.launch import Server, free_port

    console.rule("[bold]Export (the fastest path within budget here), serve with BentoML")
    artifact = workdir / "artifacts" / run.name
    manifest = export_run(run, artifact, overwrite=True)
    p = manifest["parity"]
    measured = ", ".join(
        f"{name} {p[name]['span_f1']:.3f} ({f['docs_per_second']} docs/s)"
        for name, f in manifest["paths"].items()
        if "skipped" not in f
    )
    console.print(f"Span F1 on {p['documents']} dev documents: PyTorch fp32 {p['pytorch_span_f1']:.3f}; {measured}")
    console.print(f"Exported {artifact}: {manifest['path']}")
    if manifest["conditions"]["warning"]:
        console.print(f"[yellow]warning:[/yellow] {escape(manifest['conditions']['warning'])}")
    with Server(artifact, port=free_port(), log=workdir / "serve.log") as server:
        console.print(f"Service ready at {server.url} (log: {workdir / 'serve.log'})")
        console.print(f"POST /extract {json.dumps({'text': DEMO_REQUEST})}")
        status, body = server.post("/extract", {"text": DEMO_REQUEST})
        console.print(f"-> {status}")
        console.print_json(json.dumps(body))
    console.print("Service stopped.")


def run_demo(workdir: Path, console: Console, overrides: list[str] | None = None) -> int:
    started = time.perf_counter()
    stages: dict[str, float] = {}

    def lap(stage: str) -> None:
        stages[stage] = time.perf_counter() - started - sum(stages.values())

    workdir.mkdir(parents=True, exist_ok=True)
    # The stage times printed at the end are only this machine's if nothing else is using its cores.
    conditions = measure_conditions()
    if conditions["warning"]:
        console.print(f"[yellow]warning:[/yellow] {escape(conditions['warning'])}")
    tokenizer = load_tokenizer(default_encoder())
    status = 0
    for domain, paths in SAMPLE_FILES.items():
        console.rule(f"[bold]Sample: {domain}")
        result = run_check(list(paths), tokenizer=tokenizer)
        render_check(result, console, max_problems=20)
        status |= result.exit_code()
    table = Table(
        "sample",
        "format",
        "spans",
        "kept",
        "not representable\n(reported)",
        "lost\nunreported",
        title="Round trips: JSONL -> format -> JSONL",
    )
    for domain, paths in SAMPLE_FILES.items():
        records, _ = run_import("jsonl", [paths[0]], None)
        for fmt in EXPORT_FORMATS:
            r = round_trip(records, fmt, workdir / domain)
            table.add_row(
                domain,
                fmt,
                str(r["spans"]),
                str(r["kept"]),
                str(r["reported_not_representable"]),
                str(r["unreported_loss"]),
            )
            if r["unreported_loss"]:
                status = 1
    console.print(table)
    lap("check and round trips")
    per_track = split_overrides(overrides or [])
    runs = [train_demo("demo_mlm", workdir, console, per_track["mlm"])]
    lap("demo_mlm")
    runs.append(train_demo("demo_clm", workdir, console, per_track["clm"]))
    lap("demo_clm")
    compare_demo(runs, workdir, console)
    lap("compare")
    serve_demo(runs[0], workdir, console)
    lap("export and serve")
    console.print(f"Outputs under {workdir}")
    console.print(
        f"Demo finished in {sum(stages.values()):.0f} s: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in stages.items())
    )
    if conditions["warning"]:
        console.print(
            "[yellow]These times were measured while other processes used the cores (warning at the start).[/yellow]"
        )
    return status
