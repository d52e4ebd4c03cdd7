"""Batched prediction of an exported tagger against the matmul peak of its precision, on this machine.

    .venv/bin/python bench/predict_peak.py ARTIFACT --data ../shared/data/ncbi_disease/dev.jsonl [--rounds 3] \
        [--out bench/out/predict_peak.json]

Per round, alternating: the artifact's batched predict (16 documents a call, as `toolkit predict` sends
them) with OpenVINO's windows spread over one stream per thread, and the same on one two-thread stream (`one
stream`, the path before the streams); the streams' model calls alone (`streams, model only`: the same
windows cut beforehand, no tokenizing or decoding timed), which shows the share lost outside the model; then
`toolkit predict`'s whole local path (reading, JSON writing included), in this process and as the command a
user types (a new process: imports, loading and compiling included). Reports medians, the FLOP count per
document (2 x parameters outside the embeddings per token, plus the attention products, over the windows'
real tokens: padding is not counted as work), the achieved GFLOP/s, and the largest rate a plain matmul of
the artifact's precision reaches here, measured in every round beside the modes (PyTorch: bf16 or fp32 `mm`,
int8 `_int_mm`, at 1024-4096 square, `cpu_peaks.rate`: median of 7): each mode's share of the best round's peak, and the
median of its shares of its own round's peak. Every mode's spans must equal the first mode's. Run it alone:
a busy core changes the figures several-fold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cpu_peaks import rate, torch_calls  # noqa: E402

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.infer import load_predictor  # noqa: E402
from toolkit.infer.collection import predict_collection  # noqa: E402

BATCH = 16


def window_flops(config, outside_embeddings: int, tokens: int) -> tuple[float, float]:
    """(dense layers, attention products) work of one window of `tokens` real tokens."""
    return 2 * outside_embeddings * tokens, 4 * config.num_hidden_layers * config.hidden_size * tokens**2


def document_flops(config, outside_embeddings: int, windows) -> float:
    """Work of the windows' real tokens: dense layers plus the attention products."""
    return sum(sum(window_flops(config, outside_embeddings, len(w.input_ids))) for w in windows)


def matmul_peak(precision: str) -> tuple[float, int]:
    """(best GFLOP/s, its size) of a square PyTorch matmul in `precision` (int8: GOP/s of int8 x int8 -> int32),
    timed as `cpu_peaks.rate` times it."""
    key = "int8" if precision.startswith("int8") else "bf16" if precision == "bf16" else "fp32"
    return max((rate(torch_calls(n, (key,))[key], n), n) for n in (1024, 2048, 4096))


def predict_all(predictor, texts: list[str]) -> tuple[float, list]:
    started = time.perf_counter()
    spans = []
    for lo in range(0, len(texts), BATCH):
        spans += predictor.predict(texts[lo : lo + BATCH])
    return time.perf_counter() - started, [[(s.start, s.end, s.label, s.score) for s in doc] for doc in spans]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "predict_peak.json")
    args = parser.parse_args()
    machine = benchmark_header()
    texts = [json.loads(line)["text"] for line in args.data.read_text().splitlines() if line.strip()]
    predictor = load_predictor(args.artifact)
    precision = predictor.meta.export.precision if predictor.meta.export else "fp32"
    model = predictor.model
    streams = getattr(model, "streams", 1)
    modes = {"streams": streams, "one stream": 1} if hasattr(model, "logits_each") else {"as exported": streams}

    import torch
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.artifact)
    batches = [predictor.windows(texts[lo : lo + BATCH]) for lo in range(0, len(texts), BATCH)]
    windows = [w for batch in batches for w in batch]
    outside = _parameters_outside_embeddings(args.artifact, config)
    flops = document_flops(config, outside, windows) / len(texts)

    model_only = "streams, model only" if hasattr(model, "logits_each") else "model only"
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    seconds[model_only] = []
    seconds["toolkit predict"] = []
    seconds["toolkit predict command"] = []
    peaks: list[tuple[float, int]] = []
    reference = None
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            # The peak is measured in every round, beside the modes: this host's speed drifts within minutes,
            # so each round's share compares two figures taken together.
            peaks.append(matmul_peak(precision))
            for mode, threads in modes.items():
                if hasattr(model, "logits_each"):
                    model.streams = threads
                wall, spans = predict_all(predictor, texts)
                reference = reference or spans
                assert spans == reference, f"{mode}: spans differ from the first mode's"
                seconds[mode].append(wall)
            if hasattr(model, "logits_each"):
                model.streams = streams
            started = time.perf_counter()
            for batch in batches:
                predictor.logits(batch, BATCH)
            seconds[model_only].append(time.perf_counter() - started)
            out = Path(tmp) / f"predict_{k}.jsonl"
            started = time.perf_counter()
            summary = predict_collection(args.artifact, [args.data], out, batch_size=BATCH)
            seconds["toolkit predict"].append(time.perf_counter() - started)
            assert summary["predicted"] == len(texts) and summary["failed"] == 0, summary
            command = [sys.executable, "-m", "toolkit", "predict", str(args.artifact), str(args.data)]
            started = time.perf_counter()
            subprocess.run(
                [*command, "-o", str(out.with_suffix(".command.jsonl"))], check=True, capture_output=True, cwd=ROOT
            )
            seconds["toolkit predict command"].append(time.perf_counter() - started)
            assert out.with_suffix(".command.jsonl").read_bytes() == out.read_bytes(), "the command's spans differ"
    peak, size = max(peaks)
    print(f"\nartifact: {args.artifact} ({predictor.meta.export.path if predictor.meta.export else 'run'})")
    print(f"threads: {torch.get_num_threads()} (torch), OpenVINO streams: {streams}")
    real = sum(len(w.input_ids) for w in windows)
    pad = getattr(model, "pad_multiple", 1)
    padded = sum(-(-len(w.input_ids) // pad) * pad for w in windows)
    print(f"documents: {len(texts)}, windows: {len(windows)}, real tokens: {real}, padded to {pad}: {padded}")
    print(f"FLOP per document: {flops / 1e9:.2f} GFLOP ({outside / 1e6:.1f}M parameters outside the embeddings)")
    rounds_peak = ", ".join(f"{p:.0f}" for p, _ in peaks)
    print(f"{precision} matmul peak here: {peak:.0f} GFLOP/s at best ({size}^3, PyTorch); per round: {rounds_peak}\n")
    print("| mode | median s | docs/s | GFLOP/s | share of the best peak | median share of its round's peak |")
    print("|---|---|---|---|---|---|")
    result = {
        **machine,
        "artifact": str(args.artifact),
        "path": predictor.meta.export.path if predictor.meta.export else "run",
        "data": str(args.data),
        "documents": len(texts),
        "rounds": args.rounds,
        "precision": precision,
        "gflop_per_document": round(flops / 1e9, 3),
        "peak_gflops": round(peak, 1),
        "peak_per_round": [round(p, 1) for p, _ in peaks],
        "modes": {},
    }
    for mode, walls in seconds.items():
        wall = statistics.median(walls)
        rate = len(texts) / wall
        share = statistics.median(len(texts) * flops / w / 1e9 / p for w, (p, _) in zip(walls, peaks))
        print(
            f"| {mode} | {wall:.2f} | {rate:.1f} | {rate * flops / 1e9:.0f} | {rate * flops / 1e9 / peak:.0%} "
            f"| {share:.0%} |"
        )
        result["modes"][mode] = {
            "seconds": round(wall, 2),
            "docs_per_s": round(rate, 2),
            "gflops": round(rate * flops / 1e9, 1),
            "share_of_best_peak": round(rate * flops / 1e9 / peak, 4),
            "median_share_of_round_peak": round(share, 4),
        }
    print(f"\nCPU: {machine['cpu']}; flags: {' '.join(machine['cpu_flags'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def _parameters_outside_embeddings(artifact: Path, config) -> int:
    """Parameters of the encoder outside its embedding tables (the token-classification head included)."""
    import torch
    from transformers import AutoModelForTokenClassification

    with torch.device("meta"):
        model = AutoModelForTokenClassification.from_config(config)
    embeddings = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
    return sum(p.numel() for p in model.parameters()) - embeddings


if __name__ == "__main__":
    main()
