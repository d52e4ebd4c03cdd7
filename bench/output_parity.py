"""Outputs of two revisions at the same seed, compared: a refactor's check that nothing a user sees moved.

    python bench/output_parity.py --base 3c7562d [--head HEAD] [--out /tmp/parity]

Each revision is checked out into its own worktree and runs, with its own code, the demo recipes
(`demo_mlm`, `demo_segments_mlm`, `demo_clm`), the segment recipe's linear baseline, `toolkit eval`,
`toolkit compare`, an ONNX export of the segment run, and the service over that export (one request per
dev document). Then, per run: predictions.jsonl and hallucinations.jsonl byte for byte, metrics.json
byte for byte once the fields that measure time or memory are set equal, and the served answers.
Exit 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RECIPES = ("demo_mlm", "demo_segments_mlm", "demo_clm")
# Fields of metrics.json that measure this machine, not the model (they differ between any two runs).
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
}
SERVE = """
import json, sys
from pathlib import Path
from toolkit.data.records import load_records
from toolkit.deploy.launch import Server
out = Path(sys.argv[1])
texts = [r.text for r in load_records("sample:contracts_dev", None)]
with Server(out / "art_seg", port=int(sys.argv[2])) as server:
    answers = [server.post("/extract", {"texts": [t]}) for t in texts]
(out / "served.json").write_text(json.dumps(answers, indent=1))
"""


def run_revision(repo: Path, rev: str, out: Path, port: int) -> None:
    tree = out / "tree"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--force", "--detach", str(tree), rev], check=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}

    def toolkit(*args: str, log: str, check: bool = True) -> int:
        with open(out / f"{log}.log", "w") as handle:
            done = subprocess.run(
                [sys.executable, "-m", "toolkit", *args], cwd=tree, env=env, stdout=handle, stderr=handle
            )
        if check and done.returncode:
            raise SystemExit(f"{rev}: toolkit {' '.join(args)} failed; see {out / log}.log")
        return done.returncode

    runs = out / "runs"
    for name in RECIPES:
        toolkit("run", f"recipes/{name}.yaml", f"output_dir={runs}", "--overwrite", log=name)
    # The linear baseline: `--linear-baseline` since the task registry, `model.name=linear` before it.
    segments = ("run", "recipes/demo_segments_mlm.yaml", f"output_dir={runs}", "--overwrite", "name=demo_linear")
    if toolkit(*segments, "--linear-baseline", log="linear", check=False):
        toolkit(*segments, "model.name=linear", log="linear")
    toolkit(
        "eval", str(runs / "demo_mlm"), "--data", "sample:contracts_dev", "--out", str(out / "eval_mlm"), log="eval"
    )
    toolkit(
        "compare",
        str(runs / "demo_mlm"),
        str(runs / "demo_segments_mlm"),
        "--data",
        "sample:contracts_dev",
        "--out",
        str(out / "compare"),
        log="compare",
    )
    toolkit(
        "export",
        str(runs / "demo_segments_mlm"),
        "--out",
        str(out / "art_seg"),
        "--precision",
        "onnx_fp32",
        log="export",
    )
    subprocess.run([sys.executable, "-c", SERVE, str(out), str(port)], cwd=tree, env=env, check=True)


def without_measures(value):
    if isinstance(value, dict):
        return {k: ("<measured>" if k in MEASURED else without_measures(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [without_measures(v) for v in value]
    return value


def compare_outputs(base: Path, head: Path) -> list[str]:
    """One line per file compared: 'same' or what differs."""
    lines = []
    places = [f"runs/{name}" for name in (*RECIPES, "demo_linear")] + ["eval_mlm"]
    for place in places:
        for name in ("predictions.jsonl", "hallucinations.jsonl", "metrics.json"):
            a, b = base / place / name, head / place / name
            if not a.is_file() and not b.is_file():
                continue
            if not (a.is_file() and b.is_file()):
                lines.append(f"{place}/{name}: only in {'base' if a.is_file() else 'head'}")
            elif name == "metrics.json":
                ma, mb = json.loads(a.read_text()), json.loads(b.read_text())
                same = json.dumps(without_measures(ma), indent=2) == json.dumps(without_measures(mb), indent=2)
                lines.append(f"{place}/{name}: {'same bytes but measured time and memory' if same else 'DIFFERENT'}")
            else:
                lines.append(f"{place}/{name}: {'same bytes' if a.read_bytes() == b.read_bytes() else 'DIFFERENT'}")
    served_a, served_b = json.loads((base / "served.json").read_text()), json.loads((head / "served.json").read_text())
    ok = all(status == 200 for status, _ in served_a + served_b)
    spans = [answer["results"] for _, answer in served_a] == [answer["results"] for _, answer in served_b]
    lines.append(f"served answers ({len(served_a)} requests): {'same spans' if ok and spans else 'DIFFERENT'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision before the change")
    parser.add_argument("--head", default="HEAD", help="the revision after it")
    parser.add_argument("--out", type=Path, default=Path("/tmp/output_parity"))
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    try:
        for rev, port in ((args.base, 3321), (args.head, 3322)):
            run_revision(repo, rev, args.out / rev, port)
    finally:
        for rev in (args.base, args.head):
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(args.out / rev / "tree")], check=False
            )
    lines = compare_outputs(args.out / args.base, args.out / args.head)
    print("\n".join(lines))
    sys.exit(1 if any("DIFFERENT" in line or "only in" in line for line in lines) else 0)


if __name__ == "__main__":
    main()
