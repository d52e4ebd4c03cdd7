"""Outputs of two revisions at the same seed, compared: a refactor's check that nothing a user sees moved.

    python bench/output_parity.py --base 3c7562d [--head HEAD] [--out /tmp/parity] [--reuse]

Each revision is checked out into its own worktree and runs, with its own code:
- a run of every task: the demo recipes (`demo_mlm`, `demo_segments_mlm`, `demo_clm`), the segment recipe's
  linear baseline, and MLM and CLM pre-training on the contract sample;
- the segment recipe once per segments.thresholds mode (SEGMENT_MODES: fixed, held_out, cross_fitted, and
  cross_fitted above its document limit, with and without the fitted combination) and with hard negatives;
- `toolkit eval`, `toolkit compare`, and `toolkit predict` of the MLM run;
- an export of the MLM run on every path this machine builds (`--windows trained`: fitted windows are chosen
  by timing), of the segment run and of the CLM run, each followed by `toolkit predict` over the artifact;
- the service over the segment and the int8 MLM artifacts (one request per dev document).

Then, per output: predictions, hallucinations and saved weights byte for byte (a predicted row's source path,
the revision's worktree, read as one); metrics.json, and each
manifest's parity section, byte for byte once the fields that measure time or memory are set equal; and the
served answers. Exit 1 when anything differs. `--reuse` keeps a revision's outputs from an earlier call, step by step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

RECIPES = ("demo_mlm", "demo_segments_mlm", "demo_clm")
SAMPLE = ("data.train=sample:contracts_train", "data.dev=sample:contracts_dev")
PRETRAIN = {
    "pretrain_mlm": ("recipes/cuad_domain_pretrain_mlm.yaml", *SAMPLE, "model.max_length=128"),
    "pretrain_clm": (
        "recipes/cuad_domain_pretrain_clm.yaml",
        *SAMPLE,
        "data.max_train_docs=8",
        "data.max_dev_docs=4",
        "model.max_length=128",
    ),
}
# Every path of `toolkit export`; a path this machine cannot build is skipped in both revisions alike.
PATHS = (
    "onnx_fp32",
    "onnx_fused",
    "onnx_int8",
    "pytorch_fp32",
    "pytorch_bf16",
    "openvino_fp32",
    "openvino_bf16",
    "openvino_int8",
    "openvino_int8_bf16",
)
EXPORTS = {f"mlm_{p}": ("demo_mlm", p) for p in PATHS} | {
    "seg_onnx_fp32": ("demo_segments_mlm", "onnx_fp32"),
    "clm_onnx_fp32": ("demo_clm", "onnx_fp32"),
}
SERVED = ("seg_onnx_fp32", "mlm_onnx_int8")
# Each segments.thresholds mode of an encoder, once, on demo_segments_mlm (which itself is `tuned`), with the
# overrides the embedded sample (48 training documents) needs: out_of_fold is the linear model's (demo_linear),
# segment inputs are what cross_fitted trains, epochs are cut so a fold trains in seconds.
SEGMENT_INPUTS = (
    "segments.encoder_input=segments",
    "segments.loss_weights=none",
    "model.max_length=128",
    "segments.segment_tokens=64",
    "segments.context_tokens=16",
    "train.epochs=2",
    "train.early_stopping_patience=1",
)
FITTED = ("segments.linear_prior=true", "segments.clause_starts=true", "segments.combination=fitted")
SEGMENT_MODES = {
    "seg_fixed": ("segments.thresholds=fixed",),
    "seg_held_out": ("segments.thresholds=held_out", "segments.held_out_share=0.25"),
    "seg_held_out_fitted": ("segments.thresholds=held_out", "segments.held_out_share=0.25", *FITTED),
    "seg_hard_negatives": ("windows.negative_ratio=0.5", "segments.hard_negatives.pool=50"),
    "seg_cross_fitted": ("segments.thresholds=cross_fitted", *SEGMENT_INPUTS, *FITTED),
    # Above segments.cross_fit_max_documents: the held-out share instead of folds.
    "seg_cross_fitted_above_limit": (
        "segments.thresholds=cross_fitted",
        "segments.cross_fit_max_documents=10",
        "segments.held_out_share=0.25",
        *SEGMENT_INPUTS,
        *FITTED,
    ),
}
# Fields that measure this machine, not the model (they differ between any two runs).
MEASURED = {
    "train_seconds",
    "train_step_seconds",
    "train_tokens_per_second",
    "evaluation_seconds_during_training",
    "train_step_tokens_per_second",
    "peak_rss_mib",
    "eval_seconds",
    "seconds",
    "generation_seconds",
    "generated_tokens_per_second",
    "generation_seconds_per_document",
    "selector_seconds",
    "docs_per_second",
    "chars_per_second",
    "export_seconds",
    "created",
    "conditions",
    # the segment method's stages (a fold's training and scoring, the stack, scoring held-out documents)
    "training_seconds",
    "scoring_seconds",
    "folds_seconds",
    "stack",
    "scoring_held_out",
    "commit",  # the checkout each revision ran at (metrics.json's run record)
    "uncommitted_changes",
}
SERVE = """
import json, sys
from pathlib import Path
from toolkit.data.records import load_records
from toolkit.deploy.launch import Server
out = Path(sys.argv[1])
texts = [r.text for r in load_records("sample:contracts_dev", None)]
for port, name in enumerate(sys.argv[3:], start=int(sys.argv[2])):
    with Server(out / "exports" / name, port=port) as server:
        answers = [server.post("/extract", {"texts": [t]}) for t in texts]
    (out / f"served_{name}.json").write_text(json.dumps(answers, indent=1))
"""


def run_revision(repo: Path, rev: str, out: Path, port: int, keep: bool = False) -> None:
    """Every output of `rev` under `out`; `keep`: a step whose output is there from an earlier call is not run
    again."""
    tree = out / "tree"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--force", "--detach", str(tree), rev], check=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}

    def toolkit(*args: str, log: str, check: bool = True, output: Path | None = None) -> int:
        if keep and output is not None and output.exists():
            return 0
        with open(out / f"{log}.log", "w") as handle:
            done = subprocess.run(
                [sys.executable, "-m", "toolkit", *args], cwd=tree, env=env, stdout=handle, stderr=handle
            )
        if check and done.returncode:
            raise SystemExit(f"{rev}: toolkit {' '.join(args)} failed; see {out / log}.log")
        return done.returncode

    runs, dev = out / "runs", "sample:contracts_dev"
    dev_file = str(tree / "toolkit" / "data" / "sample" / "contracts_dev.jsonl")  # predict reads files
    for name in RECIPES:
        done = runs / name / "metrics.json"
        toolkit("run", f"recipes/{name}.yaml", f"output_dir={runs}", "--overwrite", log=name, output=done)
    for name, overrides in SEGMENT_MODES.items():
        done = runs / name / "metrics.json"
        recipe = "recipes/demo_segments_mlm.yaml"
        toolkit("run", recipe, *overrides, f"output_dir={runs}", f"name={name}", "--overwrite", log=name, output=done)
    # The linear baseline: `--linear-baseline` since the task registry, `model.name=linear` before it.
    segments = ("run", "recipes/demo_segments_mlm.yaml", f"output_dir={runs}", "--overwrite", "name=demo_linear")
    if toolkit(*segments, "--linear-baseline", log="linear", check=False, output=runs / "demo_linear" / "metrics.json"):
        toolkit(*segments, "model.name=linear", log="linear")
    for name, (recipe, *overrides) in PRETRAIN.items():
        done = runs / name / "metrics.json"
        toolkit("run", recipe, *overrides, f"output_dir={runs}", f"name={name}", "--overwrite", log=name, output=done)
    toolkit("eval", str(runs / "demo_mlm"), "--data", dev, "--out", str(out / "eval_mlm"), log="eval")
    toolkit(
        "compare", str(runs / "demo_mlm"), str(runs / "demo_segments_mlm"), "--data", dev, "--out",
        str(out / "compare"), log="compare",
    )  # fmt: skip
    predicted = out / "predict" / "run_mlm.jsonl"
    toolkit("predict", str(runs / "demo_mlm"), dev_file, "--out", str(predicted), log="predict")
    for name, (run, path) in EXPORTS.items():
        art = out / "exports" / name
        args = ("export", str(runs / run), "--out", str(art), "--precision", path, "--windows", "trained")
        if (out / "exports" / f"{name}.skipped").is_file():
            continue
        if toolkit(*args, log=f"export_{name}", check=False, output=art):
            (out / "exports").mkdir(exist_ok=True)
            (out / "exports" / f"{name}.skipped").write_text((out / f"export_{name}.log").read_text()[-2000:])
            continue
        toolkit("predict", str(art), dev_file, "--out", str(out / "predict" / f"{name}.jsonl"), log=f"predict_{name}")
    served = [name for name in SERVED if (out / "exports" / name).is_dir()]
    subprocess.run([sys.executable, "-c", SERVE, str(out), str(port), *served], cwd=tree, env=env, check=True)
    (out / "done").write_text(rev)


# Fields a change may add to what it plans, and only there (issue 73: the evidence strategy the run takes and why).
ADDED = {"evidence_strategy"}


def without_measures(value):
    if isinstance(value, dict):
        return {k: ("<measured>" if k in MEASURED else without_measures(v)) for k, v in value.items() if k not in ADDED}
    if isinstance(value, list):
        return [without_measures(v) for v in value]
    return value


def _same_json(a: Path, b: Path, part: str | None = None) -> bool:
    ma, mb = json.loads(a.read_text()), json.loads(b.read_text())
    if part:
        ma, mb = ma.get(part), mb.get(part)
    return json.dumps(without_measures(ma), indent=2) == json.dumps(without_measures(mb), indent=2)


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.glob("*.safetensors"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest() if files else ""


def _same_rows(a: Path, b: Path, base: Path, head: Path) -> bool:
    """Prediction rows byte for byte, once each row's source path (the revision's own worktree) reads alike."""
    return a.read_bytes().replace(str(base).encode(), b"<out>") == b.read_bytes().replace(str(head).encode(), b"<out>")


def compare_outputs(base: Path, head: Path) -> list[str]:
    """One line per output compared: 'same' or what differs."""
    lines = []
    places = [f"runs/{name}" for name in (*RECIPES, *SEGMENT_MODES, "demo_linear", *PRETRAIN)] + ["eval_mlm"]
    for place in places:
        for name in ("predictions.jsonl", "hallucinations.jsonl", "metrics.json", "data_report.json"):
            a, b = base / place / name, head / place / name
            if not a.is_file() and not b.is_file():
                continue
            if not (a.is_file() and b.is_file()):
                lines.append(f"{place}/{name}: only in {'base' if a.is_file() else 'head'}")
            elif name in ("metrics.json", "data_report.json"):
                same = _same_json(a, b)
                lines.append(f"{place}/{name}: {'same bytes but measured time and memory' if same else 'DIFFERENT'}")
            else:
                lines.append(f"{place}/{name}: {'same bytes' if a.read_bytes() == b.read_bytes() else 'DIFFERENT'}")
        if (base / place / "model").is_dir():
            same = _digest(base / place / "model") == _digest(head / place / "model")
            lines.append(f"{place}/model weights: {'same bytes' if same else 'DIFFERENT'}")
    for name in EXPORTS:
        a, b = base / "exports" / name, head / "exports" / name
        if not a.is_dir() or not b.is_dir():
            skipped = a.with_suffix(".skipped").is_file() and b.with_suffix(".skipped").is_file()
            lines.append(f"export {name}: {'skipped in both' if skipped else 'DIFFERENT (built in one only)'}")
            continue
        same = _same_json(a / "manifest.json", b / "manifest.json", "parity")
        lines.append(f"export {name} manifest parity: {'same but measured' if same else 'DIFFERENT'}")
        pa, pb = base / "predict" / f"{name}.jsonl", head / "predict" / f"{name}.jsonl"
        lines.append(f"predict {name}: {'same bytes' if _same_rows(pa, pb, base, head) else 'DIFFERENT'}")
    a, b = base / "predict" / "run_mlm.jsonl", head / "predict" / "run_mlm.jsonl"
    lines.append(f"predict run_mlm: {'same bytes' if _same_rows(a, b, base, head) else 'DIFFERENT'}")
    for name in SERVED:
        fa, fb = base / f"served_{name}.json", head / f"served_{name}.json"
        if not fa.is_file() and not fb.is_file():
            continue
        served_a, served_b = json.loads(fa.read_text()), json.loads(fb.read_text())
        ok = all(status == 200 for status, _ in served_a + served_b)
        spans = [answer["results"] for _, answer in served_a] == [answer["results"] for _, answer in served_b]
        lines.append(f"served {name} ({len(served_a)} requests): {'same spans' if ok and spans else 'DIFFERENT'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision before the change")
    parser.add_argument("--head", default="HEAD", help="the revision after it")
    parser.add_argument("--out", type=Path, default=Path("/tmp/output_parity"))
    parser.add_argument(
        "--reuse", action="store_true", help="keep a revision's outputs from an earlier call (a finished step each)"
    )
    parser.add_argument("--only", choices=("base", "head"), help="run one revision (then compare when both exist)")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    revs = [(args.base, 3321), (args.head, 3322)]
    if args.only:
        revs = [revs[0] if args.only == "base" else revs[1]]
    try:
        for rev, port in revs:
            if not (args.reuse and (args.out / rev / "done").is_file()):
                if not args.reuse:
                    subprocess.run(["rm", "-rf", str(args.out / rev)], check=True)
                (args.out / rev).mkdir(parents=True, exist_ok=True)
                run_revision(repo, rev, args.out / rev, port, keep=args.reuse)
    finally:
        for rev, _ in revs:
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(args.out / rev / "tree")], check=False
            )
    if not all((args.out / rev / "done").is_file() for rev in (args.base, args.head)):
        return
    lines = compare_outputs(args.out / args.base, args.out / args.head)
    print("\n".join(lines))
    sys.exit(1 if any("DIFFERENT" in line or "only in" in line for line in lines) else 0)


if __name__ == "__main__":
    main()
