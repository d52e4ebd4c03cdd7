"""Score several MLM models on the same held-out blocks with the same masks (no training).

    .venv/bin/python bench/heldout_mlm.py recipes/bc5cdr_domain_pretrain_mlm.yaml MODEL_DIR [MODEL_DIR ...] [--rate
    0.15]

Each model is scored by `toolkit.tasks.pretrain.score_heldout` (the code a pretrain run uses
before and after training) on the recipe's held-out text, masking `--rate` of the tokens
with the recipe's seed. The masking-rate study needs it: each pretraining trial scores
itself at its own rate, so its before/after figures do not compare across rates; this does.
"default" scores the base model (with its newly initialised head for the offline MiniLM).
Prints one JSON line per model and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from toolkit.config import load_recipe  # noqa: E402
from toolkit.tasks.pretrain import score_heldout  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe")
    parser.add_argument("models", nargs="+")
    parser.add_argument(
        "--rate", type=float, default=0.15, help="share of held-out tokens masked (80/10/10 of the recipe)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for model in args.models:
            recipe = load_recipe(args.recipe, [f"model.name={model}", f"pretrain.eval_mlm_probability={args.rate}"])
            row = {"model": model, "rate": args.rate, **score_heldout(recipe, Path(scratch))}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| model | loss | perplexity | masked-token accuracy | scored tokens |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['loss']} | {r['perplexity']:,} | {r['token_accuracy']} | {r['scored_tokens']:,} |")


if __name__ == "__main__":
    main()
