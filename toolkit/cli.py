"""The `toolkit` command line. User errors print without a traceback and exit 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolkit.deploy.batcher import MAX_BATCH_DOCS
from toolkit.errors import ToolkitError
from toolkit.scoring import SCORING

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Fine-tune encoders and decoders to extract clauses and entities: check data, import/export, train, serve.",
)
console = Console()
err_console = Console(stderr=True)


def _span_files(refs: list[str]) -> list[Path]:
    """Paths as given, and sample:NAME as the embedded sample's file (a missing one is an error with the names)."""
    from toolkit.data.records import SAMPLE_PREFIX, resolve_data_path

    return [resolve_data_path(r) if r.startswith(SAMPLE_PREFIX) else Path(r) for r in refs]


@app.command()
def check(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Span JSONL files, or sample:NAME (e.g. train.jsonl dev.jsonl: leakage between them is checked)."
        ),
    ],
    labels: Annotated[str | None, typer.Option(help="Allowed labels: 'A,B,C' or a file with one label a line.")] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Fast tokenizer (hub id or path) for token statistics. Default: the default encoder."),
    ] = None,
    no_tokenizer: Annotated[bool, typer.Option("--no-tokenizer", help="Skip token statistics.")] = False,
    max_length: Annotated[
        int | None, typer.Option(help="Model max length in tokens (default: the tokenizer's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (every problem included).")] = False,
    strict: Annotated[bool, typer.Option(help="Exit 1 on warnings too.")] = False,
    max_problems: Annotated[int, typer.Option(help="Problems listed in the text report.")] = 100,
) -> None:
    """Validate span files and describe them. Exit 0 when clean, 1 when problems are found."""
    from toolkit.data.check import render_check, run_check
    from toolkit.data.label_sets import parse_label_set
    from toolkit.pretrained import default_encoder

    tok = None if no_tokenizer else (tokenizer or default_encoder())
    result = run_check(_span_files(files), parse_label_set(labels), tok, max_length)
    if as_json:
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
    else:
        render_check(result, console, max_problems)
    raise typer.Exit(result.exit_code(strict))


def _print_log(log, out: Path | None, as_json: bool) -> None:
    summary = log.summary()
    if as_json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    console.print(
        f"{summary['format']}: {summary['documents']} documents, {summary['spans']} spans written"
        + (f" to {out}" if out else "")
        + f"; left out: {summary['documents_dropped']} documents, {summary['spans_dropped']} spans."
    )
    for what, n in summary["ignored"].items():
        console.print(f"Not imported (outside the span model): {n} {what}")
    by_kind = summary["problems"]["by_kind"]
    if by_kind:
        table = Table("kind", "count", "first example", title="Reported")
        for kind, n in by_kind.items():
            first = next(p for p in log.problems if p.kind == kind)
            table.add_row(kind, str(n), escape(first.render()[:160]))
        console.print(table)


@app.command("import")
def import_(
    fmt: Annotated[
        str, typer.Argument(metavar="FORMAT", help="conll | brat | pubtator | cuad | labelstudio | docbin | jsonl")
    ],
    sources: Annotated[
        list[Path],
        typer.Argument(help="Source files or directories (cuad: master_clauses.csv then the .txt directory)."),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output span JSONL.")],
    scheme: Annotated[str | None, typer.Option(help="conll: auto | iob1 | iob2 | bioes | bilou.")] = None,
    discontinuous: Annotated[
        str | None, typer.Option(help="brat: report (leave out, listed) | split (one span per fragment).")
    ] = None,
    text_key: Annotated[str | None, typer.Option(help="labelstudio: the task data field holding the text.")] = None,
    spans_key: Annotated[str | None, typer.Option(help="docbin: read only doc.spans[KEY] (and doc.ents).")] = None,
    predictions: Annotated[
        bool,
        typer.Option("--predictions", help="labelstudio: read model predictions (pre-annotations), not annotations."),
    ] = False,
    map_label: Annotated[list[str] | None, typer.Option(help="OLD=NEW, repeatable; OLD= drops the label.")] = None,
    holdout: Annotated[
        list[Path] | None, typer.Option(help="Files of another split: documents also there are left out (leakage).")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the full import report (every problem) as JSON.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit 1 when anything was left out or reported.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Convert annotations to span JSONL. Everything left out is counted and listed."""
    from toolkit.data.importers import parse_label_map, run_import

    options = {
        "scheme": scheme,
        "discontinuous": discontinuous,
        "text_key": text_key,
        "spans_key": spans_key,
        "predictions": predictions,
    }
    _, log = run_import(fmt, sources, out, options, parse_label_map(map_label or []), holdout)
    if report:
        report.write_text(json.dumps(log.summary(), indent=2, ensure_ascii=False), encoding="utf-8")
    _print_log(log, out, as_json)
    errors = sum(p.severity == "error" for p in log.problems)
    raise typer.Exit(1 if errors or (strict and log.problems) else 0)


@app.command("export-data")
def export_data(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="conll | brat | pubtator | labelstudio | docbin")],
    files: Annotated[list[str], typer.Argument(help="Span JSONL files, or sample:NAME (the embedded sample).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output file (brat: a directory).")],
    scheme: Annotated[str | None, typer.Option(help="conll: iob1 | iob2 | bioes | bilou (default iob2).")] = None,
    spans_key: Annotated[str | None, typer.Option(help="docbin: the doc.spans key (default sc).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write span JSONL in another format; what the format cannot hold is reported."""
    from toolkit.data.importers import run_export, run_import

    records, read_log = run_import("jsonl", _span_files(files), None)
    if read_log.documents_dropped or read_log.spans_dropped:
        raise ToolkitError(
            f"{read_log.documents_dropped} records and {read_log.spans_dropped} spans of the input are invalid",
            fix=f"run `toolkit check {' '.join(map(str, files))}` and fix them first",
        )
    log = run_export(fmt, records, out, {"scheme": scheme, "spans_key": spans_key})
    _print_log(log, out, as_json)


@app.command()
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
    from toolkit.config import load_recipe
    from toolkit.recipes import resolve_recipe
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
        plan = plan_recipe(cfg)
        print(json.dumps(plan, indent=2))
        if "too_few_to_tune" in plan:
            err_console.print(f"warning: {plan['too_few_to_tune']}", soft_wrap=True, markup=False)
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


recipes_app = typer.Typer(
    help="The recipes shipped with the package: list them, or copy one to edit.", invoke_without_command=True
)
app.add_typer(recipes_app, name="recipes")


@recipes_app.callback()
def recipes_(ctx: typer.Context) -> None:
    """List the packaged recipes, one line each (`toolkit run NAME` runs one)."""
    if ctx.invoked_subcommand is not None:
        return
    from toolkit.recipes import describe_recipe, packaged_recipes

    table = Table("recipe", "what it trains", box=None, pad_edge=False)
    for name, path in packaged_recipes().items():
        table.add_row(name, describe_recipe(path))
    console.print(table)
    console.print("Run one with `toolkit run NAME`; copy one to edit with `toolkit recipes cp NAME DEST`.")


@recipes_app.command("cp")
def recipes_cp(
    name: Annotated[str, typer.Argument(help="A packaged recipe's name.")],
    dest: Annotated[Path, typer.Argument(help="File or directory to copy it to.")],
) -> None:
    """Copy a packaged recipe to edit it, then `toolkit run DEST`."""
    import shutil

    from toolkit.recipes import packaged_recipe

    source = packaged_recipe(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists():
        raise ToolkitError(f"{target} already exists", fix="choose another destination, or remove it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    console.print(f"copied {source.stem} to {target}")


@app.command("eval")
def eval_(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="Run directory made by `toolkit run`.")],
    data: Annotated[str, typer.Option(help="Span JSONL to score on (or sample:NAME).")],
    out: Annotated[Path | None, typer.Option(help="Output directory (default RUN/eval/<data name>).")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for 95% CIs (0: none).")] = SCORING.bootstrap,
    jaccard_threshold: Annotated[
        float | None,
        typer.Option(help="Word Jaccard for a match (default: the run's eval.jaccard_threshold).", min=0.01, max=1.0),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the headline metrics as one JSON line instead of tables.")
    ] = False,
) -> None:
    """Score a trained run on any span file with the toolkit's one scorer."""
    from toolkit.evaluate.evaluation import evaluate_run, summary_line
    from toolkit.evaluate.reporting import per_label_table, score_table

    metrics, where = evaluate_run(run_path, data, out, bootstrap, jaccard_threshold=jaccard_threshold)
    if as_json:
        print(summary_line(metrics))
        return
    console.print(score_table(f"{run_path.name} on {data}", metrics))
    console.print(per_label_table(metrics))
    console.print(f"wrote {where}/metrics.json, report.md, predictions.jsonl")


@app.command()
def predict(
    model: Annotated[
        Path, typer.Argument(metavar="MODEL", help="A run directory (`toolkit run`) or an artifact (`toolkit export`).")
    ],
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="INPUT...", help="Span JSONL (spans ignored), .txt, .pdf, .docx files, or folders of them."
        ),
    ],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="Output: span JSONL with the extracted text (or Label Studio JSON).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="spans | labelstudio (tasks with pre-annotations and their scores).")
    ] = "spans",
    batch_size: Annotated[
        int,
        typer.Option(help="Most documents per model call; a call also holds at most about this many windows of text."),
    ] = 16,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Run on Ray Data: local (start Ray here), auto (the cluster this machine is in) or ray://HEAD:10001.",
            metavar="ADDRESS",
        ),
    ] = None,
    ray_actors: Annotated[
        int | None, typer.Option(help="Model actors on Ray (default: as many as the cluster's CPUs allow).")
    ] = None,
    ray_cpus_per_actor: Annotated[int, typer.Option(help="CPUs (and threads) of each model actor on Ray.")] = 1,
) -> None:
    """Extract spans from a collection of documents. Streams to OUT; run it again to resume after a crash."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from toolkit.data.documents import display_name
    from toolkit.infer.collection import predict_collection

    columns = (TextColumn("predict"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("predict", total=None)
        summary = predict_collection(
            model,
            inputs,
            out,
            fmt,
            batch_size,
            ray,
            ray_actors,
            ray_cpus_per_actor,
            progress=lambda n, total: bar.update(task, total=total, advance=n),
        )
    # The summary goes to stdout; each problem with one document goes to stderr as one unwrapped line
    # (a path and its reason stay greppable whatever the terminal's width), so a pipe of stdout holds
    # only the summary and every failure stays visible on the console.
    console.print(
        f"{summary['predicted']} documents predicted in {summary['seconds']} s ({summary['documents_per_second']} "
        f"docs/s, {summary['engine']}); "
        f"{summary['already_done']} already in {display_name(summary['stream'])}; {summary['failed']} failed "
        f"({summary['entries']} entries in the inputs)",
        soft_wrap=True,
    )
    if summary["repaired_torn_line"]:
        err_console.print(
            f"removed a last line cut off mid-write in {summary['stream']} (its document was predicted again)",
            soft_wrap=True,
        )
    for source, pages in summary["pages_without_text"].items():
        err_console.print(
            f"{escape(display_name(source))}: no text layer on page(s) {', '.join(map(str, pages))}; those pages were "
            f"not read (OCR them to include them)",
            soft_wrap=True,
        )
    for failure in summary["failures"]:
        doc = f" [{failure['id']}]" if failure["id"] else ""
        err_console.print(
            f"[red]failed[/red] {escape(display_name(failure['source']))}{escape(display_name(doc))}: "
            f"{escape(display_name(failure['reason']))}. Fix: "
            f"{escape(failure['fix'])}",
            soft_wrap=True,
        )
    if summary["files_skipped"]:
        err_console.print(
            f"skipped {len(summary['files_skipped'])} entries (other types, hidden, or read already), e.g. "
            f"{escape(summary['files_skipped'][0])}",
            soft_wrap=True,
        )
    console.print(
        f"wrote {display_name(str(out))}"
        + (f" (failures: {display_name(summary['failures_file'])})" if summary["failed"] else ""),
        soft_wrap=True,
    )
    raise typer.Exit(1 if summary["failed"] else 0)


@app.command()
def review(
    predictions: Annotated[
        Path,
        typer.Argument(
            metavar="PREDICTIONS", help="Span JSONL from `toolkit predict`, or `predictions.jsonl` of a run or eval."
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="The HTML page to write.")],
    gold: Annotated[
        str | None,
        typer.Option(help="Gold span JSONL (or sample:NAME): colour misses, false positives and boundary errors."),
    ] = None,
    map_label: Annotated[
        list[str] | None, typer.Option(help="OLD=NEW for gold labels, repeatable (a run's data.label_map).")
    ] = None,
) -> None:
    """Render documents with highlighted spans as one self-contained HTML page."""
    from toolkit.data.importers import parse_label_map
    from toolkit.evaluate.review import write_review

    summary = write_review(predictions, out, gold, parse_label_map(map_label or []))
    console.print(
        f"wrote {summary['out']} ({summary['documents']} documents){'; ' + summary['note'] if summary['note'] else ''}"
    )


@app.command("compare")
def compare_(
    systems: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_OR_RECIPE...", help="Run directories or recipes (trained first when their run is missing)."
        ),
    ],
    data: Annotated[
        str | None, typer.Option(help="Span JSONL every system is scored on (or sample:NAME); not with --curves.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("runs/compare"),
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap resamples for CIs and the paired test (0: none).")
    ] = SCORING.bootstrap,
    jaccard_threshold: Annotated[
        float | None,
        typer.Option(help="Word Jaccard for a match (default: the runs' eval.jaccard_threshold).", min=0.01, max=1.0),
    ] = None,
    tolerance: Annotated[
        list[int] | None, typer.Option(help="k for boundary recall within +/-k words (repeatable).")
    ] = None,
    max_docs: Annotated[
        int | None, typer.Option(help="Score the first N documents only (CLM generation is slow on CPU).")
    ] = None,
    reuse_predictions: Annotated[
        bool, typer.Option(help="Use a run's saved dev predictions when they cover these documents (no new inference).")
    ] = False,
    curves: Annotated[
        bool,
        typer.Option(
            help=(
                "Compare the runs' learning curves (recall at each checkpoint against training seconds; runs trained "
                "with eval.curve_docs)."
            )
        ),
    ] = False,
) -> None:
    """Compare systems (e.g. MLM vs CLM) on the same documents with the one scorer."""
    from toolkit.evaluate.compare import compare, terminal_table
    from toolkit.tasks import ensure_run

    if curves:
        from toolkit.evaluate.curves import compare_curves, curves_table

        summary = compare_curves([Path(s) for s in systems], out, tolerance or [3])
        console.print(curves_table(summary, tolerance or [3]))
        console.print(f"wrote {out}/curves.md, curves.json, curves.png")
        return
    if data is None:
        raise ToolkitError(
            "toolkit compare needs --data (the documents every system is scored on)",
            fix="add --data FILE, or --curves to compare learning curves",
        )

    # Recipes are trained first when their run is missing.
    tolerances = tolerance or list(SCORING.boundary_tolerance)
    summary = compare(
        [ensure_run(s) for s in systems],
        data,
        out,
        bootstrap,
        tolerances,
        max_docs=max_docs,
        reuse=reuse_predictions,
        jaccard_threshold=jaccard_threshold,
    )
    console.print(f"compare on {data}")
    console.print(terminal_table(summary, tolerances))
    console.print(f"wrote {out}/compare.md, compare.csv, compare.json, recall_by_length.png, pr_curve.png")


@app.command()
def tune(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="A finished segment_classification run directory.")],
    data: Annotated[
        str | None, typer.Option(help="Labeled documents to choose the thresholds on (default: the run's dev file).")
    ] = None,
) -> None:
    """Choose a segment run's per-label thresholds again (saved with its model) and rescore it."""
    from toolkit.tasks import flow_for
    from toolkit.tasks.segment_scoring import retune

    recipe, result = retune(run_path, data)
    console.print("thresholds: " + ", ".join(f"{label} {t}" for label, t in result.metrics["thresholds"].items()))
    console.print(flow_for(recipe).summary(recipe, result))


@app.command("export")
def export_(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="Run directory made by `toolkit run`.")],
    out: Annotated[Path, typer.Option(help="Artifact directory to create.")],
    precision: Annotated[
        str,
        typer.Option(
            help="auto: measure every path this machine allows and keep the fastest within budget; or one path: "
            "onnx_fp32 (fp32), onnx_fused (fused), onnx_int8 (int8: blockwise 8-bit weights), pytorch_fp32 (pytorch), "
            "pytorch_bf16 (bf16), openvino_fp32, openvino_bf16, openvino_int8 (OpenVINO; int8 calibrated on "
            "training windows by NNCF), openvino_int8_bf16 (the same int8, bf16 outside its matmuls)."
        ),
    ] = "auto",
    quantize: Annotated[str | None, typer.Option(hidden=True, help="Older name of --precision.")] = None,
    data: Annotated[
        str | None, typer.Option(help="Labeled documents for the parity check (default: the run's dev file).")
    ] = None,
    parity_docs: Annotated[
        int,
        typer.Option(
            help="Documents in the parity sample (the first N); an F1 budget needs enough spans to be stable."
        ),
    ] = 64,
    max_logit_diff: Annotated[
        float, typer.Option(help="Budget of the fp32 paths: largest absolute logit difference from PyTorch.")
    ] = 1e-3,
    max_f1_drop: Annotated[
        float, typer.Option(help="Budget of every path: span-F1 drop from PyTorch fp32 (0.01 = one point).")
    ] = 0.01,
    max_window_f1_drop: Annotated[
        float,
        typer.Option(
            help="Budget of windows sized to each document: span-F1 drop from the same path on the trained windows."
        ),
    ] = 0.005,
    windows: Annotated[
        str,
        typer.Option(
            help="Taggers: auto: also measure windows sized to each document (one pass when it fits the model's "
            "positions, or halfway there) and keep the fastest within the F1 budgets; trained: the run's windows."
        ),
    ] = "auto",
    overwrite: Annotated[bool, typer.Option(help="Replace an existing artifact directory.")] = False,
) -> None:
    """Export a run to a self-contained artifact (ONNX or PyTorch, the fastest path within budget on this machine);
    writes nothing when the parity budgets are exceeded."""
    from toolkit.deploy.export import ParityBudgets, export_run, export_table

    manifest = export_run(
        run_path,
        out,
        quantize or precision,
        ParityBudgets(max_logit_diff, max_f1_drop, max_window_f1_drop),
        data,
        parity_docs,
        overwrite,
        windows,
    )
    p, hw = manifest["parity"], manifest["hardware"]
    console.print(
        f"{hw['cpu']} ({' '.join(hw['cpu_flags']) or 'no AVX2'}); {p['documents']} parity documents, PyTorch fp32 span "
        f"F1 {p['pytorch_span_f1']:.4f}"
    )
    c = manifest["conditions"]
    console.print(
        f"timed with {c['threads']} thread(s) of {c['cores']} cores; load average {c['load_average']}, others busy "
        f"{c['others_busy_cores']} cores"
    )
    if c["warning"]:
        err_console.print(f"[yellow]warning:[/yellow] {escape(c['warning'])}", soft_wrap=True)
    console.print(export_table(manifest))
    if fitted := manifest["windowing"].get("fitted"):
        tried = ", ".join(
            f"{m['window_limit']} tokens: F1 {m['span_f1']:.4f}, {m['docs_per_second']} docs/s"
            for m in fitted["measured"]
        )
        verdict = f"kept {fitted['window_limit']}" if fitted["kept"] else f"trained windows kept ({fitted['why']})"
        line = f"windows sized to each document: {tried or 'none to measure'}; {verdict}"
        console.print(escape(line), soft_wrap=True)
    console.print(f"wrote {out} ({manifest['path']}, {len(manifest['files'])} files, manifest.json)")


@app.command()
def serve(
    artifact: Annotated[Path, typer.Argument(metavar="DIR", help="Artifact directory made by `toolkit export`.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 3000,
    max_batch_size: Annotated[
        int, typer.Option(help="Batching: most documents per model call (1 turns batching off).")
    ] = MAX_BATCH_DOCS,
    max_queue_seconds: Annotated[
        float,
        typer.Option(
            help=(
                "Admission bound: work waiting for the model, in seconds at the throughput measured at export; past it "
                "503 + Retry-After."
            )
        ),
    ] = 30.0,
    model_threads: Annotated[
        int | None,
        typer.Option(
            help="The model's intra-op threads (default: every core; fewer where another process keeps cores busy)."
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Worker processes, each with its own model and batcher (threads split among them).")
    ] = 1,
) -> None:
    """Serve an artifact over HTTP with BentoML (POST /extract, GET /info, /healthz, /metrics). SIGTERM or Ctrl-C stops
    it within seconds."""
    from toolkit.deploy.launch import serve_artifact

    if workers < 1:
        raise ToolkitError("--workers must be at least 1", fix="e.g. --workers 2")
    limits = {
        "max_queue_seconds": max_queue_seconds,
        "workers": workers,
        **({"model_threads": model_threads} if model_threads else {}),
    }
    serve_artifact(artifact, host, port, max_batch_size, **limits)


@app.command()
def bento(
    artifact: Annotated[Path, typer.Argument(metavar="DIR", help="Artifact directory made by `toolkit export`.")],
) -> None:
    """Build a BentoML bento of the service with DIR, its Python environment the project's lock (hash-checked, CPU
    torch). `bentoml serve TAG` serves it; `bentoml containerize TAG` makes its image."""
    from toolkit.deploy.bento import build_bento

    tag, path = build_bento(artifact)
    console.print(f"built bento {tag} at {path}", soft_wrap=True)
    console.print(f"serve it: bentoml serve {tag}    image: bentoml containerize {tag}", soft_wrap=True)


@app.command()
def schema(
    write: Annotated[Path | None, typer.Option(help="Write the JSON Schema files into this directory.")] = None,
) -> None:
    """Print (or write) the JSON Schema of the span record."""
    from toolkit.data.schema import json_schemas, write_json_schemas

    if write:
        for path in write_json_schemas(write):
            console.print(f"wrote {path}")
        return
    print(json.dumps(json_schemas(), indent=2, ensure_ascii=False))


@app.command()
def demo(
    overrides: Annotated[list[str] | None, typer.Argument(help="key=value overrides for the demo recipe.")] = None,
    workdir: Annotated[Path, typer.Option(help="Where the demo writes its outputs.")] = Path("runs/demo"),
) -> None:
    """The main job on the embedded sample: check the data, round-trip it through every format, train demo_mlm and score
    it."""
    from toolkit.demo import run_demo

    raise typer.Exit(run_demo(workdir, console, overrides or []))


def main() -> None:
    try:
        app()
    except ToolkitError as exc:
        err_console.print(f"[bold red]error:[/bold red] {escape(exc.render())}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
