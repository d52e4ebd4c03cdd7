"""Building token-classification models: any encoder (or decoder) by hub id or path, with the
dropout knobs, optional LoRA, and the metadata that decoding needs."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.config import ModelConfig
from toolkit.decoding import DecodeSettings
from toolkit.errors import ConfigError, ToolkitError
from toolkit.models import default_encoder

# Config attribute names per knob, across architectures (BERT/RoBERTa, DistilBERT, Llama/GPT-2 ...).
DROPOUT_ATTRS = {
    "hidden": ("hidden_dropout_prob", "hidden_dropout", "dropout", "resid_pdrop"),
    "attention": ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop"),
    "classifier": ("classifier_dropout",),
}
META_FILE = "toolkit.json"


def resolve_model_name(name: str, task: str = "token_classification") -> str:
    if name != "default":
        return name
    if task in ("span_generation", "pretrain_clm"):
        from toolkit.models import default_decoder

        return default_decoder()
    return default_encoder()


def apply_dropout(config, dropout) -> dict[str, float]:
    """Set the requested dropout knobs on a transformers config; returns what was set."""
    applied = {}
    for knob, attrs in DROPOUT_ATTRS.items():
        value = getattr(dropout, knob)
        if value is None:
            continue
        present = [a for a in attrs if hasattr(config, a)]
        if knob == "classifier" and not present:
            present = ["classifier_dropout"]  # token-classification heads read it when set
        if not present:
            raise ConfigError(
                f"model.dropout.{knob}: {type(config).__name__} has no {knob} dropout setting",
                fix=f"remove model.dropout.{knob} for this architecture",
            )
        for a in present:
            setattr(config, a, value)
            applied[a] = value
    return applied


def add_embedding_dropout(model, p: float):
    """Dropout on the token-embedding output, separate from the model's own dropouts.

    A forward hook on `get_input_embeddings()` works for every architecture; it is
    active only in training mode, so inference is unaffected."""
    if p <= 0:
        return None
    import torch.nn.functional as F

    def hook(module, inputs, output):
        return F.dropout(output, p=p, training=module.training)

    return model.get_input_embeddings().register_forward_hook(hook)


def build_token_model(cfg: ModelConfig, settings: DecodeSettings, num_outputs: int):
    """(model, tokenizer) for token classification; LoRA-wrapped when enabled."""
    from transformers import AutoConfig, AutoModelForTokenClassification

    from toolkit.tokenization import load_tokenizer

    name = resolve_model_name(cfg.name)
    tokenizer = load_tokenizer(name)
    if tokenizer.pad_token is None:  # decoders used as taggers often ship without one
        tokenizer.pad_token = tokenizer.eos_token
    if settings.multi_label:
        names = [f"{p}-{lb}" for lb in settings.labels for p in ("O", "B", "I")]
    else:
        names = ["O"] + [f"{p}-{lb}" for lb in settings.labels for p in ("B", "I")]
    try:
        config = AutoConfig.from_pretrained(name, num_labels=num_outputs, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    except (OSError, ValueError) as exc:
        raise ToolkitError(f"cannot load model {name!r}: {str(exc).splitlines()[0]}", fix="pass a local model directory or a reachable hub id as model.name") from None
    apply_dropout(config, cfg.dropout)
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = tokenizer.pad_token_id
    model = AutoModelForTokenClassification.from_pretrained(name, config=config)
    add_embedding_dropout(model, cfg.dropout.embedding)
    if cfg.lora.enabled:
        from peft import LoraConfig, TaskType, get_peft_model

        head = [n for n in ("classifier", "score") if hasattr(model, n)]
        lora = LoraConfig(
            task_type=TaskType.TOKEN_CLS,
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=cfg.lora.target_modules,
            modules_to_save=head,  # the new head is trained fully and saved with the adapter
        )
        model = get_peft_model(model, lora)
    return model, tokenizer


def save_model_dir(model, tokenizer, directory: Path, meta: dict) -> None:
    """A plain model directory (LoRA merged; the adapter kept in adapter/) plus toolkit.json."""
    directory.mkdir(parents=True, exist_ok=True)
    if hasattr(model, "merge_and_unload"):
        model.save_pretrained(directory / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def save_token_model(model, tokenizer, directory: Path, settings: DecodeSettings, max_length: int, stride: int) -> None:
    """A token-classification model directory, loadable by `Tagger.load` and exportable."""
    meta = {
        "task": "token_classification",
        "labels": list(settings.labels),
        "multi_label": settings.multi_label,
        "label_all_subtokens": settings.label_all_subtokens,
        "max_length": max_length,
        "stride": stride,
    }
    save_model_dir(model, tokenizer, directory, meta)


def load_meta(directory: Path) -> dict:
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise ToolkitError(f"{directory}: not a toolkit model directory (no {META_FILE})", fix="pass a run directory made by `toolkit run`, or its model/ folder")
    return json.loads(path.read_text(encoding="utf-8"))


def settings_from_meta(meta: dict) -> DecodeSettings:
    return DecodeSettings(tuple(meta["labels"]), meta["multi_label"], meta["label_all_subtokens"])
