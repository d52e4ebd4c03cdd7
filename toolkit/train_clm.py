"""The span-generation flow: data -> windows -> prompt/target examples -> Trainer (LoRA) -> saved
merged model -> generated, recovered and scored dev predictions. Reads top to bottom."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.clm_data import build_examples
from toolkit.config import Recipe
from toolkit.data import load_splits
from toolkit.errors import ConfigError, ToolkitError
from toolkit.features import FeatureReport, filter_labels
from toolkit.metrics import score
from toolkit.modeling import add_embedding_dropout, apply_dropout, resolve_model_name, save_model_dir
from toolkit.reporting import write_metrics, write_predictions
from toolkit.training import pad_collator, parameter_counts, peak_rss_mib, start_run_dir, train_resuming, training_arguments, world_size


def build_causal_model(recipe: Recipe):
    """(model, tokenizer): any causal LM, LoRA through peft unless full fine-tuning; QLoRA on CUDA."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toolkit.models import fix_decoder_tokenizer
    from toolkit.tokenization import load_tokenizer

    m = recipe.model
    name = resolve_model_name(m.name, "span_generation")
    tokenizer = load_tokenizer(name)
    if tokenizer.eos_token is None:
        raise ToolkitError(f"tokenizer of {name!r} has no end-of-sequence token", fix="use a causal LM whose tokenizer defines eos_token")
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        fix_decoder_tokenizer(tokenizer)
        if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
            tokenizer.add_special_tokens({"pad_token": "<|pad|>"})  # padding must differ from EOS, or EOS is never learned
    config = AutoConfig.from_pretrained(name)
    apply_dropout(config, m.dropout)
    kwargs = {}
    if m.quantization == "4bit":
        if not torch.cuda.is_available():
            raise ConfigError("model.quantization=4bit (QLoRA) needs a CUDA device", fix="set model.quantization=none on CPU")
        try:
            from transformers import BitsAndBytesConfig
            import bitsandbytes  # noqa: F401
        except ImportError:
            raise ConfigError("model.quantization=4bit needs bitsandbytes", fix="pip install bitsandbytes, or set model.quantization=none") from None
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(name, config=config, **kwargs)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id
    add_embedding_dropout(model, m.dropout.embedding)
    if m.lora.enabled:
        from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training

        if m.quantization == "4bit":
            model = prepare_model_for_kbit_training(model)
        model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=m.lora.r, lora_alpha=m.lora.alpha,
                                                 lora_dropout=m.lora.dropout, target_modules=m.lora.target_modules))
    return model, tokenizer


def save_causal_model(model, tokenizer, directory: Path, recipe: Recipe, labels: list[str]) -> None:
    g = recipe.generation
    meta = {
        "task": "span_generation", "labels": labels, "max_length": recipe.model.max_length, "stride": recipe.model.stride,
        "max_new_tokens": g.max_new_tokens, "batch_size": g.batch_size, "constrained": g.constrained,
        "min_similarity": g.min_similarity, "chat_template": g.chat_template,
    }
    save_model_dir(model, tokenizer, directory, meta)


def run_span_generation(recipe: Recipe, run_dir: Path, dry_run: bool = False) -> dict | None:
    import torch
    from datasets import Dataset
    from transformers import EarlyStoppingCallback, Trainer, set_seed

    from toolkit.generate import Generator

    set_seed(recipe.seed)
    train_records, dev_records = load_splits(recipe)
    labels = recipe.data.labels or sorted({s.label for r in train_records for s in r.spans})
    if not labels:
        raise ToolkitError(f"{recipe.data.train}: no spans to learn from", fix="label some spans, or check data.labels")
    other = FeatureReport()
    train_records = filter_labels(train_records, labels, other)
    dev_records = filter_labels(dev_records, labels, other)
    model, tokenizer = build_causal_model(recipe)
    m, g = recipe.model, recipe.generation
    train_examples, train_report = build_examples(tokenizer, train_records, labels, m.max_length, m.stride, g.chat_template, recipe.windows.negative_ratio, recipe.seed)
    dev_examples, dev_report = build_examples(tokenizer, dev_records, labels, m.max_length, m.stride, g.chat_template)
    t = recipe.train
    plan = {
        "labels": labels, "train": train_report.to_dict(), "dev": dev_report.to_dict(), "spans_other_labels": dict(other.spans_other_labels),
        "steps_per_epoch": max(1, len(train_examples) // (t.batch_size * t.gradient_accumulation * world_size())),
        **parameter_counts(model),
    }
    if dry_run:
        return {"plan": plan}
    start_run_dir(recipe, run_dir, plan)

    # Generating on the dev set every epoch would dominate CPU time; the checkpoint is chosen by
    # dev loss on the completions, and the final model is scored by generation below.
    args = training_arguments(recipe, run_dir, metric="eval_loss", greater_is_better=False)
    trainer = Trainer(
        model=model, args=args,
        train_dataset=Dataset.from_list(train_examples), eval_dataset=Dataset.from_list(dev_examples),
        data_collator=pad_collator(tokenizer.pad_token_id),
        callbacks=[EarlyStoppingCallback(t.early_stopping_patience)] if t.early_stopping_patience else [],
    )
    train_seconds, resumed_from = train_resuming(trainer, run_dir)
    if not trainer.is_world_process_zero():
        return None

    save_causal_model(trainer.model, tokenizer, run_dir / "model", recipe, labels)
    (run_dir / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trainer.state.log_history), encoding="utf-8")
    generator = Generator.load(run_dir)  # score exactly what was saved
    predictions = generator.predict([r.text for r in dev_records])
    gen = generator.last_report
    unlocated = [[h["label"] for h in gen["hallucinated"] if h["doc"] == i] for i in range(len(dev_records))]
    metrics = score([r.text for r in dev_records], [r.spans for r in dev_records], predictions, recipe.eval.boundary_tolerance,
                    recipe.eval.jaccard_threshold, recipe.eval.bootstrap, recipe.seed, unlocated)
    epochs = float(trainer.state.epoch or 0)
    extra = {
        "model": m.name, "train_seconds": round(train_seconds, 1), "epochs_completed": round(epochs, 2),
        "optimizer_steps": trainer.state.global_step,
        "train_tokens_per_second": round(train_report.tokens * epochs / train_seconds, 1) if train_seconds else None,
        "peak_rss_mib": peak_rss_mib(),
        "peak_cuda_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else None,
        "eval_seconds": gen["seconds"], "generated_tokens_per_second": gen["generated_tokens_per_second"],
        "constrained_decoding": gen["constrained"], "recovered_by": gen["recovered_by"], "hallucinated_spans": gen["hallucinated_spans"],
        "unknown_label_lines": gen["unknown_label_lines"], "malformed_lines": gen["malformed_lines"], "truncated_outputs": gen["truncated_outputs"],
        "world_size": world_size(), "resumed_from_checkpoint": resumed_from,
        "best_checkpoint_dev_loss": trainer.state.best_metric,
        "spans_not_representable_train": train_report.spans_not_representable, "spans_not_representable_dev": dev_report.spans_not_representable,
    }
    write_predictions(run_dir / "predictions.jsonl", dev_records, predictions)
    (run_dir / "hallucinations.jsonl").write_text("".join(json.dumps({**h, "id": dev_records[h["doc"]].id}) + "\n" for h in gen["hallucinated"]), encoding="utf-8")
    write_metrics(run_dir, metrics, f"{recipe.name}: dev", extra)
    return {**metrics, "run": extra}
