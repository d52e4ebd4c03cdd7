"""The segment threshold sweep's cost (`evaluate.thresholds.threshold_counts`, what every threshold choice,
AUPR and held-out test of a segment run calls) on real contracts: seconds for N CUAD dev contracts over
every label they hold, with smooth random probabilities per label (runs of every length, up to the whole
contract near threshold 0). Prints a checksum of the counts: run it at two revisions (a git worktree) to
compare their speed, and the checksums must be equal.

    .venv/bin/python bench/sweep_bench.py [--documents 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEV = ROOT / ".." / "shared" / "data" / "cuad" / "dev.jsonl"


def inputs(n_documents: int, seed: int = 0):
    from toolkit.data.records import load_records
    from toolkit.spans.segments import segment_text

    records = load_records(str(DEV), max_docs=n_documents)
    labels = sorted({s.label for r in records for s in r.spans})
    rng = np.random.default_rng(seed)
    texts, golds, segments, probs, starts = [], [], [], [], []
    for r in records:
        segs = segment_text(r.text)
        walk = np.cumsum(rng.normal(0, 0.6, size=(len(segs), len(labels))), axis=0)
        texts.append(r.text)
        segments.append(segs)
        probs.append(1 / (1 + np.exp(-(walk - walk.mean(0) - 2.0))))
        starts.append(rng.random((len(segs), len(labels))))
        golds.append(r.spans)
    return texts, golds, segments, probs, labels, starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not DEV.is_file():
        raise SystemExit(f"{DEV} not found: this benchmark reads CUAD dev from ../shared/data")
    from toolkit.evaluate.thresholds import threshold_counts
    from toolkit.hardware import benchmark_header

    header = benchmark_header()
    texts, golds, segments, probs, labels, starts = inputs(args.documents)
    seconds = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        counts = threshold_counts(texts, golds, segments, probs, labels, starts=starts)
        seconds.append(time.perf_counter() - t0)
    line = {
        "documents": len(texts),
        "labels": len(labels),
        "segments": sum(len(s) for s in segments),
        "median_s": round(statistics.median(seconds), 2),
        "seconds": [round(s, 2) for s in seconds],
        "counts_sha256": hashlib.sha256(np.ascontiguousarray(counts, dtype=np.int64).tobytes()).hexdigest()[:16],
        "cpu": header["cpu"],
        "cpu_flags": header["cpu_flags"],
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
