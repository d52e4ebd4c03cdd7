"""Domain-adaptive pre-training: `task: pretrain_mlm` (BERT-style masking) or `pretrain_clm` (next token).

Reads top to bottom: text -> token blocks -> held-out blocks with fixed masks -> scored
before training -> Trainer -> scored after -> a plain model directory that
token_classification and span_generation recipes take as `model.name`.

Masking is transformers' DataCollatorForLanguageModeling (selection rate, [MASK] /
random / unchanged shares and whole-word masking all configurable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.data.corpora import TextReport, pack_blocks, read_texts, split_blocks
from toolkit.errors import ConfigError
from toolkit.models.building import build_causal_model, build_masked_model
from toolkit.registry.pretraining import CausalPretrainRecipe, MaskedPretrainRecipe
from toolkit.rundir import REPORT_FILE, Metrics, model_meta, save_model_dir, write_metrics_file
from toolkit.tasks.flow import Flow, Prepared, RunResult, Trained
from toolkit.tasks.training import pad_collator, parameter_counts, training_arguments


def make_blocks(
    tokenizer, texts: list[str], block_size: int, packing: bool, objective: str, with_offsets: bool
) -> list[dict]:
    """Token blocks of `block_size` (packed across documents, or per document)."""
    enc = tokenizer(
        texts,
        add_special_tokens=objective == "mlm",
        return_offsets_mapping=with_offsets,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids = [list(x) for x in enc["input_ids"]]
    offsets = [list(map(tuple, o)) for o in enc["offset_mapping"]] if with_offsets else None
    if objective == "clm":
        ids = [x + [tokenizer.eos_token_id] for x in ids]  # documents end with EOS, as in causal pre-training
    cut = pack_blocks if packing else split_blocks
    blocks = [{"input_ids": b} for b in cut(ids, block_size)]
    if offsets is not None:
        for block, off in zip(blocks, cut(offsets, block_size)):
            block["offset_mapping"] = [list(o) for o in off]
    return blocks


def masking_collator(
    tokenizer,
    recipe: MaskedPretrainRecipe | CausalPretrainRecipe,
    seed: int | None = None,
    mlm_probability: float | None = None,
):
    """The MLM collator exactly as configured (also what the masking-rate tests measure);
    `mlm_probability` overrides the selection rate (held-out masks)."""
    from transformers import DataCollatorForLanguageModeling

    p = recipe.pretrain
    return DataCollatorForLanguageModeling(
        tokenizer,
        mlm=True,
        mlm_probability=mlm_probability or p.mlm_probability,
        mask_replace_prob=p.mask_replace_prob,
        random_replace_prob=p.random_replace_prob,
        whole_word_mask=p.whole_word_mask,
        seed=seed,
    )


def fixed_eval_set(blocks: list[dict], collator, objective: str, batch: int = 64) -> list[dict]:
    """Held-out blocks with masks drawn once (seeded), so before and after see the same masks."""
    if objective == "clm":
        return [{"input_ids": b["input_ids"], "labels": list(b["input_ids"])} for b in blocks]
    out = []
    for lo in range(0, len(blocks), batch):
        masked = collator([dict(b) for b in blocks[lo : lo + batch]])
        for ids, labels, mask in zip(
            masked["input_ids"].tolist(), masked["labels"].tolist(), masked["attention_mask"].tolist()
        ):
            n = sum(mask)
            out.append({"input_ids": ids[:n], "labels": labels[:n]})
    return out


def _metrics(objective: str):
    """Loss, perplexity and token accuracy over the predicted positions (masked tokens; next
    tokens for CLM). Our own token-weighted mean NLL rather than the Trainer's eval_loss,
    which averages per-batch means and so changes with the batch size and padding."""
    import numpy as np

    def preprocess(logits, labels):
        import torch

        logits = logits[0] if isinstance(logits, tuple) else logits
        if objective == "clm":  # position t predicts token t+1
            logits, labels = logits[:, :-1], labels[:, 1:]
        nll = torch.nn.functional.cross_entropy(
            logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none"
        )
        out = torch.stack([logits.argmax(-1).float(), nll], dim=-1)  # ids < 2**24 stay exact in float32
        if objective == "clm":  # keep the labels' length; the last position predicts nothing
            out = torch.nn.functional.pad(out, (0, 0, 0, 1), value=-100.0)
        return out  # not [batch, tokens, vocab] logits

    def compute(pred) -> dict:
        predictions, labels = pred.predictions, pred.label_ids
        if objective == "clm":
            predictions, labels = predictions[:, :-1], labels[:, 1:]
        keep = labels != -100
        if not keep.any():
            return {"token_accuracy": 0.0, "nll": float("nan"), "scored_tokens": 0}
        ids, nll = predictions[..., 0][keep], predictions[..., 1][keep]
        return {
            "token_accuracy": float((ids == labels[keep]).mean()),
            "nll": float(np.mean(nll, dtype=np.float64)),
            "scored_tokens": int(keep.sum()),
        }

    return preprocess, compute


def _summary(raw: dict) -> dict:
    loss = raw["eval_nll"]
    return {
        "loss": round(loss, 4),
        "perplexity": round(math.exp(min(loss, 50)), 3),
        "token_accuracy": round(raw["eval_token_accuracy"], 4),
        "scored_tokens": raw["eval_scored_tokens"],
    }


@dataclass
class PretrainPrepared(Prepared):
    objective: str  # "mlm" or "clm"
    train_blocks: list[dict]
    eval_set: list[dict]
    collator: Any


class Pretraining(Flow):
    """pretrain_mlm and pretrain_clm: one flow, the objective read from the task."""

    def prepare(
        self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, with_training_text: bool = True
    ) -> PretrainPrepared:
        """Model, tokenizer, training blocks (none when only scoring), the fixed held-out set and the collator."""
        from transformers import DataCollatorForLanguageModeling

        objective = recipe.objective
        p = recipe.pretrain
        if objective == "mlm":
            model, tokenizer, head_initialised = build_masked_model(recipe.model)
        else:
            (model, tokenizer), head_initialised = build_causal_model(recipe.model), False
        train_report, dev_report = TextReport(), TextReport()
        train_texts = (
            read_texts(recipe.data.train, recipe.data.max_train_docs, train_report) if with_training_text else []
        )
        dev_texts = read_texts(recipe.data.dev, recipe.data.max_dev_docs, dev_report)
        block = recipe.model.max_length
        wwm = objective == "mlm" and p.whole_word_mask
        train_blocks = (
            make_blocks(tokenizer, train_texts, block, p.packing, objective, wwm) if with_training_text else []
        )
        dev_blocks = make_blocks(tokenizer, dev_texts, block, p.packing, objective, False)[: p.eval_blocks]
        if (with_training_text and not train_blocks) or not dev_blocks:
            raise ConfigError(
                f"too little text for one block of {block} tokens (train {len(train_blocks)}, held-out "
                f"{len(dev_blocks)} blocks)",
                fix="add text, or lower model.max_length",
            )
        eval_rate = (p.eval_mlm_probability or p.mlm_probability) if objective == "mlm" else None
        train_tokens = sum(len(b["input_ids"]) for b in train_blocks)
        plan = {
            "objective": objective,
            "block_size": block,
            "packing": p.packing,
            "train": {**train_report.to_dict(), "blocks": len(train_blocks), "tokens": train_tokens},
            "held_out": {**dev_report.to_dict(), "blocks": len(dev_blocks), "mlm_probability": eval_rate},
            "masking": p.model_dump() if objective == "mlm" else None,
            "mlm_head_initialised_from_embeddings": head_initialised,
            **parameter_counts(model),
        }
        train_collator = (
            masking_collator(tokenizer, recipe)
            if objective == "mlm"
            else DataCollatorForLanguageModeling(tokenizer, mlm=False)
        )
        eval_masks = (
            masking_collator(tokenizer, recipe, seed=recipe.seed, mlm_probability=eval_rate)
            if objective == "mlm"
            else None
        )
        eval_set = fixed_eval_set(dev_blocks, eval_masks, objective)
        return PretrainPrepared(
            model,
            tokenizer,
            plan,
            train_tokens,
            objective,
            train_blocks,
            eval_set,
            _TrainEvalCollator(train_collator, pad_collator(tokenizer.pad_token_id or 0)),
        )

    def trainer(self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, run_dir: Path, p: PretrainPrepared):
        from datasets import Dataset
        from transformers import Trainer

        preprocess, compute = _metrics(p.objective)
        args = training_arguments(recipe, run_dir, metric="nll", greater_is_better=False, remove_unused_columns=False)
        return Trainer(
            model=p.model,
            args=args,
            train_dataset=Dataset.from_list(p.train_blocks) if p.train_blocks else None,
            eval_dataset=Dataset.from_list(p.eval_set),
            data_collator=p.collator,
            compute_metrics=compute,
            preprocess_logits_for_metrics=preprocess,
        )

    def before_training(self, trainer, p: PretrainPrepared) -> dict:
        return {"before": _summary(trainer.evaluate(metric_key_prefix="eval"))}

    def after_training(self, trainer, p: PretrainPrepared) -> dict:
        return {"after": _summary(trainer.evaluate(metric_key_prefix="eval"))}

    def save(
        self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, p: PretrainPrepared, model, directory: Path
    ) -> None:
        """A plain model directory (LoRA merged) that fine-tuning recipes take as model.name."""
        save_model_dir(
            model,
            p.tokenizer,
            directory,
            model_meta(task=recipe.task, base_model=recipe.model.name, max_length=recipe.model.max_length),
        )

    def evaluate(
        self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, run_dir: Path, p: PretrainPrepared, trained: Trained
    ) -> tuple[dict, dict]:
        # Scored before and after training (collectively, on every process); nothing is left to score here.
        before, after = trained.notes["before"], trained.notes["after"]
        metrics = {
            "before": before,
            "after": after,
            "summary": after,
        }  # sweeps rank trials by summary (e.g. token_accuracy)
        return metrics, {"objective": p.objective, "heldout_mlm_probability": p.plan["held_out"]["mlm_probability"]}

    def write(self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, result: RunResult) -> None:
        write_metrics_file(result.run_dir, Metrics(**result.metrics))
        (result.run_dir / REPORT_FILE).write_text(_report(recipe, result.metrics), encoding="utf-8")

    def summary(self, recipe: MaskedPretrainRecipe | CausalPretrainRecipe, result: RunResult) -> str:
        return _report(recipe, result.metrics)


def score_heldout(recipe: MaskedPretrainRecipe | CausalPretrainRecipe, scratch_dir: Path) -> dict:
    """Held-out loss / perplexity / token accuracy of `recipe.model.name` without training:
    the recipe's blocks and seeded masks, so models adapted at different rates can be
    compared on identical masks (set pretrain.eval_mlm_probability)."""
    from transformers import set_seed

    set_seed(recipe.seed)
    flow = Pretraining()
    prepared = flow.prepare(recipe, with_training_text=False)  # the training corpus is not needed to score
    return _summary(flow.trainer(recipe, scratch_dir, prepared).evaluate(metric_key_prefix="eval"))


class _TrainEvalCollator:
    """Training batches are masked afresh (the configured collator); evaluation batches are
    already masked (fixed_eval_set) and only padded. Told apart by the `labels` field."""

    def __init__(self, train, evaluate):
        self.train, self.evaluate = train, evaluate

    def __call__(self, features):
        return self.evaluate(features) if "labels" in features[0] else self.train(features)


def _report(recipe: MaskedPretrainRecipe | CausalPretrainRecipe, result: dict) -> str:
    b, a = result["before"], result["after"]
    kind = "masked-token" if result["run"]["objective"] == "mlm" else "next-token"
    lines = [
        f"# {recipe.name}: {recipe.task} on {recipe.data.train}",
        "",
        f"Held-out text: {recipe.data.dev} (same blocks{' and masks' if kind == 'masked-token' else ''} before and "
        f"after"
        + (f"; {result['run']['heldout_mlm_probability']:.0%} of tokens masked" if kind == "masked-token" else "")
        + ").",
        "",
        "| | loss | perplexity | " + kind + " accuracy |",
        "|---|---|---|---|",
        f"| before | {b['loss']} | {b['perplexity']} | {b['token_accuracy']} |",
        f"| after | {a['loss']} | {a['perplexity']} | {a['token_accuracy']} |",
        "",
        f"Training: {result['run']['optimizer_steps']} steps, {result['run']['train_seconds']} s. "
        f"Use the adapted model: `model.name: {Path(recipe.output_dir) / recipe.name / 'model'}`.",
        "",
    ]
    return "\n".join(lines)
