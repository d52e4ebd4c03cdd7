"""The results page's records: a finished run's dev figures, written once as bench/results/<id>.json, and
docs/results.md generated from every record, so no figure on the page (or in the README's headline table)
is typed by hand.

    python scripts/results.py record RUN_DIR --table "CUAD, 4 clause types (dev)" --system "..." \\
        --command "toolkit run recipes/cuad_clauses_segments_mlm.yaml" [--id NAME] [--headline]
    python scripts/results.py throughput LINE.json --table ... --system ... --id ... --command ...
    python scripts/results.py serving bench/out/serve_service.json --table ... --system ... --id ... --command ...
    python scripts/results.py headline bench/out/serve_headline.json --table ... --system ... --id ... --command ...
    python scripts/results.py peak bench/out/predict_peak.json --table ... --system ... --id ... --command ...
    python scripts/results.py memory bench/out/long_document.json --case single_100mb --table ... --id ... --command ...
    python scripts/results.py parity bench/out/long_document_parity_demo.json --table ... --id ... --command ...
    python scripts/results.py cpu-peak bench/out/cpu_peaks.json --key "openvino int8" --table ... --id ... --command ...
    python scripts/results.py record RUN_DIR ... --estimate RUN_DIR.plan.json   # beside the dry run's estimate
    python scripts/results.py page            # rewrite docs/results.md and the README's headline table
    python scripts/results.py page --check    # exit 1 when either differs from the records (a fast test runs it)
    python scripts/results.py verify          # exit 1 on a record that is not what its generator wrote (CI runs it)

`record` reads the run's metrics.json (nothing is re-scored), the commit the run wrote there, and the CPU of the
machine it runs on: record a run on the machine that trained it, right after it finished. A record keeps the
generator's sentence (`generated_note`, with the inputs it was made from) apart from the author's `--note`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "results.md"
CHARTS = ROOT / "docs" / "charts"  # one SVG per table of the page, generated with it
README = ROOT / "README.md"
INDEX = ROOT / "docs" / "index.md"  # the site's front page carries the same headline table
COMPARE_GUIDE = ROOT / "docs" / "guides" / "compare.md"  # states the MLM-vs-CLM answer (answers())
HEADLINE_START, HEADLINE_END = "<!-- headline results: start -->", "<!-- headline results: end -->"
ANSWER_START, ANSWER_END = "<!-- mlm vs clm answer: start -->", "<!-- mlm vs clm answer: end -->"
sys.path.insert(0, str(ROOT))

from scripts.curve_records import (  # noqa: E402
    HEADLINE,
    PAIR_METRICS,
    answer_sentence,
    compare_fields,
    curve_fields,
    render_curves,
    render_pairs,
    render_section,
)
from scripts.curve_records import escape as _escape  # noqa: E402
from scripts.curve_records import seconds_text as _seconds  # noqa: E402
from scripts.record_notes import commit_problems, field_problems, generated, shallow  # noqa: E402
from toolkit.hardware import cpu_flags  # noqa: E402  (pure: no torch)

# The figure each task's runs are ranked by, with its CI key, and the figures shown beside it.
METRICS = {
    "segment_classification": (
        "jaccard_f1",
        "Jaccard F1",
        ("macro_aupr", "macro_precision_at_80_recall", "jaccard_precision", "jaccard_recall"),
    ),
    "token_classification": ("span_f1", "span F1", ("span_precision", "span_recall", "boundary_both_recall")),
    "span_generation": ("jaccard_f1", "Jaccard F1", ("span_f1", "jaccard_recall", "boundary_both_recall")),
}
LABELS = {
    "macro_aupr": "macro AUPR",
    "macro_precision_at_80_recall": "P@80R",
    "jaccard_precision": "P",
    "jaccard_recall": "R",
    "span_precision": "P",
    "span_recall": "R",
    "span_f1": "span F1",
    "boundary_both_recall": "both ends",
}


class Record(BaseModel):
    """One row of the results page: one run's dev figures, where and how it was made."""

    model_config = ConfigDict(extra="forbid")
    table: str = Field(description="The dataset and split, the page's table this row goes in.")
    system: str = Field(description="What was run, as a reader names it (recipe, model, variant).")
    metric: str
    value: float
    unit: str | None = Field(
        default=None,
        description='None for a score in [0, 1]; "s" for a time; "tokens/s" for a training speed; "ms" for a latency; '
        '"MB" for memory; "x" for a ratio.',
    )
    ci95: tuple[float, float] | None = None
    others: dict[str, float] = Field(default_factory=dict)
    documents: int | None = None
    train_seconds: float | None = None
    precision: str | None = Field(default=None, description="What the training ran in: bf16, fp16 or fp32.")
    inference_seconds: float | None = Field(default=None, description="Scoring the documents, model loading excluded.")
    cpu: str
    cpu_flags: list[str]
    command: str
    commit: str
    date: str
    headline: bool = False
    note: str | None = Field(default=None, description="The author's text (--note), kept apart from the generator's.")
    generated_note: str | None = Field(
        default=None, description="The generator's sentence, made from note_inputs (scripts/record_notes.py)."
    )
    note_inputs: list[dict] | None = Field(
        default=None, description="What each sentence of generated_note was made from: its template and inputs."
    )
    source: str | None = Field(
        default=None,
        description="The run directory the record was made from (relative to the repository where inside it): "
        "where it is on this machine, `verify` writes the record again from it and compares.",
    )
    models: dict[str, dict] | None = Field(
        default=None,
        description="A segment run with a linear prior: the linear model alone, the encoder alone and the final "
        "model on dev, each at thresholds chosen on training documents (Jaccard F1 and macro AUPR with CIs).",
    )
    encoder_training: dict | None = Field(
        default=None,
        description="Segment inputs: the encoder's held-out curve, its epochs and seconds, and what ended training.",
    )
    encoder_kept: dict[str, float] | None = Field(
        default=None,
        description="A fitted combination: the labels where the stack keeps the encoder, each with its one-sided "
        "p-value (log-loss of out-of-fold scores, bootstrap over documents).",
    )
    encoder_p_values: dict[str, float] | None = Field(
        default=None, description="A fitted combination: every tested label's p-value, kept or not."
    )
    budget: dict | None = Field(
        default=None,
        description="A run under budget.seconds: the budget, the plan it chose, what it gave up and why, and where "
        "training stopped at the deadline.",
    )
    stage_seconds: dict[str, float] | None = Field(
        default=None, description="The run's wall seconds by stage (prepare, train, save_and_evaluate)."
    )
    combination_pooled: dict | None = Field(
        default=None,
        description="A fitted combination: the one decision over every label (the pooled encoder weight, the "
        "departures' penalty, the log-loss gain and p-value of the one test, the labels that departed).",
    )
    run_name: str | None = Field(default=None, description="A curve record: its run directory's name.")
    others_ci95: dict[str, tuple[float, float]] | None = Field(
        default=None, description="95% CIs of figures in `others`, where the run has them."
    )
    curve: dict | None = Field(
        default=None,
        description="A curve record (scripts/curve_records.py): the learning curve, its plateau, the last doubling's "
        "slope and what ended training.",
    )
    paired: dict | None = Field(
        default=None,
        description="A compare record: the two systems, each recall's paired-bootstrap difference, CI and p-value, "
        "and their seconds per document.",
    )
    cross_fitting: dict | None = Field(
        default=None,
        description="segments.thresholds=cross_fitted: folds, out-of-fold clauses per label, the refit's epochs, and "
        "per fold its documents, best epoch, what ended it and its seconds.",
    )


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _measured_here(commit: str | None = None, **fields) -> Record:
    """A record of a figure measured on this machine today: its CPU model and the flags that matter for
    speed, the date, and the commit (HEAD unless given)."""
    model, flags = cpu_flags(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    return Record(
        **fields,
        cpu=model,
        cpu_flags=flags,
        commit=commit or _git("rev-parse", "--short", "HEAD"),
        date=dt.date.today().isoformat(),
    )


def _relative(path: Path) -> str:
    """A path as a record keeps it: relative to the repository where inside it."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


def _notes(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _write(r: Record, name: str) -> int:
    out = RECORDS / f"{name}.json"
    out.write_text(r.model_dump_json(indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}: {r.system} {r.metric} {_figure(r)}")
    return 0


def record_from_run(run: Path, table: str, system: str, command: str) -> Record:
    """A record of a finished run directory, on this machine, at the commit the run wrote into its metrics.json."""
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    commit = metrics["run"].get("commit")
    if not commit:
        raise SystemExit(
            f"{run}/metrics.json names no commit (a run made before runs recorded theirs, or outside a git checkout): "
            "run it again from the repository, so the record says what code made it"
        )
    task = (run / "config.yaml").read_text(encoding="utf-8").split("task:", 1)[1].split()[0]
    key, name, shown = METRICS[task]
    summary, ranking = metrics["summary"], metrics.get("ranking") or {}
    values = {**summary, **{f"macro_{k}": v for k, v in (ranking.get("macro") or {}).items()}}
    ci = metrics.get("ci95", {}).get(key)
    combination = metrics["run"].get("combination") or {}
    tested = {k: v["p_value"] for k, v in combination.items() if "p_value" in v}
    kept = {k: tested.get(k) for k, v in sorted(combination.items()) if v["uses"] != "linear"}
    said = {"template": "combination", "labels": len(combination), "kept": kept} if combination else None
    pooled = metrics["run"].get("combination_pooled") or {}
    if said and pooled.get("p_value") is not None:
        said["pooled_p"] = pooled["p_value"]
    crossing = metrics["run"].get("cross_fitting")
    if crossing:
        fold_keys = ("documents", "best_epoch", "ended_by", "last_gain", "training_seconds", "scoring_seconds")
        crossing = {
            **{k: crossing[k] for k in ("folds", "documents", "out_of_fold_clauses", "refit_epochs", "seconds")},
            "per_fold": [{k: f[k] for k in fold_keys} for f in crossing["per_fold"]],
        }
    others = {LABELS[k]: values[k] for k in shown if values.get(k) is not None}
    taught = None
    distilled = metrics["run"].get("distillation")
    if distilled:  # a student: what it learned from and what the teacher's labelling cost
        others |= {
            "unlabelled docs": distilled["unlabelled_documents"],
            "teacher labelling s": distilled["teacher_seconds"],
        }
        taught = {
            "template": "distillation",
            "teacher": distilled["teacher"],
            "teacher_model": distilled["teacher_model"],
            "temperature": distilled["temperature"],
            "gold_weight": distilled["gold_weight"],
            "labelled": distilled["labelled_documents"],
            "unlabelled": distilled["unlabelled_documents"],
        }
    if metrics["run"].get("wall_seconds") is not None:  # the whole run, beside train_seconds (the training alone)
        others["wall seconds"] = metrics["run"]["wall_seconds"]
    per_label = metrics.get("per_label") or {}
    if task == "token_classification" and 2 <= len(per_label) <= 4:  # e.g. BC5CDR's Chemical and Disease
        others |= {f"{label} F1": row["f1"] for label, row in sorted(per_label.items())}
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric=name,
        value=summary[key],
        ci95=tuple(ci) if ci else None,
        others=others,
        documents=metrics["counts"]["documents"],
        train_seconds=metrics["run"].get("train_seconds"),
        precision=metrics["run"].get("train_precision"),
        inference_seconds=metrics["run"].get("eval_seconds"),
        command=command,
        **generated(said, taught),
        source=_relative(run),
        models=metrics.get("models"),
        encoder_training=metrics["run"].get("encoder_training"),
        encoder_kept=kept if tested else None,
        encoder_p_values=tested or None,
        cross_fitting=crossing,
        budget=_budget(metrics["run"].get("budget")),
        stage_seconds=metrics["run"].get("stage_seconds"),
        combination_pooled=metrics["run"].get("combination_pooled") or None,
    )


def with_estimate(r: Record, plan: dict) -> Record:
    """`r` with the dry run's estimate of its plan beside its wall time (issue 75's estimate target): the expected
    seconds and the range in `others`, and a generated sentence giving how far the expected figure was off."""
    cost, wall = plan["cost_estimate"], r.others.get("wall seconds")
    if wall is None:
        raise SystemExit("the run's metrics.json has no wall_seconds: an estimate is judged against the whole run")
    seconds = cost["seconds"]
    entry = {
        "template": "estimate",
        **{k: seconds[k] for k in ("low", "expected", "high")},
        "expected_epochs": cost["epochs"]["expected"],
        "wall": wall,
    }
    others = {**r.others, "expected s": seconds["expected"], "estimate low s": seconds["low"]}
    others["estimate high s"] = seconds["high"]
    entries = [*(r.note_inputs or []), entry]
    return r.model_copy(update={"others": others, **generated(*entries)})


def _budget(budget: dict | None) -> dict | None:
    """What a record keeps of run.budget: the budget, the plan, what it gave up, where the deadline stopped it."""
    keys = ("seconds", "estimate_as_written", "plan", "gave_up", "reserved_seconds", "stopped_at_deadline")
    return {k: budget[k] for k in keys if k in budget} if budget else None


def serving_record(result: dict, table: str, system: str, command: str, note: str | None = None) -> Record:
    """A record of `serve_bench.py service` output: the median latency of one client's single-document
    requests, with docs/s at one client and at the most clients, and the answers that differed or failed."""
    rows = [row for key, row in result.items() if key.startswith("threads_")]
    if len({row["model_threads"] for row in rows}) > 1:
        raise SystemExit("serving: the result holds several --model-threads values; record one at a time")
    loads = {row["clients"]: row for row in rows}
    if 1 not in loads or len(loads) < 2:
        raise SystemExit(
            "serving: the result needs a 1-client load and a concurrent one (serve_bench.py --clients 1 32)"
        )
    one, most = loads[1], loads[max(loads)]
    requests = sum(row["requests"] for row in loads.values())
    errors = sum(row["errors"] for row in loads.values())
    differ = requests - errors - sum(row["answers_equal_single"] for row in loads.values())
    manifest = json.loads((Path(result["artifact"]) / "manifest.json").read_text(encoding="utf-8"))
    return _measured_here(
        table=table,
        system=system,
        metric="served latency p50",
        value=one["p50_ms"],
        unit="ms",
        others={
            "p95 ms": one["p95_ms"],
            "docs/s, 1 client": one["docs_per_s"],
            f"docs/s, {most['clients']} clients": most["docs_per_s"],
        },
        documents=result["documents"],
        command=command,
        note=note,
        **generated(
            {"template": "serving", "path": manifest["path"], "requests": requests, "errors": errors, "differ": differ}
        ),
    )


def headline_record(
    result: dict, table: str, system: str, command: str, commit: str | None, note: str | None
) -> Record:
    """A record of `serve_bench.py headline`: the median over rounds of the chosen path's docs/s over the HF
    pipeline's, one document per call, with the p50 latencies of the last round beside it."""
    last = result["rounds"][-1]
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric="docs/s against the HF pipeline, one document a call",
        value=result["median_ratio_docs_per_s"],
        unit="x",
        others={
            "median document ratio": result["median_document_ratio"],
            "p50 ratio": result["median_ratio_p50"],
            "chosen p50 ms": last["chosen"]["p50_ms"],
            "pipeline p50 ms": last["hf_pipeline_fp32"]["p50_ms"],
        },
        documents=result["documents"],
        command=command,
        note=note,
        **generated(
            {
                "template": "headline",
                "path": result["chosen_path"],
                "rounds": len(result["rounds"]),
                "interleave": result["interleave"],
            }
        ),
    )


def peak_record(result: dict, table: str, system: str, command: str, commit: str | None, note: str | None) -> Record:
    """A record of `predict_peak.py`: batched `toolkit predict`'s share of the CPU's matmul peak in its precision."""
    modes = result["modes"]
    whole = modes["toolkit predict"]
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric=f"share of the {result['precision']} matmul peak, toolkit predict",
        value=whole["median_share_of_round_peak"],
        others={
            "GFLOP/s": whole["gflops"],
            "peak GFLOP/s": result["peak_gflops"],
            "docs/s": whole["docs_per_s"],
            **{f"share, {m}": row["median_share_of_round_peak"] for m, row in modes.items() if m != "toolkit predict"},
        },
        documents=result["documents"],
        command=command,
        note=note,
        **generated(
            {
                "template": "peak",
                "path": result["path"],
                "gflop_per_document": result["gflop_per_document"],
                "rounds": result["rounds"],
                "peak_per_round": result["peak_per_round"],
            }
        ),
    )


def cpu_peak_record(
    result: dict, table: str, system: str, command: str, commit: str | None, note: str | None, key: str
) -> Record:
    """A record of one `cpu_peaks.py` figure: a runtime's matmul peak in one precision on this CPU (and the
    instruction-set caps it ran under), with int8's multiple of fp32 in the same run."""
    peak = result["peaks"][key]
    others = {"matrix size": peak["size"]}
    if "over_fp32" in peak:
        others["int8 / fp32"] = peak["over_fp32"]
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric=f"{peak['precision']} matmul peak",
        value=peak["gflops"],
        unit="GFLOP/s",
        others=others,
        command=command,
        note=note,
        **generated(
            {
                "template": "cpu_peak",
                "threads": result["threads"],
                "sizes": result["sizes"],
                "caps": result["caps"],
            }
        ),
    )


def window_share_record(
    result: dict, table: str, system: str, command: str, commit: str | None, note: str | None, key: str
) -> Record:
    """A record of one path of `window_share.py`: its model call's share of its precision's matmul peak in its own
    runtime, on 256-token windows in batches (and alone)."""
    row = result["paths"][key]
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric=f"share of the {row['runtime']} {row['precision']} matmul peak, batches of {result['batch']}",
        value=row["share_batch"],
        others={
            "GFLOP/s": row["gflops_batch"],
            "peak GFLOP/s": row["peak_gflops"],
            "share, one window": row["share_one"],
            "ms, one window": row["one_window_ms"],
        },
        command=command,
        note=note,
        **generated(
            {
                "template": "window_share",
                "path": key,
                "gflop_per_window": row["gflop_per_window"],
                "tokens": result["tokens"],
                "rounds": result["rounds"],
                "peak_per_round": row["peak_per_round"],
            }
        ),
    )


def memory_record(
    result: dict,
    table: str,
    system: str,
    command: str,
    commit: str | None,
    note: str | None,
    case: str,
    against: str | None,
) -> Record:
    """A record of one `long_document.py` case: `toolkit predict`'s peak RSS, with its characters per second
    (and their share of another case's, measured in the same run)."""
    row = result["cases"][case]
    others = {"chars/s": row["chars_per_s"], "input MB": round(row["input_bytes"] / 1e6, 1), "spans": row["spans"]}
    if "tokens_per_s" in row:  # tokens per character differ between texts: per token, the model's work compares
        others["tokens/char"], others["tokens/s"] = row["tokens_per_char"], row["tokens_per_s"]
    if against:
        base = result["cases"][against]
        others[f"chars/s share of {against}"] = round(row["chars_per_s"] / base["chars_per_s"], 3)
        if "tokens_per_s" in row and "tokens_per_s" in base:
            others[f"tokens/s share of {against}"] = round(row["tokens_per_s"] / base["tokens_per_s"], 3)
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric="peak RSS",
        value=row["peak_rss_mb"],
        unit="MB",
        others=others,
        documents=row["documents"],
        inference_seconds=row["seconds"],
        command=command,
        note=note,
        **generated({"template": "memory", "failed": row["failed"]}),
    )


def parity_record(result: dict, table: str, system: str, command: str, commit: str | None, note: str | None) -> Record:
    """A record of `long_document_parity.py`: the share of documents whose streamed spans equal the whole path's
    as `toolkit predict` writes them, with exact equality and the spans compared beside it."""
    n = result["documents"]
    return _measured_here(
        commit,
        table=table,
        system=system,
        metric="documents with the whole-document path's spans, as written",
        value=round(result["documents_equal_as_written"] / n, 4),
        others={
            "documents equal, exact floats": result["documents_equal_exactly"],
            "spans": result["spans_whole"],
            "spans streamed": result["spans_streamed"],
            "largest score difference": result["largest_score_difference"],
        },
        documents=n,
        inference_seconds=result["seconds_streamed"],
        command=command,
        note=note,
        **generated(
            {
                "template": "parity",
                "group_windows": result["group_windows"],
                "chunk_chars": result["chunk_chars"],
                "thresholds": result.get("thresholds"),
                "seconds_whole": result["seconds_whole"],
            }
        ),
    )


# The fields `record` writes from a run directory, compared by `verify` where the run is on this machine.
REGENERATED = (
    "metric", "value", "ci95", "others", "documents", "train_seconds", "inference_seconds", "commit",
    "generated_note", "note_inputs", "models", "encoder_training", "encoder_kept", "encoder_p_values", "cross_fitting",
    "budget", "stage_seconds", "combination_pooled",
)  # fmt: skip


def regenerated_problems(r: Record) -> list[str]:
    """Where the run a record was made from is on this machine: the fields `record` would write that differ."""
    run = (ROOT / r.source) if r.source else None
    if run is None or not (run / "metrics.json").is_file() or not (run / "config.yaml").is_file():
        return []
    try:
        again = record_from_run(run, r.table, r.system, r.command)
    except SystemExit as e:
        return [f"cannot be written again from {r.source}: {e}"]
    if any(e["template"] == "estimate" for e in r.note_inputs or []):
        plan = run.parent / f"{run.name}.plan.json"  # where bench/estimate_check.sh writes it
        if not plan.is_file():
            return []
        again = with_estimate(again, json.loads(plan.read_text(encoding="utf-8")))
    return [
        f"{k} is {getattr(r, k)!r}; {r.source} gives {getattr(again, k)!r}"
        for k in REGENERATED
        if getattr(r, k) != getattr(again, k)
    ]


def verify(folder: Path = RECORDS) -> list[str]:
    """One line per problem of any record in `folder`: a commit outside the history, generated fields that do not
    follow from the record's figures, a field that differs from what its run on this machine gives."""
    paths = sorted(folder.glob("*.json"))
    records = {p: Record.model_validate_json(p.read_text(encoding="utf-8")) for p in paths}
    lines = []
    if shallow(ROOT):
        print("a shallow clone: commits are not checked (git fetch --unshallow checks them)", file=sys.stderr)
        bad = {}
    else:
        bad = commit_problems({r.commit for r in records.values()}, ROOT)
    for path, r in records.items():
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        problems = field_problems(json.loads(path.read_text(encoding="utf-8"))) + regenerated_problems(r)
        if r.commit in bad:
            problems.insert(0, f"commit {r.commit}: {bad[r.commit]}")
        lines += [f"{name}: {p}" for p in problems]
    return lines


def load_records(folder: Path = RECORDS) -> list[Record]:
    """Every record, each checked; a bad one is an error naming its file and field."""
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(Record.model_validate_json(path.read_text(encoding="utf-8")))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"]))
            sys.exit(
                f"{path}: {where}: {first['msg']}; fix the record or write it again with scripts/results.py record"
            )
    return records


def _cpu(r: Record) -> str:
    return f"{r.cpu} ({', '.join(r.cpu_flags) or 'no AVX2'})"


def _figure(r: Record) -> str:
    if r.unit == "s":
        return _seconds(r.value)
    if r.unit == "tokens/s":
        return f"{r.value:.0f} tokens/s"
    if r.unit == "ms":
        return f"{r.value:.0f} ms"
    if r.unit == "MB":
        return f"{r.value:,.0f} MB"
    if r.unit == "GFLOP/s":
        return f"{r.value:,.0f} GFLOP/s"
    if r.unit == "x":
        return f"{r.value:.2f}x"
    ci = f" ({r.ci95[0]:.3f}-{r.ci95[1]:.3f})" if r.ci95 else ""
    return f"{r.value:.3f}{ci}"


def chart_name(table: str) -> str:
    """The chart file of a table: its title as a file name."""
    return re.sub(r"[^a-z0-9]+", "-", table.lower()).strip("-") + ".svg"


def render_page(records: list[Record]) -> str:
    """docs/results.md: per table, its chart, its systems' figures, and the commands that made them. Pure."""
    lines = [
        "# Results",
        "",
        "<!-- Generated by scripts/results.py from bench/results/*.json; do not edit by hand. -->",
        "",
        "Current figures only, one table per dataset, each from a record that `scripts/results.py record` wrote "
        "from a finished run (dev split; the test splits are held back). The CI in brackets is the 95% "
        "bootstrap interval over documents. Training time is the run's training steps; inference is scoring "
        "the dev documents, model loading excluded. Every run used 2 CPU cores. What each figure replaced, and "
        "what earlier experiments found, is in the [changelog](changelog.md).",
        "",
    ]
    for table, all_rows in _tables(records).items():
        curves = any(r.curve for r in all_rows)
        # A curve table renders its compare records in its section; a plain table lists them below its systems.
        rows = all_rows if curves else [r for r in all_rows if r.paired is None]
        pairs = [] if curves else [r for r in all_rows if r.paired is not None]
        what = "each system's learning curve, 95% CIs as whiskers" if curves else "each system's figure with its 95% CI"
        lines += [
            f"## {table}",
            "",
            f"![{table}: {what}](charts/{chart_name(table)})",
            "",
        ]
        if any(r.curve is not None for r in rows):
            lines += render_section(rows)
            sentence = answer_sentence(rows)
            lines += [f"**The answer.** {sentence}", ""] if sentence else []
            lines += _provenance(rows, named=True)
            continue
        lines += ["| system | figure (95% CI) | also | training | inference |", "|---|---|---|---|---|"]
        for i, r in enumerate(rows, start=1):
            also = ", ".join(f"{k} {v:.3f}" if abs(v) < 10 else f"{k} {v:.0f}" for k, v in r.others.items())
            inference = f"{_seconds(r.inference_seconds)} for {r.documents} docs" if r.inference_seconds else ""
            lines.append(
                f"| {i}. {r.system} | {r.metric} {_figure(r)} | {also} | {_seconds(r.train_seconds)} | {inference} |"
            )
        lines.append("")
        lines += render_pairs(pairs)
        lines += _provenance(rows + pairs, named=bool(pairs))
        lines += model_lines([r for r in rows if r.models])
    return "\n".join(lines)


def _provenance(rows: list[Record], named: bool = False) -> list[str]:
    """How each row was made, and its notes; `named`: each line names its system (a table whose rows are not
    numbered in this order). Pure."""
    lines = ["How each was made (command, revision, date, CPU):", ""]
    lines += [
        f"{i}. {f'{r.system}: ' if named else ''}`{r.command}` (at {r.commit}, {r.date}; {_cpu(r)})"
        for i, r in enumerate(rows, start=1)
    ]
    notes = [(r, _notes(r.generated_note, r.note)) for r in rows if r.generated_note or r.note]
    return lines + (["", "Notes:", ""] + [f"- {r.system}: {note}" for r, note in notes] + [""] if notes else [""])


def _tables(records: list[Record]) -> dict[str, list[Record]]:
    tables: dict[str, list[Record]] = {}
    for r in records:
        tables.setdefault(r.table, []).append(r)
    return dict(sorted(tables.items()))


# A chart is a few bars with whiskers; written here as SVG text (no plotting library) so that the same records
# give the same bytes on every machine, which `page --check` compares.
BAR_HEIGHT, LABEL_WIDTH, PLOT_WIDTH, VALUE_WIDTH = 22, 300, 280, 140


def render_chart(table: str, rows: list[Record]) -> str:
    """One table's chart: per system (numbered as in its table) a bar of its figure and its 95% CI as a whisker,
    one panel per metric and unit. Scores share the 0-1 axis; other units start at 0. Pure."""
    panels: dict[tuple[str, str | None], list[tuple[int, Record]]] = {}
    for i, r in enumerate(rows, start=1):
        panels.setdefault((r.metric, r.unit), []).append((i, r))
    width = LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH
    parts, y = [], 8
    for (metric, unit), members in panels.items():
        top = 1.0 if unit is None else max(max(r.value, *(r.ci95 or (0.0, 0.0))) for _, r in members) * 1.1 or 1.0
        scale = PLOT_WIDTH / top
        parts.append(f'<text x="{LABEL_WIDTH}" y="{y + 12}" font-weight="bold">{_escape(metric)}</text>')
        y += 20
        for i, r in members:
            name = r.system if len(r.system) <= 44 else r.system[:43] + "…"
            bar = round(r.value * scale, 1)
            parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end">{i}. {_escape(name)}</text>')
            parts.append(
                f'<rect x="{LABEL_WIDTH}" y="{y + 4}" width="{bar}" height="{BAR_HEIGHT - 8}" fill="#5b8def"/>'
            )
            if r.ci95:
                lo, hi = (round(LABEL_WIDTH + v * scale, 1) for v in r.ci95)
                mid = y + BAR_HEIGHT / 2
                parts.append(
                    f'<path d="M{lo} {mid}H{hi}M{lo} {mid - 5}V{mid + 5}M{hi} {mid - 5}V{mid + 5}" stroke="#222"/>'
                )
            parts.append(f'<text x="{LABEL_WIDTH + PLOT_WIDTH + 8}" y="{y + 15}">{_escape(_figure(r))}</text>')
            y += BAR_HEIGHT
        y += 10
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}" '
        f'font-family="sans-serif" font-size="12" role="img"><title>{_escape(table)}</title>'
        + "".join(parts)
        + "</svg>\n"
    )


def render_charts(records: list[Record]) -> dict[str, str]:
    """File name -> SVG, one per table of the page. Pure."""
    return {
        chart_name(table): render_curves(table, rows)
        if any(r.curve for r in rows)
        else render_chart(table, [r for r in rows if r.paired is None])
        for table, rows in _tables(records).items()
        if any(r.paired is None for r in rows)  # a table of compare records alone has no chart
    }


def _training_cell(t: dict) -> str:
    """How a segment encoder trained: its held-out curve, or after cross-fitting the refit and each fold's. Pure."""

    def curve(points: list[dict]) -> str:
        return ", ".join(f"{c['segment_aupr']:.3f}" for c in points)

    cell = (
        f"{t['epochs']:g} epochs"
        + (f" (best: epoch {t['best_epoch']:g})" if t.get("best_epoch") is not None else "")
        + f", {_seconds(t['seconds'])}, ended by {t['ended_by']}"
    )
    if "folds" not in t:
        return f"{cell}; held-out segment AUPR per evaluation: {curve(t['held_out_curve'])}"
    folds = "; ".join(
        f"fold {i + 1}: best epoch {f['best_epoch']:g}, ended by {f['ended_by']}, "
        f"AUPR per epoch {curve(f['held_out_curve'])}"
        for i, f in enumerate(t["folds"])
    )
    return f"{cell} (folds: {_seconds(t['folds_seconds'])}); {folds}"


def model_lines(records: list[Record]) -> list[str]:
    """Per segment run with a linear prior: its three models on dev, and how its encoder trained. Pure."""
    if not records:
        return []

    def cell(figures: dict, key: str) -> str:
        value, ci = figures.get(key), figures.get(f"{key}_ci95")
        return "" if value is None else f"{value:.3f}" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else "")

    lines = [
        "Each run's three models on dev, at thresholds chosen on training documents:",
        "",
        "| system | model | Jaccard F1 (95% CI) | macro AUPR (95% CI) | encoder training |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        t = r.encoder_training
        trained = _training_cell(t) if t else "windows, trained with the linear logit"
        for name, figures in r.models.items():
            lines.append(
                f"| {r.system} | {name} | {cell(figures, 'jaccard_f1')} | {cell(figures, 'macro_aupr')} | "
                f"{trained if name == 'encoder' else ''} |"
            )
    return lines + [""]


def answers(records: list[Record]) -> list[str]:
    """The answer sentence of every curve table that has one (its headline compare record). Pure."""
    found = ((table, answer_sentence(rows)) for table, rows in _tables(records).items())
    return [f"**{table}.** {sentence}" for table, sentence in found if sentence]


def render_headline(records: list[Record]) -> str:
    """The README's small table: the records marked headline (compare records give the answer sentences below
    it instead). Pure."""
    lines = [HEADLINE_START, "| dataset | system | figure (95% CI) | training |", "|---|---|---|---|"]
    for r in (r for r in records if r.headline and r.paired is None):
        lines.append(f"| {r.table} | {r.system} | {r.metric} {_figure(r)} | {_seconds(r.train_seconds)} |")
    said = answers(records)
    return "\n".join([*lines, *(["", *said] if said else []), HEADLINE_END])


def readme_with(readme: str, headline: str, start: str = HEADLINE_START, end: str = HEADLINE_END) -> str:
    """The README (or a guide) with its generated block replaced. Pure."""
    head, _, rest = readme.partition(start)
    _, _, tail = rest.partition(end)
    if not rest:
        raise SystemExit(f"no {start} ... {end} block: add one where the generated text goes")
    return head + headline + tail


def render_answer(records: list[Record]) -> str:
    """The compare guide's block: the answer sentences, or what is still missing. Pure."""
    said = answers(records) or ["No comparison at the plateau is recorded yet: run bench/boundary_curves.sh."]
    return "\n".join([ANSWER_START, *said, ANSWER_END])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="write bench/results/<id>.json from a finished run")
    rec.add_argument("run", type=Path)
    rec.add_argument("--table", required=True)
    rec.add_argument("--system", required=True)
    rec.add_argument("--command", dest="run_command", required=True, help="the command that made the run")
    rec.add_argument("--id", help="file name (default: the run directory's name)")
    rec.add_argument("--headline", action="store_true", help="also show it in the README's table")
    rec.add_argument("--note")
    rec.add_argument(
        "--estimate", type=Path, help="the run's `toolkit run --dry-run` plan (JSON): its expected wall time beside"
    )
    timing = sub.add_parser("timing", help="write bench/results/<id>.json for a measured wall time")
    timing.add_argument("--table", required=True)
    timing.add_argument("--system", required=True)
    timing.add_argument("--seconds", type=float, required=True)
    timing.add_argument("--command", dest="run_command", required=True)
    timing.add_argument("--id", required=True)
    timing.add_argument("--headline", action="store_true")
    timing.add_argument("--note")
    speed = sub.add_parser("throughput", help="write bench/results/<id>.json from a train_throughput.py line")
    speed.add_argument("line", type=Path, help="a file holding train_throughput.py's JSON output line")
    speed.add_argument("--table", required=True)
    speed.add_argument("--system", required=True)
    speed.add_argument("--command", dest="run_command", required=True)
    speed.add_argument("--id", required=True)
    speed.add_argument("--commit", help="the commit it was measured at (default: HEAD)")
    speed.add_argument("--note")
    served = sub.add_parser("serving", help="write bench/results/<id>.json from serve_bench.py service's JSON")
    served.add_argument("result", type=Path, help="bench/out/serve_service.json (clients 1 and at least one more)")
    served.add_argument("--table", required=True)
    served.add_argument("--system", required=True)
    served.add_argument("--command", dest="run_command", required=True)
    served.add_argument("--id", required=True)
    served.add_argument("--note")
    ratio = sub.add_parser("headline", help="write bench/results/<id>.json from serve_bench.py headline's JSON")
    ratio.add_argument("result", type=Path, help="bench/out/serve_headline.json")
    peak = sub.add_parser("peak", help="write bench/results/<id>.json from predict_peak.py's JSON")
    peak.add_argument("result", type=Path, help="bench/out/predict_peak.json")
    memory = sub.add_parser("memory", help="write bench/results/<id>.json from one long_document.py case")
    memory.add_argument("result", type=Path, help="bench/out/long_document*.json")
    memory.add_argument("--case", required=True, help="the case's name, e.g. single_100mb")
    memory.add_argument("--against", help="a case of the same file whose chars/s this one's is compared with")
    parity = sub.add_parser("parity", help="write bench/results/<id>.json from long_document_parity.py's JSON")
    parity.add_argument("result", type=Path, help="bench/out/long_document_parity_*.json")
    cpu_peak = sub.add_parser("cpu-peak", help="write bench/results/<id>.json from one cpu_peaks.py figure")
    cpu_peak.add_argument("result", type=Path, help="bench/out/cpu_peaks*.json")
    cpu_peak.add_argument("--key", required=True, help="the runtime and precision, e.g. 'openvino int8'")
    window_share = sub.add_parser("window-share", help="write bench/results/<id>.json from one window_share.py path")
    window_share.add_argument("result", type=Path, help="bench/out/window_share*.json")
    window_share.add_argument("--key", required=True, help="the export path, e.g. openvino_int8")
    for measured in (ratio, peak, memory, parity, cpu_peak, window_share):
        measured.add_argument("--table", required=True)
        measured.add_argument("--system", required=True)
        measured.add_argument("--command", dest="run_command", required=True)
        measured.add_argument("--id", required=True)
        measured.add_argument("--commit", help="the commit it was measured at (default: HEAD)")
        measured.add_argument("--note")
    curve = sub.add_parser("curve", help="write bench/results/<id>.json from a run read at its plateau")
    curve.add_argument("run", type=Path)
    cmp_ = sub.add_parser("compare", help="write bench/results/<id>.json from one pair of a toolkit compare")
    cmp_.add_argument("result", type=Path, help="the compare.json of `toolkit compare`")
    cmp_.add_argument("--a", required=True, help="the first system's name in compare.json")
    cmp_.add_argument("--b", required=True, help="the second system's name (the difference is a - b)")
    cmp_.add_argument(
        "--metric",
        default=HEADLINE,
        choices=list(PAIR_METRICS),
        help="the difference the record leads with: clause boundaries (default) or entity span F1",
    )
    for made in (curve, cmp_):
        made.add_argument("--table", required=True)
        made.add_argument("--system", required=True)
        made.add_argument("--command", dest="run_command", required=True)
        made.add_argument("--id", required=True)
        made.add_argument("--commit", help="the commit it was made at (default: HEAD)")
        made.add_argument("--headline", action="store_true", help="compare: state it as the table's answer")
        made.add_argument("--note")
    check = sub.add_parser("verify", help="exit 1 on a record that is not what its generator wrote")
    check.add_argument("--folder", type=Path, default=RECORDS)
    page = sub.add_parser("page", help="rewrite docs/results.md and the README's headline table")
    page.add_argument("--check", action="store_true", help="exit 1 when either is not what the records give")
    args = parser.parse_args()

    if args.command == "record":
        r = record_from_run(args.run, args.table, args.system, args.run_command)
        r.headline, r.note = args.headline, args.note
        if args.estimate:
            r = with_estimate(r, json.loads(args.estimate.read_text(encoding="utf-8")))
        return _write(r, args.id or args.run.name)

    if args.command == "verify":
        problems = verify(args.folder)
        for line in problems:
            print(line)
        print(f"{len(problems)} problems in {len(list(args.folder.glob('*.json')))} records" if problems else "ok")
        return 1 if problems else 0

    if args.command in ("curve", "compare"):
        fields = (
            {**curve_fields(args.run), "run_name": args.run.name}
            if args.command == "curve"
            else compare_fields(json.loads(args.result.read_text(encoding="utf-8")), args.a, args.b, args.metric)
        )
        r = _measured_here(
            args.commit,
            table=args.table,
            system=args.system,
            command=args.run_command,
            headline=args.headline,
            note=args.note,
            **fields,
        )
        return _write(r, args.id)

    if args.command == "timing":
        r = _measured_here(
            table=args.table,
            system=args.system,
            metric="wall time",
            value=args.seconds,
            unit="s",
            command=args.run_command,
            headline=args.headline,
            note=args.note,
        )
        return _write(r, args.id)

    if args.command == "throughput":
        measured = json.loads(args.line.read_text(encoding="utf-8").strip().splitlines()[-1])
        padding = 1 - measured["real_tokens"] / measured["padded_tokens"]
        epoch = measured.get("epoch_padding_share")
        plain_only = "trainer_tokens_per_s" not in measured  # train_throughput.py --plain-only: a lever's epoch
        r = _measured_here(
            args.commit,
            table=args.table,
            system=args.system,
            metric="epoch, plain loop" if plain_only else "training",
            value=measured["plain_seconds_per_epoch"] if plain_only else measured["trainer_tokens_per_s"],
            unit="s" if plain_only else "tokens/s",
            others={
                "plain loop tokens/s": measured["plain_tokens_per_s"],
                "s/step": measured["plain_seconds_per_step" if plain_only else "trainer_seconds_per_step"],
                **({"steps/epoch": measured["steps_per_epoch"]} if plain_only else {}),
            },
            command=args.run_command,
            note=args.note,
            **generated(
                {
                    "template": "throughput",
                    "steps": measured["steps"],
                    "real_tokens": measured["real_tokens"],
                    "padding": padding,
                    "precision": "bf16" if measured["bf16"] else "fp32",
                    "epoch_padding": epoch,
                }
            ),
        )
        return _write(r, args.id)

    if args.command == "serving":
        result = json.loads(args.result.read_text(encoding="utf-8"))
        r = serving_record(result, args.table, args.system, args.run_command, args.note)
        return _write(r, args.id)

    if args.command in ("headline", "peak", "memory", "parity", "cpu-peak", "window-share"):
        result = json.loads(args.result.read_text(encoding="utf-8"))
        makers = {
            "headline": headline_record,
            "peak": peak_record,
            "memory": memory_record,
            "parity": parity_record,
            "cpu-peak": cpu_peak_record,
            "window-share": window_share_record,
        }
        maker = makers[args.command]
        extra = {"case": args.case, "against": args.against} if args.command == "memory" else {}
        extra = {"key": args.key} if args.command in ("cpu-peak", "window-share") else extra
        r = maker(result, args.table, args.system, args.run_command, args.commit, args.note, **extra)
        return _write(r, args.id)

    records = load_records()
    headline = render_headline(records)
    want = {PAGE: render_page(records) + "\n"}
    want |= {p: readme_with(p.read_text(encoding="utf-8"), headline) for p in (README, INDEX)}
    guide = COMPARE_GUIDE.read_text(encoding="utf-8")
    want[COMPARE_GUIDE] = readme_with(guide, render_answer(records), ANSWER_START, ANSWER_END)
    want |= {CHARTS / name: svg for name, svg in render_charts(records).items()}
    stale = [p for p, text in want.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    gone = [p for p in CHARTS.glob("*.svg") if p not in want]  # charts of tables no record holds any more
    if args.check:
        for p in stale + gone:
            print(f"{p.relative_to(ROOT)} is not what bench/results/*.json give: run python scripts/results.py page")
        return 1 if stale or gone else 0
    CHARTS.mkdir(exist_ok=True)
    for p in stale:
        p.write_text(want[p], encoding="utf-8")
        print(f"wrote {p.relative_to(ROOT)}")
    for p in gone:
        p.unlink()
        print(f"removed {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
