"""`toolkit serve --workers N`: documents a second at 64 closed-loop clients, and memory per worker.

    .venv/bin/python bench/serve_workers.py ARTIFACT [--data sample:contracts_dev] [--workers 1 2] [--seconds 30]

For each worker count the service starts alone (TOOLKIT_WORKERS=N; each worker's model gets cores / N
threads), 64 clients send one document per request for --seconds after a warm-up, and every answer is
checked against the same document's single-request answer. RSS is each worker process's, read after
the load. Results: printed, and written to bench/out/serve_workers.json with the CPU's flags.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.data.records import load_records  # noqa: E402
from toolkit.deploy.launch import Server, free_port  # noqa: E402
from toolkit.hardware import benchmark_header  # noqa: E402

CLIENTS = 64


def measure(artifact: Path, texts: list[str], workers: int, seconds: float) -> dict:
    import psutil

    with Server(artifact, port=free_port(), workers=workers) as server:
        single = {t: server.post("/extract", {"text": t})[1]["spans"] for t in texts}
        stop = time.monotonic() + seconds
        counts = {"ok": 0, "wrong": 0, "errors": 0}
        latencies: list[float] = []
        lock = threading.Lock()

        def client(k: int) -> None:
            i = k
            while time.monotonic() < stop:
                t = texts[i % len(texts)]
                i += CLIENTS
                started = time.perf_counter()
                status, body = server.post("/extract", {"text": t})
                took = time.perf_counter() - started
                with lock:
                    latencies.append(took)
                    if status != 200:
                        counts["errors"] += 1
                    elif body["spans"] != single[t]:
                        counts["wrong"] += 1
                    else:
                        counts["ok"] += 1

        began = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(client, range(CLIENTS)))
        elapsed = time.monotonic() - began
        procs = [
            p
            for p in psutil.Process(server.process.pid).children(recursive=True)
            if "_bentoml_impl.worker" in " ".join(p.cmdline())
        ]
        rss = sorted(round(p.memory_info().rss / 2**20) for p in procs)
    done = counts["ok"] + counts["wrong"] + counts["errors"]
    return {
        "workers": workers,
        "clients": CLIENTS,
        "seconds": round(elapsed, 1),
        "requests": done,
        **counts,
        "docs_per_second": round(counts["ok"] / elapsed, 2),
        "latency_p50_s": round(statistics.median(latencies), 3),
        "latency_p95_s": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 3),
        "worker_rss_mib": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--data", default="sample:contracts_dev")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    header = benchmark_header()
    texts = [r.text for r in load_records(args.data)]
    rows = []
    for n in args.workers:
        row = measure(args.artifact, texts, n, args.seconds)
        print(json.dumps(row), flush=True)
        rows.append(row)
    out = ROOT / "bench" / "out" / "serve_workers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "bench/serve_workers.py " + " ".join(sys.argv[1:])
    out.write_text(json.dumps({"command": command, "machine": header, "results": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
