"""`toolkit predict` on one very long document: peak memory and characters per second against its size.

    .venv/bin/python bench/long_document.py MODEL [--sizes 5 20 50 100] [--split 20] [--jsonl 51] \
        [--pdf-pages 5000] [--out bench/out/long_document.json]

The text is CUAD dev contracts (from ../shared/data) one after another, repeated to the size asked
(1 MB = 10^6 characters). Cases, each `toolkit predict MODEL FILE -o OUT` in a fresh process, run as a user
runs it, under `/usr/bin/time -v` (the kernel's peak resident set size of the process):

- `single_<N>mb`: one .txt document of N MB;
- `split_<N>mb`: the same N MB as 1,000 documents of one JSONL file (the throughput a long document is
  held to);
- `jsonl_<N>mb`: one JSONL record of N MB (one line);
- `pdf_<P>pages`: a PDF of P pages, about 2,000 characters each (one document);
- `base64_<N>mb`: one .txt document of N MB of base64 (an attachment pasted as text: no whitespace at all);
- `cjk_<N>mb`: one .txt document of N MB of CJK text without spaces or line breaks (a contract's clauses in
  Chinese, repeated).

Each case prints one JSON line (peak RSS, seconds, characters per second, spans written, and the model's tokens
per character, counted after the timed run on the case's first `TOKEN_SAMPLE_CHARS` characters, so that tokens
per second compares texts whose characters cost different numbers of tokens); all go to --out with the CPU's
model and flags.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from toolkit.hardware import benchmark_header  # noqa: E402

MB = 1_000_000
# Characters of each case whose tokens are counted (the texts repeat, so a prefix this long is representative).
TOKEN_SAMPLE_CHARS = 2 * MB


def tokens_per_char(model: Path, text: str) -> float:
    """The model's tokens (no special tokens) per character of `text`, read as `toolkit predict` reads it."""
    from toolkit.models.pretrained import load_tokenizer
    from toolkit.spans.streaming import count_tokens

    tokenizer_dir = model if (model / "tokenizer.json").is_file() else model / "model"
    return count_tokens(load_tokenizer(str(tokenizer_dir)), text) / len(text)


def contract_text(size: int, data: Path) -> str:
    """CUAD dev contracts one after another, repeated and cut to `size` characters."""
    dev = data / "cuad" / "dev.jsonl"
    if not dev.is_file():
        raise SystemExit(f"{dev} not found: this benchmark reads CUAD dev from ../shared/data (see its README)")
    texts = [json.loads(line)["text"] for line in dev.open(encoding="utf-8")]
    whole = "\n\n".join(texts)
    return (whole * (size // len(whole) + 1))[:size]


# Chinese contract wording, written for this benchmark: clauses without spaces, as CJK text is written.
CJK_CLAUSES = (
    "本协议任何一方可提前三十日书面通知对方终止本协议。",
    "甲方应在收到发票后六十日内支付全部款项。",
    "本协议受中华人民共和国法律管辖并依其解释。",
    "未经对方书面同意任何一方不得转让本协议项下的权利和义务。",
)


def base64_text(size: int) -> str:
    """`size` characters of base64 (random bytes, seeded): one word of letters, digits, + and /."""
    import base64
    import random

    return base64.b64encode(random.Random(0).randbytes(size * 3 // 4 + 3)).decode()[:size]


def cjk_text(size: int) -> str:
    whole = "".join(CJK_CLAUSES)
    return (whole * (size // len(whole) + 1))[:size]


def run_predict(model: Path, source: Path, out: Path) -> dict:
    """One `toolkit predict` process: its peak RSS (kernel's figure), wall seconds, and what it wrote."""
    command = ["/usr/bin/time", "-v", str(ROOT / ".venv" / "bin" / "toolkit"), "predict", str(model), str(source)]
    proc = subprocess.run([*command, "-o", str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"toolkit predict failed on {source}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", proc.stderr).group(1)
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(wall.split(":"))))
    rows = [json.loads(line) for line in out.open(encoding="utf-8")]
    failures = out.with_name(out.name + ".failures.jsonl")
    failed = sum(1 for _ in failures.open(encoding="utf-8")) if failures.is_file() else 0
    chars = sum(len(r["text"]) for r in rows)
    return {
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "seconds": round(seconds, 1),
        "characters": chars,
        "chars_per_s": round(chars / seconds),
        "documents": len(rows),
        "failed": failed,
        "spans": sum(len(r["spans"]) for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("--sizes", type=float, nargs="*", default=[5, 20, 50, 100], help="single documents, MB")
    parser.add_argument("--split", type=float, nargs="*", default=[20], help="sizes also read as 1,000 documents")
    parser.add_argument("--jsonl", type=float, nargs="*", default=[51], help="single-record JSONL files, MB")
    parser.add_argument("--pdf-pages", type=int, nargs="*", default=[5000])
    parser.add_argument("--base64", type=float, nargs="*", default=[], help="single base64 documents, MB")
    parser.add_argument("--cjk", type=float, nargs="*", default=[], help="single CJK documents without spaces, MB")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "long_document.json")
    args = parser.parse_args()
    header = benchmark_header()
    results: dict = {"model": str(args.model), **header, "cases": {}}
    cases = (
        [(f"single_{s:g}mb", "txt", s) for s in args.sizes]
        + [(f"split_{s:g}mb", "split", s) for s in args.split]
        + [(f"jsonl_{s:g}mb", "jsonl", s) for s in args.jsonl]
        + [(f"pdf_{p}pages", "pdf", p) for p in args.pdf_pages]
        + [(f"base64_{s:g}mb", "base64", s) for s in args.base64]
        + [(f"cjk_{s:g}mb", "cjk", s) for s in args.cjk]
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, size in cases:
            suffix = "pdf" if kind == "pdf" else "txt" if kind in ("txt", "base64", "cjk") else "jsonl"
            source = Path(tmp) / f"{name}.{suffix}"
            if kind == "pdf":
                from document_files import make_pdf

                page = contract_text(2_000, args.data).replace("\r", "")
                make_pdf(source, [page] * int(size))
                sample = page
            elif kind in ("base64", "cjk"):
                text = (base64_text if kind == "base64" else cjk_text)(int(size * MB))
                source.write_text(text, encoding="utf-8")
                sample = text[:TOKEN_SAMPLE_CHARS]
                del text
            else:
                text = contract_text(int(size * MB), args.data)
                sample = text[:TOKEN_SAMPLE_CHARS]
                if kind == "txt":
                    source.write_text(text, encoding="utf-8")
                elif kind == "jsonl":
                    source.write_text(json.dumps({"id": "whole", "text": text}) + "\n", encoding="utf-8")
                else:
                    step = -(-len(text) // 1000)
                    with source.open("w", encoding="utf-8") as f:
                        for i in range(0, len(text), step):
                            f.write(json.dumps({"id": f"part{i // step:04d}", "text": text[i : i + step]}) + "\n")
                del text
            row = {
                "case": name,
                "input_bytes": source.stat().st_size,
                **run_predict(args.model, source, source.with_suffix(".out")),
            }
            for leftover in (source, source.with_suffix(".out"), source.with_suffix(".out.failures.jsonl")):
                leftover.unlink(missing_ok=True)
            row["tokens_per_char"] = round(tokens_per_char(args.model, sample), 4)
            row["tokens_per_s"] = round(row["chars_per_s"] * row["tokens_per_char"])
            print(json.dumps(row), flush=True)
            results["cases"][name] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
