"""`toolkit predict` on a folder whose small files come before huge ones: when the first row is written,
and the run's peak memory.

    .venv/bin/python bench/predict_first_row.py ARTIFACT [--pages 1000] [--paragraphs 30000] [--small 8]

The folder holds --small short .txt files (named a_*), then a PDF of --pages pages (b_big.pdf) and a DOCX
of --paragraphs paragraphs (c_big.docx). `toolkit predict` runs as a user runs it; the output is polled
every 0.1 s for its first row, and the process's RSS (children included) for its peak. Results: printed,
and written to bench/out/predict_first_row.json with the CPU's flags.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from document_files import make_docx, make_pdf  # noqa: E402

from toolkit.hardware import benchmark_header  # noqa: E402

LINE = "The Supplier shall deliver the Goods within thirty (30) days of the Purchase Order date."


def main() -> None:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--paragraphs", type=int, default=30_000)
    parser.add_argument("--small", type=int, default=8)
    args = parser.parse_args()
    header = benchmark_header()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        for i in range(args.small):
            (folder / f"a_{i:02d}.txt").write_text(f"{LINE} This Agreement is governed by the laws of Delaware.\n")
        make_pdf(folder / "b_big.pdf", ["\n".join([LINE] * 12)] * args.pages)
        make_docx(folder / "c_big.docx", [LINE[: 20 + i % 60] for i in range(args.paragraphs)])
        out = Path(tmp) / "out.jsonl"
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "toolkit"), "predict", str(args.artifact), str(folder), "-o", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        first_row = None
        rows_at: dict[int, float] = {}
        peak = 0
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
                peak = max(peak, rss)
            except psutil.NoSuchProcess:
                pass
            if out.exists():
                n = out.read_bytes().count(b"\n")
                if n and first_row is None:
                    first_row = time.monotonic() - started
                rows_at.setdefault(n, time.monotonic() - started)
            time.sleep(0.1)
        total = time.monotonic() - started
        rows = out.read_bytes().count(b"\n")
        summary = proc.stdout.read().decode(errors="replace").strip() if proc.stdout else ""
    result = {
        "small_files": args.small,
        "pdf_pages": args.pages,
        "docx_paragraphs": args.paragraphs,
        "first_row_s": round(first_row, 1) if first_row is not None else None,
        "all_small_rows_s": round(min((t for n, t in rows_at.items() if n >= args.small), default=-1), 1),
        "total_s": round(total, 1),
        "rows": rows,
        "peak_rss_mib": round(peak / 2**20),
        "exit_code": proc.returncode,
        "summary": summary,
    }
    print(json.dumps(result, indent=2))
    path = ROOT / "bench" / "out" / "predict_first_row.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    command = "bench/predict_first_row.py " + " ".join(sys.argv[1:])
    path.write_text(json.dumps({"command": command, "machine": header, "result": result}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
