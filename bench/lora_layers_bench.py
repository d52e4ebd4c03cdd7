"""Step time of LoRA on SmolLM2-135M (the default decoder) at 4 x 350 tokens: LoRA on every layer
against the top N layers only (`model.lora.top_layers`), fp32 against bf16 autocast.

    .venv/bin/python bench/lora_layers_bench.py [--steps 4]

Prints each variant's step times and the median of all but the first (warm-up); run it alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from toolkit.hardware import benchmark_header
from toolkit.pretrained import default_decoder

VARIANTS = [(None, False), (None, True), (10, False), (10, True), (15, False), (15, True)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    benchmark_header()
    torch.manual_seed(0)
    path = default_decoder()
    x = torch.randint(0, 49_000, (4, 350))
    for top, bf16 in VARIANTS:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        total = model.config.num_hidden_layers
        layers = None if top is None else list(range(total - top, total))
        lora = LoraConfig(
            r=16,
            lora_alpha=32,
            lora_dropout=0.05,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            layers_to_transform=layers,
        )
        model = get_peft_model(model, lora)
        model.train()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        times = []
        for _ in range(args.steps):
            started = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            times.append(time.perf_counter() - started)
        name = "every layer" if top is None else f"top {top} of {total}"
        print(
            f"{name:>15} {'bf16' if bf16 else 'fp32'}: steps {[round(t, 2) for t in times]} s, median "
            f"{statistics.median(times[1:]):.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
