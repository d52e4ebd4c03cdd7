"""Peak memory and time of one training step of a decoder with the full causal-LM loss against the
completion-only logits the span_generation trainer uses (issue 29), each variant in its own process.

    .venv/bin/python bench/clm_loss_memory.py --model gemma3-270m --batch 8 --length 512 --completion 64

A batch of `--batch` rows of `--length` random tokens whose last `--completion` tokens carry the loss (as
a prompt + completion example does), LoRA as the CLM recipes train, fp32. Peak RSS is the process's
maximum resident set (ru_maxrss) after the step, minus the same figure after loading.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def step(model_name: str, variant: str, batch: int, length: int, completion: int) -> dict:
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForCausalLM, TrainingArguments

    from toolkit.pretrained import resolve_model_name
    from toolkit.tasks.training import completion_trainer_class

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(resolve_model_name(model_name, decoder=True))
    model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=16))
    ids = torch.randint(10, model.config.vocab_size, (batch, length))
    labels = ids.clone()
    labels[:, : length - completion] = -100
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = completion_trainer_class()(model=model, args=TrainingArguments(tmp, report_to=[]))
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    loss = model(**inputs).loss if variant == "full" else trainer.compute_loss(model, inputs)
    loss.backward()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "variant": variant,
        "loss": round(loss.item(), 4),
        "step_seconds": round(seconds, 2),
        "rss_after_load_mb": round(loaded),
        "peak_rss_mb": round(peak),
        "step_extra_mb": round(peak - loaded),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--completion", type=int, default=64)
    parser.add_argument("--variant", choices=["full", "completion"])
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(step(args.model, args.variant, args.batch, args.length, args.completion)))
        return
    from toolkit.hardware import benchmark_header

    benchmark_header()
    print(f"model {args.model}, batch {args.batch} x {args.length} tokens, {args.completion} completion tokens per row")
    for variant in ("full", "completion"):
        cmd = [
            sys.executable,
            __file__,
            "--variant",
            variant,
            "--model",
            args.model,
            "--batch",
            str(args.batch),
            "--length",
            str(args.length),
            "--completion",
            str(args.completion),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        print(out, flush=True)


if __name__ == "__main__":
    main()
