"""Export and serving benchmarks (not CI): PyTorch vs ONNX fp32 vs ONNX int8, and the service under load.

    .venv/bin/python bench/serve_bench.py models  RUN  --data DEV.jsonl     # latency, docs/s, span F1 per variant
    .venv/bin/python bench/serve_bench.py headline RUN --data DEV.jsonl     # the chosen path vs the HF pipeline fp32,
        [--rounds 5] [--interleave document|block|round]                    documents through both paths in turn
    .venv/bin/python bench/serve_bench.py service RUN  --data DEV.jsonl     # 1/8/32/64 closed-loop clients; answers vs
    single requests
        [--seconds 1200] [--model-threads 1 2] [--batch 32]                 # a soak; thread counts; docs/s against
        in-process batching
    .venv/bin/python bench/serve_bench.py stop    RUN  --data DEV.jsonl     # SIGTERM to `toolkit serve`, idle and under
    load, --tries 10
    .venv/bin/python bench/serve_bench.py clm     RUN                       # decoding tokens/s, PyTorch vs ONNX

Artifacts are exported (parity-gated) under bench/out/artifacts/<run>-{fp32,int8} and reused.
Results are printed as JSON and written to bench/out/serve_<mode>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "out"


def artifact(run: Path, precision: str) -> Path:
    from toolkit.deploy.export import export_run

    out = RESULTS / "artifacts" / f"{run.name}-{precision}"
    if not (out / "manifest.json").is_file():
        export_run(run, out, precision=precision, parity_docs=100)
    return out


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def latency_stats(seconds: list[float]) -> dict:
    return {
        "p50_ms": round(1000 * statistics.median(seconds), 1),
        "p95_ms": round(1000 * percentile(seconds, 95), 1),
        "docs_per_s": round(len(seconds) / sum(seconds), 2),
    }


def f1_of(records, predictions) -> float:
    from toolkit.evaluate.scorer import score

    return round(
        score([r.text for r in records], [r.spans for r in records], predictions, bootstrap=0)["summary"]["span_f1"], 4
    )


def pipeline_spans(pipe, text: str):
    from toolkit.spans.decoding import PredictedSpan

    return [PredictedSpan(int(e["start"]), int(e["end"]), e["entity_group"], float(e["score"])) for e in pipe(text)]


def bench_models(run: Path, data: str, max_docs: int | None, repeat: int) -> dict:
    """Single-document latency (one document per call, as a request would) for each variant.

    The HF pipeline aggregates with strategy "first" (a word takes its first sub-token's tag),
    which is how toolkit models are trained; "simple" reads every sub-token's own tag.
    """
    import torch
    from optimum.onnxruntime import ORTModelForTokenClassification
    from transformers import AutoModelForTokenClassification, pipeline

    from toolkit.infer.tagger import Tagger
    from toolkit.models.pretrained import load_tokenizer
    from toolkit.rundir import open_run, records_for

    records = records_for(open_run(run), data, max_docs)
    texts = [r.text for r in records]
    tokenizer = load_tokenizer(str(run / "model"))
    variants = {
        "pytorch": (run, AutoModelForTokenClassification.from_pretrained(run / "model")),
        "onnx_fp32": (artifact(run, "fp32"), None),
        "onnx_int8": (artifact(run, "int8"), None),
        "pytorch_bf16": (run, None),  # the toolkit Tagger under bf16 autocast; the pipeline row is plain fp32 PyTorch
        # OpenVINO artifacts run only through the toolkit's Tagger (the HF pipeline takes no OpenVINO model here).
        "openvino_fp32": (artifact(run, "openvino_fp32"), None),
        "openvino_bf16": (artifact(run, "openvino_bf16"), None),
        # The path `toolkit export` (--precision auto) chose on this machine, loaded as the service loads it.
        "chosen": (artifact(run, "auto"), None),
    }
    out: dict = {"documents": len(texts), "torch_threads": torch.get_num_threads(), "repeat": repeat, "cpu": cpu_line()}
    print(out["cpu"], flush=True)
    for name, (path, model) in variants.items():
        runtime = json.loads((path / "manifest.json").read_text())["runtime"] if path != run else "pytorch"
        if runtime == "pytorch":
            model = variants["pytorch"][1]
        if model is None and runtime == "onnx":
            model = ORTModelForTokenClassification.from_pretrained(path, file_name="model.onnx")
        pipe = None
        if model is not None:
            pipe = pipeline(
                "token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="first", device="cpu"
            )
        tagger = Tagger.load(path)
        if name == "pytorch_bf16":
            tagger.autocast = "bfloat16"
        if name == "chosen":
            out["chosen_path"] = json.loads((path / "manifest.json").read_text())["path"]
        calls = {"toolkit_tagger": lambda text, t=tagger: t.predict([text])[0]}
        if pipe is not None:
            calls = {"hf_pipeline": lambda text, p=pipe: pipeline_spans(p, text), **calls}
        timings: dict[str, list[float]] = {kind: [] for kind in calls}
        preds: dict[str, list] = {kind: [] for kind in calls}
        # One path at a time over all documents: interleaving two onnxruntime sessions lets one
        # session's spinning threads take the cores from the other's next call.
        for kind, call in calls.items():
            call(texts[0])  # warm-up
            for r in range(repeat):
                for text in texts:
                    t = time.perf_counter()
                    spans = call(text)
                    timings[kind].append(time.perf_counter() - t)
                    if r == 0:
                        preds[kind].append(spans)
        out[name] = {
            **{kind: {**latency_stats(timings[kind]), "span_f1": f1_of(records, preds[kind])} for kind in calls},
            "window_limit": tagger.window_limit,
            "model_bytes": sum(p.stat().st_size for p in Path(path).rglob("*.onnx"))
            or sum(p.stat().st_size for p in Path(path).rglob("openvino_model.bin"))
            or next(Path(path).rglob("model.safetensors")).stat().st_size,
        }
        print(name, json.dumps(out[name]), flush=True)
    for kind in ("hf_pipeline", "toolkit_tagger"):
        base = out["pytorch"][kind]["p50_ms"]
        out[f"speedup_p50_{kind}"] = {v: round(base / out[v][kind]["p50_ms"], 2) for v in variants if kind in out[v]}
    # The toolkit's paths against the plain Hugging Face pipeline in PyTorch fp32 (the baseline a user starts from).
    base = out["pytorch"]["hf_pipeline"]["p50_ms"]
    out["tagger_vs_hf_pipeline_fp32_p50"] = {v: round(base / out[v]["toolkit_tagger"]["p50_ms"], 2) for v in variants}
    return out


HEADLINE_BLOCK = 8  # documents a path reads in a row in the headline's "block" interleaving


def bench_headline(run: Path, data: str, max_docs: int | None, rounds: int, interleave: str = "document") -> dict:
    """Issue 30's headline ratio, robust to a host whose speed drifts: the HF pipeline in PyTorch fp32 and the
    path `toolkit export --precision auto` chose, over the same documents one per call, in rounds. The median
    of the rounds' ratios is the figure. `models` times each path once, in turn, so a host that slows between
    paths moves its ratios.

    interleave "document": within a round each document goes through both paths back to back (the order
    swapped every document), so the two timings of a document are a tenth of a second apart and a host that
    changes speed within a round slows both alike. "block": the same with HEADLINE_BLOCK documents a turn, so a
    runtime's threads that are still spinning after its call meet the other runtime once a block, not once a
    document. "round": a pass of every document through one path, then the other (the method of the earlier
    sessions; its passes are seconds apart)."""
    from transformers import AutoModelForTokenClassification, pipeline

    from toolkit.infer.tagger import Tagger
    from toolkit.models.pretrained import load_tokenizer
    from toolkit.rundir import open_run, records_for

    records = records_for(open_run(run), data, max_docs)
    texts = [r.text for r in records]
    chosen = artifact(run, "auto")
    pipe = pipeline(
        "token-classification",
        model=AutoModelForTokenClassification.from_pretrained(run / "model"),
        tokenizer=load_tokenizer(str(run / "model")),
        aggregation_strategy="first",
        device="cpu",
    )
    tagger = Tagger.load(chosen)
    calls = {
        "hf_pipeline_fp32": lambda text: pipeline_spans(pipe, text),
        "chosen": lambda text: tagger.predict([text])[0],
    }
    out: dict = {
        "documents": len(texts),
        "cpu": cpu_line(),
        "chosen_path": json.loads((chosen / "manifest.json").read_text())["path"],
        "window_limit": tagger.window_limit,
        "rounds": [],
    }
    print(out["cpu"], "chosen:", out["chosen_path"], "window limit:", out["window_limit"], flush=True)
    predictions: dict[str, list] = {}
    for kind, call in calls.items():
        predictions[kind] = [call(text) for text in texts]  # warm-up pass, and the spans scored
        out[f"{kind}_span_f1"] = f1_of(records, predictions[kind])
    out["interleave"] = interleave
    kinds = list(calls)
    step = {"document": 1, "block": HEADLINE_BLOCK, "round": len(texts)}[interleave]
    for r in range(rounds):
        seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
        for i in range(0, len(texts), step):
            for kind in kinds if (i // step) % 2 == 0 else kinds[::-1]:
                for text in texts[i : i + step]:
                    t = time.perf_counter()
                    calls[kind](text)
                    seconds[kind].append(time.perf_counter() - t)
        row = {kind: latency_stats(seconds[kind]) for kind in kinds}
        # Per document: the pipeline's time over the chosen path's (a pair timed together in document mode).
        row["median_document_ratio"] = round(
            statistics.median(a / b for a, b in zip(seconds["hf_pipeline_fp32"], seconds["chosen"])), 2
        )
        row["ratio_p50"] = round(row["hf_pipeline_fp32"]["p50_ms"] / row["chosen"]["p50_ms"], 2)
        row["ratio_docs_per_s"] = round(row["chosen"]["docs_per_s"] / row["hf_pipeline_fp32"]["docs_per_s"], 2)
        out["rounds"].append(row)
        print(f"round {r + 1}", json.dumps(row), flush=True)
    out["median_ratio_p50"] = statistics.median(r["ratio_p50"] for r in out["rounds"])
    out["median_ratio_docs_per_s"] = statistics.median(r["ratio_docs_per_s"] for r in out["rounds"])
    out["median_document_ratio"] = statistics.median(r["median_document_ratio"] for r in out["rounds"])
    return out


def tree_rss_mib(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return round(sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20, 1)


def in_process_docs_per_s(art: Path, texts: list[str], batch: int, threads: int) -> float:
    """The same model's batched speed without the service: the artifact's predictor on the same
    documents, `batch` at a time, with the service's thread count (the ceiling the service is held to)."""
    from toolkit.hardware import set_inference_threads
    from toolkit.infer import load_predictor

    set_inference_threads(threads)  # PyTorch's threads at once, ONNX Runtime's for the session loaded below
    predictor = load_predictor(art)
    predictor.predict(texts[:batch])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        predictor.predict(texts[i : i + batch])
    return round(len(texts) / (time.perf_counter() - started), 2)


def _load(server, texts: list[str], single: dict, n: int, requests_per_client: int, seconds: float | None) -> dict:
    """`n` closed-loop clients, each sending single-document requests until it has sent
    `requests_per_client` or `seconds` have passed; every answer compared with the single-request one."""
    examples: dict[str, str] = {}  # the first answer of each error status: what went wrong
    deadline = time.perf_counter() + seconds if seconds else None

    def client(k: int) -> list[tuple[int | str, float, bool]]:
        got, i = [], 0
        while (i < requests_per_client) if deadline is None else (time.perf_counter() < deadline):
            text = texts[(k * 7919 + i) % len(texts)]
            i += 1
            t = time.perf_counter()
            try:
                status, body = server.post("/extract", {"text": text})
            except OSError as exc:  # a timeout or a dropped connection is an error to count, not a crash
                status, body = f"{type(exc).__name__}", {}
            if status != 200:
                examples.setdefault(str(status), json.dumps(body)[:300])
            got.append((status, time.perf_counter() - t, status == 200 and body["spans"] == single[text]))
        return got

    started = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        results = [x for chunk in pool.map(client, range(n)) for x in chunk]
    wall = time.perf_counter() - started
    ok = [s for status, s, _ in results if status == 200]
    statuses: dict[str, int] = {}
    for status, _, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "clients": n,
        "seconds": round(wall, 1),
        "requests": len(results),
        "errors": len(results) - len(ok),
        "statuses": statuses,
        "error_examples": examples,
        "answers_equal_single": sum(same for *_, same in results),
        "docs_per_s": round(len(ok) / wall, 2),
        "p50_ms": round(1000 * statistics.median(ok), 1) if ok else None,
        "p95_ms": round(1000 * percentile(ok, 95), 1) if ok else None,
        "p99_ms": round(1000 * percentile(ok, 99), 1) if ok else None,
    }


def _log_counts(log: Path) -> dict:
    """Model calls and request ids in the service log: every answered request appears in one batch line."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    batches = [line for line in text.splitlines() if "batch of " in line]
    in_batches = sum(int(line.split("batch of ")[1].split(" ")[0]) for line in batches)
    return {
        "model_calls": len(batches),
        "requests_in_model_calls": in_batches,
        "tracebacks": text.count("Traceback"),
        "warnings": text.count("WARNING"),
    }


def bench_service(
    run: Path,
    data: str,
    requests_per_client: int,
    clients: list[int],
    precision: str,
    seconds: float | None,
    threads: list[int],
    batch: int,
) -> dict:
    """Closed-loop clients against the service (in-process batching at `batch` documents per model
    call), for each model thread count; each load's docs/s against the same model's in-process batched
    docs/s on the same documents, measured in the same run."""
    from toolkit.data.records import load_records
    from toolkit.deploy.launch import Server, free_port

    art = artifact(run, precision)
    texts = [r.text for r in load_records(data)]
    out: dict = {
        "artifact": str(art),
        "requests_per_client": requests_per_client,
        "seconds_per_load": seconds,
        "documents": len(texts),
        "cpu": cpu_line(),
    }
    import torch

    for n_threads in threads:
        # 0: the service's default (the runtime's own thread count), measured in process the same way.
        ceiling = in_process_docs_per_s(art, texts, batch, n_threads or torch.get_num_threads())
        log = RESULTS / f"serve_{precision}_threads{n_threads}.log"
        limits = {"model_threads": n_threads} if n_threads else {}
        with Server(art, port=free_port(), log=log, max_batch_size=batch, **limits) as server:
            single = {}
            for t in texts:  # one at a time: the reference answers
                status, body = server.post("/extract", {"text": t})
                assert status == 200, body
                single[t] = body["spans"]
            for n in clients:
                before = _log_counts(log)
                row = _load(server, texts, single, n, requests_per_client, seconds)
                after = _log_counts(log)
                row.update(
                    {
                        "model_threads": n_threads,
                        "in_process_docs_per_s": ceiling,
                        "vs_in_process": round(row["docs_per_s"] / ceiling, 3),
                        "model_calls": after["model_calls"] - before["model_calls"],
                        "requests_in_model_calls": after["requests_in_model_calls"] - before["requests_in_model_calls"],
                        "log_tracebacks": after["tracebacks"],
                        "server_rss_mib": tree_rss_mib(server.process.pid),
                    }
                )
                out[f"threads_{n_threads}_clients_{n}"] = row
                print(precision, json.dumps(row), flush=True)
    return out


def bench_stop(run: Path, data: str, precision: str, tries: int, clients: int) -> dict:
    """`toolkit serve` stopped by SIGTERM, idle and under load: seconds until every process of its tree
    is gone and the port is free, and what the clients in flight got."""
    import signal
    import socket
    import threading
    import urllib.request

    import psutil

    from toolkit.data.records import load_records
    from toolkit.deploy.launch import free_port, start_toolkit_serve

    art = artifact(run, precision)
    texts = [r.text for r in load_records(data)]
    out: dict = {"artifact": str(art), "tries": tries, "clients": clients}
    for loaded in (False, True):
        times, in_flight, at_signal = [], {}, {}
        for _ in range(tries):
            port = free_port()
            proc = start_toolkit_serve(art, port)
            stop, threads = threading.Event(), []
            if loaded:
                url = f"http://127.0.0.1:{port}"

                signalled: list[float] = []

                def client(
                    k: int, stop=stop, url=url, in_flight=in_flight, at_signal=at_signal, signalled=signalled
                ) -> None:
                    i = 0
                    while not stop.is_set():
                        sent = time.monotonic()
                        req = urllib.request.Request(
                            url + "/extract", data=json.dumps({"text": texts[(k + i) % len(texts)]}).encode()
                        )
                        req.add_header("Content-Type", "application/json")
                        try:
                            with urllib.request.urlopen(req, timeout=30) as resp:
                                key = str(resp.status)
                        except urllib.error.HTTPError as exc:
                            key = str(exc.code)
                        except OSError as exc:
                            key = type(getattr(exc, "reason", exc)).__name__
                            time.sleep(0.1)  # the service is gone or going: do not spin on refusals
                        in_flight[key] = in_flight.get(key, 0) + 1
                        if signalled and sent < signalled[0] <= time.monotonic():  # in flight when the SIGTERM came
                            at_signal[key] = at_signal.get(key, 0) + 1
                        i += 1

                threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
                for t in threads:
                    t.start()
                time.sleep(3)
            family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            started = time.monotonic()
            if loaded:
                signalled.append(started)
            proc.send_signal(signal.SIGTERM)
            psutil.wait_procs(family, timeout=60)
            while True:  # the port is free once nothing listens on it
                with socket.socket() as sock:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        sock.bind(("127.0.0.1", port))
                        break
                    except OSError:
                        time.sleep(0.05)
            times.append(round(time.monotonic() - started, 2))
            stop.set()
            for t in threads:
                t.join()
        key = "under_load" if loaded else "idle"
        out[key] = {
            "seconds": times,
            "max_seconds": max(times),
            "median_seconds": statistics.median(times),
            "client_outcomes": in_flight,
            "requests_in_flight_at_sigterm": at_signal,
        }
        print(key, json.dumps(out[key]), flush=True)
    return out


def cpu_line() -> str:
    """The CPU model and the vector/matrix flags that decide which path is fastest."""
    import subprocess

    info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("Model name")), "?")
    flags = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8") if f" {f}" in info]
    return f"{model}; {' '.join(flags)}"


def bench_clm(run: Path, max_docs: int, constrained: bool) -> dict:
    from toolkit.infer import load_predictor
    from toolkit.rundir import open_run, records_for

    source = open_run(run)
    records = records_for(source, source.recipe.data.dev, max_docs)
    texts = [r.text for r in records]
    out: dict = {"documents": len(texts), "constrained": constrained}
    for name, path in (("pytorch", run), ("onnx_fp32", artifact(run, "fp32"))):
        system = load_predictor(path)
        system.predict(texts[:1], constrained=constrained)  # warm-up
        predictions = system.predict(texts, constrained=constrained)
        report = system.last_report
        out[name] = {
            "seconds": report["seconds"],
            "generated_tokens": report["generated_tokens"],
            "tokens_per_s": report["generated_tokens_per_second"],
            "span_f1": f1_of(records, predictions),
            "hallucinated": report["hallucinated_spans"],
        }
        print(name, json.dumps(out[name]), flush=True)
    out["speedup_tokens_per_s"] = round(out["onnx_fp32"]["tokens_per_s"] / out["pytorch"]["tokens_per_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["models", "headline", "service", "clm", "stop"])
    ap.add_argument("run", type=Path)
    ap.add_argument("--data", default=None)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5, help="headline: rounds over every document")
    ap.add_argument(
        "--interleave",
        default="document",
        choices=["document", "block", "round"],
        help="headline: each document through both paths back to back, 8 documents a turn, or a pass per path",
    )
    ap.add_argument("--requests-per-client", type=int, default=10)
    ap.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="service: each load runs this long (a soak) instead of a request count",
    )
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument(
        "--model-threads",
        type=int,
        nargs="+",
        default=[0],
        help="service: the model's intra-op threads, one service per value (0: its default)",
    )
    ap.add_argument(
        "--batch", type=int, default=32, help="service: documents per model call (the service's --max-batch-size)"
    )
    ap.add_argument("--tries", type=int, default=10, help="stop: SIGTERMs idle and under load")
    from toolkit.deploy.paths import ALIASES, PATHS

    # Any path the export registry knows, by name or short alias: `auto` may choose different paths for two
    # models, and a same-path comparison names one.
    ap.add_argument("--precision", default="int8", choices=[*ALIASES, *PATHS, "auto"])
    ap.add_argument("--constrained", action="store_true")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    from toolkit.hardware import benchmark_header

    machine = benchmark_header()
    if args.mode == "models":
        result = bench_models(args.run, args.data, args.max_docs, args.repeat)
    elif args.mode == "headline":
        result = bench_headline(args.run, args.data, args.max_docs, args.rounds, args.interleave)
    elif args.mode == "service":
        result = bench_service(
            args.run,
            args.data,
            args.requests_per_client,
            args.clients,
            args.precision,
            args.seconds,
            args.model_threads,
            args.batch,
        )
    elif args.mode == "stop":
        result = bench_stop(args.run, args.data, args.precision, args.tries, max(args.clients))
    else:
        result = bench_clm(args.run, args.max_docs or 8, args.constrained)
    result["command"] = " ".join(sys.argv)
    result["machine"] = machine
    (RESULTS / f"serve_{args.mode}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
