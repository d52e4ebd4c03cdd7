"""`toolkit export`: a run -> a self-contained artifact gated on parity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolkit.cli.common import console, err_console

# The paths of toolkit.deploy.paths.PATHS, written out: importing the registry (builders, runtimes, run files) would
# cost every `toolkit` command a tenth of a second at start-up. tests/test_export.py checks the list is whole.
PATH_NAMES = (
    "onnx_fp32 (fp32), onnx_fused (fused), onnx_int8 (int8), pytorch_fp32 (pytorch), pytorch_bf16 (bf16), "
    "openvino_fp32, openvino_bf16, openvino_int8, openvino_int8_bf16"
)


def export_(
    run_path: Annotated[Path, typer.Argument(metavar="RUN", help="Run directory made by `toolkit run`.")],
    out: Annotated[Path, typer.Option(help="Artifact directory to create.")],
    precision: Annotated[
        str,
        typer.Option(
            help="auto: measure every path this machine allows and keep the fastest within budget; or one path (or "
            f"its short name): {PATH_NAMES}."
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
