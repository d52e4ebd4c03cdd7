"""Domain-adaptive pre-training: `task: pretrain_mlm` (BERT-style masking) or `pretrain_clm` (next token).

Reads top to bottom: text -> token blocks -> held-out blocks with fixed masks -> scored
before training -> Trainer -> scored after -> a plain model directory that
token_classification and span_generation recipes take as `model.name`.

Masking is transformers' DataCollatorForLanguageModeling (selection rate, [MASK] /
random / unchanged shares and whole-word masking all configurable).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from toolkit.config import Recipe
from toolkit.errors import ConfigError
from toolkit.modeling import META_FILE, add_embedding_dropout, apply_dropout, resolve_model_name
from toolkit.text_corpus import TextReport, pack_blocks, read_texts, split_blocks
from toolkit.training import pad_collator, parameter_counts, peak_rss_mib, start_run_dir, train_resuming, training_arguments


def build_mlm_model(recipe: Recipe):
    """(model, tokenizer, head_initialised). An encoder saved without its MLM head (the
    offline MiniLM) gets one: decoder tied to the input embeddings, transform = identity."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    from toolkit.tokenization import load_tokenizer

    m = recipe.model
    if m.lora.enabled:
        raise ConfigError("model.lora applies to token_classification, span_generation and pretrain_clm", fix="set model.lora.enabled=false for pretrain_mlm")
    name = resolve_model_name(m.name, "token_classification")
    tokenizer = load_tokenizer(name)
    if tokenizer.mask_token is None:
        raise ConfigError(f"tokenizer of {name!r} has no mask token", fix="pretrain_mlm needs an encoder with a [MASK] token (use pretrain_clm for decoders)")
    config = AutoConfig.from_pretrained(name)
    apply_dropout(config, m.dropout)
    model, info = AutoModelForMaskedLM.from_pretrained(name, config=config, output_loading_info=True)
    missing = set(info.get("missing_keys", []))
    head_initialised = any("predictions" in k or k.startswith(("cls.", "lm_head")) for k in missing)
    if head_initialised:
        with torch.no_grad():
            for key in missing:
                if key.endswith("transform.dense.weight"):
                    weight = model.get_parameter(key)
                    if weight.shape[0] == weight.shape[1]:
                        # Start from the encoder's own hidden states: predictions = LayerNorm(gelu(h)) @ E^T.
                        weight.copy_(torch.eye(weight.shape[0]))
                        model.get_parameter(key.replace(".weight", ".bias")).zero_()
        model.tie_weights()
    add_embedding_dropout(model, m.dropout.embedding)
    return model, tokenizer, head_initialised


def make_blocks(tokenizer, texts: list[str], block_size: int, packing: bool, objective: str, with_offsets: bool) -> list[dict]:
    """Token blocks of `block_size` (packed across documents, or per document)."""
    enc = tokenizer(texts, add_special_tokens=objective == "mlm", return_offsets_mapping=with_offsets,
                    return_attention_mask=False, return_token_type_ids=False)
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


def masking_collator(tokenizer, recipe: Recipe, seed: int | None = None, mlm_probability: float | None = None):
    """The MLM collator exactly as configured (also what the masking-rate tests measure);
    `mlm_probability` overrides the selection rate (held-out masks)."""
    from transformers import DataCollatorForLanguageModeling

    p = recipe.pretrain
    return DataCollatorForLanguageModeling(
        tokenizer, mlm=True, mlm_probability=mlm_probability or p.mlm_probability, mask_replace_prob=p.mask_replace_prob,
        random_replace_prob=p.random_replace_prob, whole_word_mask=p.whole_word_mask, seed=seed,
    )


def fixed_eval_set(blocks: list[dict], collator, objective: str, batch: int = 64) -> list[dict]:
    """Held-out blocks with masks drawn once (seeded), so before and after see the same masks."""
    if objective == "clm":
        return [{"input_ids": b["input_ids"], "labels": list(b["input_ids"])} for b in blocks]
    out = []
    for lo in range(0, len(blocks), batch):
        masked = collator([dict(b) for b in blocks[lo : lo + batch]])
        for ids, labels, mask in zip(masked["input_ids"].tolist(), masked["labels"].tolist(), masked["attention_mask"].tolist()):
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
        nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none")
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
        return {"token_accuracy": float((ids == labels[keep]).mean()), "nll": float(np.mean(nll, dtype=np.float64)), "scored_tokens": int(keep.sum())}

    return preprocess, compute


def _summary(raw: dict) -> dict:
    loss = raw["eval_nll"]
    return {"loss": round(loss, 4), "perplexity": round(math.exp(min(loss, 50)), 3),
            "token_accuracy": round(raw["eval_token_accuracy"], 4), "scored_tokens": raw["eval_scored_tokens"]}


def _prepare(recipe: Recipe, with_training_text: bool = True) -> dict:
    """Model, tokenizer, training blocks (none when only scoring), the fixed held-out set and the collator."""
    from transformers import DataCollatorForLanguageModeling, set_seed

    objective = "mlm" if recipe.task == "pretrain_mlm" else "clm"
    p = recipe.pretrain
    set_seed(recipe.seed)
    if objective == "mlm":
        model, tokenizer, head_initialised = build_mlm_model(recipe)
    else:
        from toolkit.train_clm import build_causal_model

        (model, tokenizer), head_initialised = build_causal_model(recipe), False
    train_report, dev_report = TextReport(), TextReport()
    train_texts = read_texts(recipe.data.train, recipe.data.max_train_docs, train_report) if with_training_text else []
    dev_texts = read_texts(recipe.data.dev, recipe.data.max_dev_docs, dev_report)
    block = recipe.model.max_length
    wwm = objective == "mlm" and p.whole_word_mask
    train_blocks = make_blocks(tokenizer, train_texts, block, p.packing, objective, wwm) if with_training_text else []
    dev_blocks = make_blocks(tokenizer, dev_texts, block, p.packing, objective, False)[: p.eval_blocks]
    if (with_training_text and not train_blocks) or not dev_blocks:
        raise ConfigError(f"too little text for one block of {block} tokens (train {len(train_blocks)}, held-out {len(dev_blocks)} blocks)",
                          fix="add text, or lower model.max_length")
    eval_rate = (p.eval_mlm_probability or p.mlm_probability) if objective == "mlm" else None
    plan = {
        "objective": objective, "block_size": block, "packing": p.packing,
        "train": {**train_report.to_dict(), "blocks": len(train_blocks), "tokens": sum(len(b["input_ids"]) for b in train_blocks)},
        "held_out": {**dev_report.to_dict(), "blocks": len(dev_blocks), "mlm_probability": eval_rate},
        "masking": p.model_dump() if objective == "mlm" else None,
        "mlm_head_initialised_from_embeddings": head_initialised,
        **parameter_counts(model),
    }
    train_collator = masking_collator(tokenizer, recipe) if objective == "mlm" else DataCollatorForLanguageModeling(tokenizer, mlm=False)
    eval_masks = masking_collator(tokenizer, recipe, seed=recipe.seed, mlm_probability=eval_rate) if objective == "mlm" else None
    eval_set = fixed_eval_set(dev_blocks, eval_masks, objective)
    return {"objective": objective, "model": model, "tokenizer": tokenizer, "plan": plan, "train_blocks": train_blocks,
            "eval_set": eval_set, "collator": _TrainEvalCollator(train_collator, pad_collator(tokenizer.pad_token_id or 0))}


def _trainer(recipe: Recipe, run_dir: Path, prepared: dict):
    from datasets import Dataset
    from transformers import Trainer

    preprocess, compute = _metrics(prepared["objective"])
    args = training_arguments(recipe, run_dir, metric="nll", greater_is_better=False, remove_unused_columns=False)
    return Trainer(
        model=prepared["model"], args=args, train_dataset=Dataset.from_list(prepared["train_blocks"]) if prepared["train_blocks"] else None,
        eval_dataset=Dataset.from_list(prepared["eval_set"]), data_collator=prepared["collator"],
        compute_metrics=compute, preprocess_logits_for_metrics=preprocess,
    )


def run_pretraining(recipe: Recipe, run_dir: Path, dry_run: bool = False) -> dict | None:
    """Adapt a base model to unlabeled domain text; returns metrics before and after (rank 0)."""
    prepared = _prepare(recipe)
    plan, objective, tokenizer = prepared["plan"], prepared["objective"], prepared["tokenizer"]
    if dry_run:
        return {"plan": plan}
    start_run_dir(recipe, run_dir, plan)
    trainer = _trainer(recipe, run_dir, prepared)
    before = _summary(trainer.evaluate(metric_key_prefix="eval"))
    train_seconds, resumed_from = train_resuming(trainer, run_dir)
    after = _summary(trainer.evaluate(metric_key_prefix="eval"))
    if not trainer.is_world_process_zero():
        return None
    save_pretrained_model(trainer.model, tokenizer, run_dir / "model", recipe)
    (run_dir / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trainer.state.log_history), encoding="utf-8")
    epochs = float(trainer.state.epoch or 0)
    result = {
        "before": before, "after": after,
        "summary": after,  # what sweeps rank trials by (sweep.metric: token_accuracy)
        "run": {
            "model": recipe.model.name, "objective": objective, "train_seconds": round(train_seconds, 1),
            "optimizer_steps": trainer.state.global_step, "epochs_completed": round(epochs, 2),
            "train_tokens_per_second": round(plan["train"]["tokens"] * epochs / train_seconds, 1) if train_seconds else None,
            "peak_rss_mib": peak_rss_mib(), "resumed_from_checkpoint": resumed_from,
            "heldout_mlm_probability": plan["held_out"]["mlm_probability"],
        },
    }
    (run_dir / "metrics.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (run_dir / "report.md").write_text(_report(recipe, result), encoding="utf-8")
    return result


def score_heldout(recipe: Recipe, scratch_dir: Path) -> dict:
    """Held-out loss / perplexity / token accuracy of `recipe.model.name` without training:
    the recipe's blocks and seeded masks, so models adapted at different rates can be
    compared on identical masks (set pretrain.eval_mlm_probability)."""
    prepared = _prepare(recipe, with_training_text=False)  # the training corpus is not needed to score
    return _summary(_trainer(recipe, scratch_dir, prepared).evaluate(metric_key_prefix="eval"))


class _TrainEvalCollator:
    """Training batches are masked afresh (the configured collator); evaluation batches are
    already masked (fixed_eval_set) and only padded. Told apart by the `labels` field."""

    def __init__(self, train, evaluate):
        self.train, self.evaluate = train, evaluate

    def __call__(self, features):
        return self.evaluate(features) if "labels" in features[0] else self.train(features)


def save_pretrained_model(model, tokenizer, directory: Path, recipe: Recipe) -> None:
    """A plain model directory (LoRA merged) that fine-tuning recipes take as model.name."""
    from toolkit.modeling import save_model_dir

    meta = {"task": recipe.task, "base_model": recipe.model.name, "max_length": recipe.model.max_length}
    if hasattr(model, "merge_and_unload"):
        save_model_dir(model, tokenizer, directory, meta)
        return
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def _report(recipe: Recipe, result: dict) -> str:
    b, a = result["before"], result["after"]
    kind = "masked-token" if result["run"]["objective"] == "mlm" else "next-token"
    lines = [f"# {recipe.name}: {recipe.task} on {recipe.data.train}", "",
             f"Held-out text: {recipe.data.dev} (same blocks{' and masks' if kind == 'masked-token' else ''} before and after"
             + (f"; {result['run']['heldout_mlm_probability']:.0%} of tokens masked" if kind == "masked-token" else "") + ").", "",
             "| | loss | perplexity | " + kind + " accuracy |", "|---|---|---|---|",
             f"| before | {b['loss']} | {b['perplexity']} | {b['token_accuracy']} |",
             f"| after | {a['loss']} | {a['perplexity']} | {a['token_accuracy']} |", "",
             f"Training: {result['run']['optimizer_steps']} steps, {result['run']['train_seconds']} s. "
             f"Use the adapted model: `model.name: {Path(recipe.output_dir) / recipe.name / 'model'}`.", ""]
    return "\n".join(lines)
