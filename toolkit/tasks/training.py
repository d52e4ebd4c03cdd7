"""What every training flow shares: process rank, memory figures, precision, the Trainer's arguments,
padding and resuming."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.registry import RecipeBase


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finish_distributed() -> None:
    """After a data-parallel run: every rank waits for rank 0 to finish scoring and writing, then the
    process group is shut down. A rank that left earlier could abort at exit while gloo threads ran."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peak_cuda_mib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else None


def steps_per_epoch(examples: int, recipe: RecipeBase) -> int:
    """Optimizer steps in one epoch over `examples` across all processes."""
    t = recipe.train
    return max(1, examples // (t.batch_size * t.gradient_accumulation * world_size()))


def parameter_counts(model) -> dict[str, int]:
    return {
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def precision_flags(choice: str) -> dict:
    """auto: bf16 on CUDA devices that support it, fp32 elsewhere. prefer_bf16: bf16 wherever there are bf16
    units, CPUs included. bf16 on a CPU needs bf16 units (avx512_bf16 or amx_bf16): without them autocast
    emulates bf16 and is slower than fp32."""
    import torch

    from toolkit.hardware import bf16_supported, describe

    cuda = torch.cuda.is_available()
    if choice == "auto":
        return {"bf16": cuda and torch.cuda.is_bf16_supported()}
    if choice == "prefer_bf16":
        choice = "bf16" if bf16_supported("cuda" if cuda else "cpu") else "fp32"
    if choice == "fp16" and not cuda:
        raise ToolkitError(
            "train.precision=fp16 needs a CUDA device",
            fix="use train.precision=auto (fp32 on CPU), or bf16 on a CPU with bf16 units",
        )
    if choice == "bf16" and not cuda and not (machine := describe())["bf16"]:
        raise ToolkitError(
            f"train.precision=bf16 needs a CUDA device or a CPU with bf16 units (avx512_bf16, amx_bf16); this CPU has "
            f"{' '.join(machine['cpu_flags']) or 'none of them'}",
            fix="use train.precision=auto (fp32 on this CPU)",
        )
    # transformers takes bf16 on a CPU only with use_cpu set (else it looks for a bf16 GPU).
    return {
        "bf16": choice == "bf16",
        "fp16": choice == "fp16",
        **({"use_cpu": True} if choice == "bf16" and not cuda else {}),
    }


NEVER_STEPS = 10**12


def training_arguments(
    recipe: RecipeBase,
    run_dir: Path,
    metric: str,
    greater_is_better: bool = True,
    checkpoints: str = "checkpoints",
    **extra,
):
    """TrainingArguments from a recipe: a checkpoint per evaluation (in run_dir/`checkpoints`), best checkpoint
    by `metric` kept and loaded at the end."""
    import torch
    from transformers import TrainingArguments

    t = recipe.train
    # With eval_every_seconds the training clock (tasks/learning_curve.py) asks for each evaluation and checkpoint; the
    # Trainer's own step schedule is set beyond reach.
    # The same with eval_every=doubling: a callback asks after epochs 1, 2, 4, ...
    every = NEVER_STEPS if t.eval_every_seconds is not None or t.eval_every == "doubling" else t.eval_every
    schedule = (
        {"eval_strategy": "epoch", "save_strategy": "epoch"}
        if every == "epoch"
        else {
            "eval_strategy": "steps",
            "save_strategy": "steps",
            "eval_steps": every,
            "save_steps": every,
        }
    )
    cuda = torch.cuda.is_available()
    return TrainingArguments(
        output_dir=str(run_dir / checkpoints),
        learning_rate=t.learning_rate,
        num_train_epochs=t.epochs,
        max_steps=t.max_steps,
        per_device_train_batch_size=t.batch_size,
        per_device_eval_batch_size=t.eval_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation,
        warmup_ratio=t.warmup_ratio,
        warmup_steps=t.warmup_steps or 0,
        lr_scheduler_type="constant_with_warmup" if t.lr_schedule == "constant" else "linear",
        weight_decay=t.weight_decay,
        logging_steps=t.logging_steps,
        save_total_limit=t.save_total_limit,
        group_by_length=t.group_by_length,
        # train.plateau keeps the model at the plateau; otherwise the best checkpoint is loaded at the end.
        load_best_model_at_end=t.plateau is None,
        metric_for_best_model=metric,
        greater_is_better=greater_is_better,
        seed=recipe.seed,
        report_to=[],
        dataloader_pin_memory=cuda,
        ddp_backend=None if cuda or world_size() == 1 else "gloo",
        ddp_find_unused_parameters=False,
        # transformers hides progress bars when its log level is above WARN, which
        # load_tokenizer sets to silence length warnings: ask for them explicitly.
        disable_tqdm=False,
        **schedule,
        **precision_flags(t.precision),
        **extra,
    )


def pad_collator(pad_id: int):
    """Right-pads input_ids, attention_mask and labels (with -100, so padding never counts in the loss).
    For features that already carry their labels: CLM examples and pre-masked MLM evaluation blocks."""
    import torch

    def collate(features):
        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), pad_id, dtype=torch.long)
        labels = torch.full((len(features), width), -100, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(f["input_ids"]), torch.tensor(f["labels"]), 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return collate


def completion_trainer_class():
    """A Trainer whose causal-LM loss computes logits only where a completion token is predicted.

    Our own because transformers' loss takes the logits of every position: with Gemma 3's 262k-token
    vocabulary a batch of 8 x 512 tokens holds about 4 GB of fp32 logits, most of them for prompt tokens
    that carry no loss. The loss is the same sum over completion tokens (divided by their number, as the
    Trainer does); only the rows nobody reads are never computed."""
    import torch.nn.functional as F
    from transformers import Trainer

    class CompletionTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs = dict(inputs)
            labels = inputs.pop("labels")
            targets = labels[:, 1:]  # position i predicts token i + 1
            keep = (targets != -100).any(dim=0).nonzero().squeeze(-1)
            outputs = model(**inputs, logits_to_keep=keep)
            kept = targets[:, keep]
            summed = F.cross_entropy(
                outputs.logits.float().flatten(0, 1), kept.flatten(), ignore_index=-100, reduction="sum"
            )
            count = num_items_in_batch if num_items_in_batch is not None else (kept != -100).sum()
            loss = summed / count
            return (loss, outputs) if return_outputs else loss

    return CompletionTrainer


@dataclass(frozen=True)
class TrainingSpan:
    """What this process trained: its seconds, the checkpoint it resumed from, and the epochs and tokens it
    covered (after a resume, only those trained since; tokens/s is measured on those)."""

    seconds: float
    resumed_from: str | None
    epochs_trained: float
    evaluation_seconds: float  # spent in the dev evaluations inside training (part of `seconds`)
    tokens: float  # epochs_trained x the tokens of one epoch
    epochs_completed: float  # the run's epochs, resumed ones included
    optimizer_steps: int
    log: list[dict]  # the Trainer's log history

    def then(self, later: TrainingSpan, stage: str) -> TrainingSpan:
        """This span followed by a later training stage (its log entries tagged with `stage`, steps counted on)."""
        log = self.log + [
            {**e, "stage": stage, **({"step": e["step"] + self.optimizer_steps} if "step" in e else {})}
            for e in later.log
        ]
        return TrainingSpan(
            self.seconds + later.seconds,
            self.resumed_from,
            self.epochs_trained + later.epochs_trained,
            self.evaluation_seconds + later.evaluation_seconds,
            self.tokens + later.tokens,
            self.epochs_completed + later.epochs_completed,
            self.optimizer_steps + later.optimizer_steps,
            log,
        )


def train_resuming(trainer, epoch_tokens: int) -> TrainingSpan:
    """Train, resuming from the latest checkpoint in the Trainer's output directory when one exists (a crashed
    run reruns the same command). `epoch_tokens`: the tokens in one epoch of its training data."""
    import json
    import time

    folder = Path(trainer.args.output_dir)
    checkpoints = (
        sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1])) if folder.is_dir() else []
    )
    start_epoch = 0.0
    if checkpoints and (checkpoints[-1] / "trainer_state.json").is_file():
        start_epoch = float(
            json.loads((checkpoints[-1] / "trainer_state.json").read_text(encoding="utf-8")).get("epoch") or 0
        )
    evaluation = 0.0
    evaluate = trainer.evaluate

    def timed_evaluate(*args, **kwargs):  # the Trainer evaluates through this method; time it apart
        nonlocal evaluation
        t = time.perf_counter()
        try:
            return evaluate(*args, **kwargs)
        finally:
            evaluation += time.perf_counter() - t

    trainer.evaluate = timed_evaluate
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=True if checkpoints else None)
    finally:
        trainer.evaluate = evaluate
    seconds = time.perf_counter() - started
    completed = float(trainer.state.epoch or 0)
    epochs = completed - start_epoch
    resumed = checkpoints[-1].name if checkpoints else None
    return TrainingSpan(
        seconds,
        resumed,
        epochs,
        evaluation,
        epoch_tokens * epochs,
        completed,
        trainer.state.global_step,
        list(trainer.state.log_history),
    )
