"""A long document read a group of windows at a time gives the whole-document path's spans: checked on
CUAD dev contracts (from ../shared/data) with a trained run or artifact.

    .venv/bin/python bench/long_document_parity.py MODEL [--documents 51] [--group 64] [--chunk-chars 200000] \
        [--threshold T] [--out bench/out/long_document_parity_<name>.json]

Every document is predicted twice by one predictor: whole (no document is streamed), and streamed (every
document is, in groups of --group windows and text pieces of --chunk-chars). Reported: documents whose
spans are equal as `toolkit predict` writes them (offsets, label, score to 4 decimals) and exactly (scores
as floats), spans on each side, and the largest score difference. Under PyTorch a window's logits can move
in the last bits with its batch's padding, and the groups batch other neighbours than the whole document
does, so exact float equality is expected only where windows run alone (OpenVINO) or all windows are one
length (ONNX Runtime's answers do not move with padding).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.hardware import benchmark_header  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("--documents", type=int, default=51)
    parser.add_argument("--group", type=int, default=64)
    parser.add_argument("--chunk-chars", type=int, default=200_000)
    parser.add_argument(
        "--threshold", type=float, help="a segment model: every label at this threshold (lower: more spans to compare)"
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from toolkit.infer import load_predictor

    dev = args.data / "cuad" / "dev.jsonl"
    if not dev.is_file():
        raise SystemExit(f"{dev} not found: this benchmark reads CUAD dev from ../shared/data (see its README)")
    header = benchmark_header()
    texts = [json.loads(line)["text"] for line in dev.open(encoding="utf-8")][: args.documents]
    predictor = load_predictor(args.model)
    if args.threshold is not None:
        predictor.thresholds = [args.threshold] * len(predictor.thresholds)
    predictor.long_document_chars = 10**12
    started = time.perf_counter()
    whole = predictor.predict(texts)
    whole_seconds = time.perf_counter() - started
    predictor.long_document_chars, predictor.group_windows, predictor.chunk_chars = 0, args.group, args.chunk_chars
    started = time.perf_counter()
    streamed = predictor.predict(texts)
    streamed_seconds = time.perf_counter() - started

    def written(text: str, spans) -> list[dict]:
        return [s.to_dict(text) for s in spans]

    score_gap = max(
        (abs(a.score - b.score) for w, s in zip(whole, streamed) if len(w) == len(s) for a, b in zip(w, s)),
        default=0.0,
    )
    result = {
        "model": str(args.model),
        **header,
        "documents": len(texts),
        "characters": sum(map(len, texts)),
        "group_windows": args.group,
        "chunk_chars": args.chunk_chars,
        "thresholds": getattr(predictor, "thresholds", None),
        "documents_equal_as_written": sum(written(t, w) == written(t, s) for t, w, s in zip(texts, whole, streamed)),
        "documents_equal_exactly": sum(w == s for w, s in zip(whole, streamed)),
        "spans_whole": sum(map(len, whole)),
        "spans_streamed": sum(map(len, streamed)),
        "largest_score_difference": score_gap,
        "seconds_whole": round(whole_seconds, 1),
        "seconds_streamed": round(streamed_seconds, 1),
        "report_streamed": {k: v for k, v in predictor.last_report.items() if k != "seconds"},
    }
    print(json.dumps(result), flush=True)
    out = args.out or ROOT / "bench" / "out" / f"long_document_parity_{Path(args.model).name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
