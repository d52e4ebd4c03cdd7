"""Training tokens/s of a recipe's Trainer against a plain forward/backward loop on the very same
batches (issue 12), all in one process on one machine.

    .venv/bin/python bench/train_throughput.py recipes/ncbi_disease_mlm.yaml --steps 40

Three measurements over the first `--steps` batches of the recipe's own training dataloader (same
windows, collator, length grouping and padding):
  plain    model.train(); loss.backward(); AdamW step; zero_grad
  trainer  the recipe's Trainer with evaluation, checkpoints and logging off (max_steps = --steps)
  recipe   the recipe's Trainer as configured (evaluation every epoch is outside these steps, so the
           figure to compare with a finished run is its train_tokens_per_second, which includes them)
Tokens are real (non-padding) tokens. `epoch_padding_share` is the share of padding over one whole epoch of
the same dataloader (collated, not run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.registry.recipe_loader import load_recipe  # noqa: E402
from toolkit.tasks import flow_for  # noqa: E402


def _autocast_loss(trainer, model, batch, autocast):
    with autocast:
        return trainer.compute_loss(model, dict(batch))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("recipe", type=Path)
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--plain-only", action="store_true", help="skip the Trainer runs (a lever's seconds alone)")
    parser.add_argument(
        "--no-length-buckets",
        action="store_true",
        help="segment inputs: batches in random order, not of similar length (the bucketing lever, measured)",
    )
    parser.add_argument(
        "--second-pass",
        action="store_true",
        help="run the batches once untimed first (segments.cache_frozen_layers: time the replayed pass, not the fill)",
    )
    args = parser.parse_args()
    if args.no_length_buckets:
        from toolkit.tasks.segments.features import SegmentEpochSampler

        SegmentEpochSampler.POOL_BATCHES = 1  # sorted within one batch only: the padding of a random order
    import torch
    from transformers import set_seed

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serve_bench import cpu_line

    machine = benchmark_header()
    recipe = load_recipe(args.recipe, args.overrides)
    flow = flow_for(recipe)
    set_seed(recipe.seed)
    prepared = flow.prepare(recipe)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = flow.trainer(recipe, Path(tmp), prepared)
        batches, epoch_real, epoch_padded = [], 0, 0
        # A whole epoch's batches, collated but not run: the padding share that length grouping
        # (train.group_by_length) saves shows over an epoch, not in the first steps alone.
        for i, batch in enumerate(trainer.get_train_dataloader()):
            if i < args.steps:
                batches.append(batch)
            epoch_real += int(batch["attention_mask"].sum())
            epoch_padded += batch["attention_mask"].numel()
        tokens = sum(int(b["attention_mask"].sum()) for b in batches)
        padded = sum(b["attention_mask"].numel() for b in batches)
        model = trainer.model
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=recipe.train.learning_rate)
        # The recipe's own loss, under the recipe's precision (bf16 autocast when train.precision is bf16).
        autocast = torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=trainer.args.bf16)

        def step(b):
            return (
                trainer.compute_loss(model, dict(b))
                if not trainer.args.bf16
                else _autocast_loss(trainer, model, b, autocast)
            )

        step(batches[0]).backward()  # warm-up
        optimizer.zero_grad()
        if args.second_pass:
            with torch.no_grad():
                for b in batches:
                    step(b)
        started = time.perf_counter()
        for b in batches:
            loss = step(b)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        plain = time.perf_counter() - started
        steps_per_epoch = len(trainer.get_train_dataloader())
    result = {
        "cpu": cpu_line(),
        "conditions": machine["conditions"],
        "recipe": str(args.recipe),
        "overrides": args.overrides,
        "length_buckets": not args.no_length_buckets,
        "second_pass": args.second_pass,
        "bf16": bool(trainer.args.bf16),
        "steps": args.steps,
        "real_tokens": tokens,
        "padded_tokens": padded,
        "epoch_real_tokens": epoch_real,
        "epoch_padding_share": round(1 - epoch_real / epoch_padded, 4),
        "plain_tokens_per_s": round(tokens / plain, 1),
        "plain_seconds_per_step": round(plain / args.steps, 3),
        "steps_per_epoch": steps_per_epoch,
        # the plain loop's seconds per step over one whole epoch of the same dataloader
        "plain_seconds_per_epoch": round(plain / args.steps * steps_per_epoch, 1),
    }
    if args.plain_only:
        print(json.dumps(result))
        return
    set_seed(recipe.seed)
    quiet = recipe.model_copy(deep=True)
    quiet.train.max_steps = args.steps
    quiet.train.eval_every = 10**9
    quiet.train.logging_steps = 10**9
    quiet.train.early_stopping_patience = None
    prepared = flow.prepare(quiet)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = flow.trainer(quiet, Path(tmp), prepared)
        started = time.perf_counter()
        trainer.train()
        trained = time.perf_counter() - started
    result |= {
        "trainer_tokens_per_s": round(tokens / trained, 1),
        "trainer_over_plain": round(plain / trained, 3),
        "trainer_seconds_per_step": round(trained / args.steps, 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
