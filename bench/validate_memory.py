"""Peak memory of streamed validation against the size of the file validated.

    .venv/bin/python bench/validate_memory.py [FILE]   (default: ../shared/data/cuad/train.jsonl)

Runs each variant in a fresh interpreter and reads its peak RSS (ru_maxrss):
- baseline: import the toolkit only;
- check: `toolkit check FILE --no-tokenizer --json` (validation + statistics, streamed);
- naive: json.loads of every line kept in a list (what a non-streaming reader holds).
Prints a JSON line with the medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO.parent / "shared" / "data" / "cuad" / "train.jsonl"

PROBE = """
import resource, sys, json
{body}
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
VARIANTS = {
    "baseline": "import toolkit.data.check, toolkit.data.validation",
    "check": "import io, contextlib\nfrom toolkit.cli import app\nbuf = io.StringIO()\n"
    "with contextlib.redirect_stdout(buf):\n"
    "    try:\n        app(['check', sys.argv[1], '--no-tokenizer', '--json'])\n"
    "    except SystemExit:\n        pass",
    "naive": "import toolkit.data.check\nrows = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]",
}


def peak_rss(body: str, path: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body), str(path)], capture_output=True, text=True, check=True, cwd=REPO
    )
    return int(out.stdout.strip().splitlines()[-1])


def scaled_copy(path: Path, copies: int) -> Path:
    """N copies with distinct ids and texts (so no duplicate warnings pile up), in a temp file."""
    import tempfile

    out = Path(tempfile.mkdtemp()) / f"{path.stem}_x{copies}.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        for k in range(copies):
            for line in path.open(encoding="utf-8"):
                rec = json.loads(line)
                rec["id"] = f"{rec['id']}#{k}"
                rec["text"] = rec["text"] + f" [{k}]"
                handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--scale", type=int, default=1, help="validate N renamed copies of FILE concatenated (a larger file)"
    )
    args = parser.parse_args()
    if not args.file.is_file():
        sys.exit(f"skipped: {args.file} not found (the public data lives in ../shared/data)")
    if args.scale > 1:
        args.file = scaled_copy(args.file, args.scale)
    size = args.file.stat().st_size
    peaks = {
        name: statistics.median(peak_rss(body, args.file) for _ in range(args.repeat))
        for name, body in VARIANTS.items()
    }
    mib = 1024 * 1024
    result = {
        "file": str(args.file),
        "file_mib": round(size / mib, 1),
        "peak_rss_mib": {k: round(v / mib, 1) for k, v in peaks.items()},
        "check_above_baseline_mib": round((peaks["check"] - peaks["baseline"]) / mib, 1),
        "naive_above_baseline_mib": round((peaks["naive"] - peaks["baseline"]) / mib, 1),
        "check_above_baseline_over_file_size": round((peaks["check"] - peaks["baseline"]) / size, 2),
        "check_total_over_file_size": round(peaks["check"] / size, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
