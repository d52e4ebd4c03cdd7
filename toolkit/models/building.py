"""Building the models every task trains, by hub id or local path: a token classifier
(token_classification), a causal LM (span_generation, pretrain_clm) and a masked LM
(pretrain_mlm), each with the recipe's dropout knobs and optional LoRA through peft."""

from __future__ import annotations

import re

from toolkit.errors import ConfigError, ToolkitError
from toolkit.models.gemma import register_gemma_tagger
from toolkit.models.pretrained import check_window_fits, fix_decoder_tokenizer, load_tokenizer, resolve_model_name
from toolkit.registry.recipe_sections import ClassifierModelConfig, LoraConfigModel, ModelConfig, PretrainedModelConfig
from toolkit.spans.label_space import LabelSpace

# Config attribute names per knob, across architectures (BERT/RoBERTa, DistilBERT, Llama/GPT-2 ...).
DROPOUT_ATTRS = {
    "hidden": ("hidden_dropout_prob", "hidden_dropout", "dropout", "resid_pdrop"),
    "attention": ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop"),
    "classifier": ("classifier_dropout",),
}


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


_LAYER = re.compile(r"\.(?:layer|layers|h|block)\.(\d+)\.")


def parameter_depth(name: str, num_layers: int) -> int:
    """0 for embeddings, 1..num_layers for transformer block i-1, num_layers + 1 for anything above
    (final norms, pooler)."""
    m = _LAYER.search(name)
    if m:
        return int(m.group(1)) + 1
    if "embed" in name:
        return 0
    return num_layers + 1


def freeze_below_top_layers(model, top: int) -> list[str]:
    """model.train_layers: freeze the embeddings and every transformer layer below the last `top` (depths as
    the layer-wise learning rates count them); the layers above, final norms and the head stay trainable.
    Returns the frozen parameters' names."""
    layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    if not layers:
        raise ConfigError(
            "model.train_layers: this model's config does not say how many layers it has",
            fix="remove model.train_layers",
        )
    frozen = []
    for name, parameter in model.named_parameters():
        if parameter_depth(name, layers) <= layers - top:
            parameter.requires_grad_(False)
            frozen.append(name)
    return frozen


def build_token_model(cfg: ClassifierModelConfig, space: LabelSpace):
    """(model, tokenizer) for token classification; LoRA-wrapped when enabled."""
    return _token_classifier(cfg, space.output_names())


def build_segment_model(cfg: ClassifierModelConfig, labels: list[str]):
    """(model, tokenizer) for segment classification: a token classifier with one logit per label,
    read per segment as the mean of its tokens' logits (`spans/segment_decoding.py`)."""
    return _token_classifier(cfg, list(labels))


def renew_head_for_other_labels(model, name: str, names: list[str]) -> bool:
    """A start that is itself a token classifier of other labels (a run trained on other clause types): its
    head is drawn anew, since a head of as many labels would otherwise load with each row meaning another
    label. The encoder below keeps what it learned. True when the head was renewed."""
    from transformers import AutoConfig

    source = AutoConfig.from_pretrained(name)  # as saved, before the recipe's labels were set on it
    if not any(a.endswith("ForTokenClassification") for a in source.architectures or []):
        return False  # a plain encoder: its head is new anyway
    if list(source.id2label.values()) == list(names):
        return False  # the same labels in the same order: the head means what it meant
    head = next(getattr(model, n) for n in ("classifier", "score") if hasattr(model, n))
    head.weight.data.normal_(0.0, getattr(model.config, "initializer_range", 0.02))
    if head.bias is not None:
        head.bias.data.zero_()
    return True


def keep_first_layers(config, keep: int | None, name: str) -> None:
    """model.keep_layers: the model is built with its first `keep` layers; from_pretrained loads their weights
    and leaves the rest unread (DistilBERT and TinyBERT start students from a teacher's layers the same way)."""
    if keep is None:
        return
    layers = getattr(config, "num_hidden_layers", None)
    if layers is None:
        raise ToolkitError(
            f"model.keep_layers: {name!r} does not say how many layers it has", fix="drop model.keep_layers"
        )
    if keep > layers:
        raise ToolkitError(
            f"model.keep_layers={keep}, but {name!r} has {layers} layers",
            fix=f"set model.keep_layers to {layers} or less",
        )
    config.num_hidden_layers = keep
    if isinstance(getattr(config, "layer_types", None), list):  # decoders with per-layer attention kinds
        config.layer_types = config.layer_types[:keep]


def _token_classifier(cfg: ClassifierModelConfig, names: list[str]):
    from transformers import AutoConfig, AutoModelForTokenClassification

    name = resolve_model_name(cfg.name)
    tokenizer = load_tokenizer(name)
    if tokenizer.pad_token is None:  # decoders used as taggers often ship without one
        tokenizer.pad_token = tokenizer.eos_token
    try:
        config = AutoConfig.from_pretrained(
            name, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}
        )
    except (OSError, ValueError) as exc:
        raise ToolkitError(
            f"cannot load model {name!r}: {str(exc).splitlines()[0]}",
            fix="pass a local model directory or a reachable hub id as model.name",
        ) from None
    check_window_fits(config, cfg.max_length, cfg.name)
    keep_first_layers(config, getattr(cfg, "keep_layers", None), cfg.name)
    apply_dropout(config, cfg.dropout)
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = tokenizer.pad_token_id
    register_gemma_tagger(config.model_type)
    model = AutoModelForTokenClassification.from_pretrained(name, config=config, ignore_mismatched_sizes=True)
    renew_head_for_other_labels(model, name, names)
    if cfg.attention == "bidirectional":
        from toolkit.models.attention import make_bidirectional

        make_bidirectional(model, cfg.bidirectional_layers)
    add_embedding_dropout(model, cfg.dropout.embedding)
    if cfg.train_layers is not None:
        freeze_below_top_layers(model, cfg.train_layers)
    if cfg.lora.enabled:
        from peft import TaskType, get_peft_model

        head = [n for n in ("classifier", "score") if hasattr(model, n)]
        # The new head is trained fully and saved with the adapter.
        model = get_peft_model(model, lora_config(cfg.lora, TaskType.TOKEN_CLS, config, modules_to_save=head))
    return model, tokenizer


def build_causal_model(m: ModelConfig, quantization: str = "none"):
    """(model, tokenizer): any causal LM, LoRA through peft unless full fine-tuning; QLoRA on CUDA
    (quantization "4bit", span_generation's model.quantization)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    name = resolve_model_name(m.name, decoder=True)
    tokenizer = load_tokenizer(name)
    if tokenizer.eos_token is None:
        raise ToolkitError(
            f"tokenizer of {name!r} has no end-of-sequence token",
            fix="use a causal LM whose tokenizer defines eos_token",
        )
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        fix_decoder_tokenizer(tokenizer)
        if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
            tokenizer.add_special_tokens(
                {"pad_token": "<|pad|>"}
            )  # padding must differ from EOS, or EOS is never learned
    config = AutoConfig.from_pretrained(name)
    apply_dropout(config, m.dropout)
    kwargs = {}
    if quantization == "4bit":
        if not torch.cuda.is_available():
            raise ConfigError(
                "model.quantization=4bit (QLoRA) needs a CUDA device", fix="set model.quantization=none on CPU"
            )
        try:
            import bitsandbytes  # noqa: F401
            from transformers import BitsAndBytesConfig
        except ImportError:
            raise ConfigError(
                "model.quantization=4bit needs bitsandbytes",
                fix="pip install bitsandbytes, or set model.quantization=none",
            ) from None
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
    model = AutoModelForCausalLM.from_pretrained(name, config=config, **kwargs)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id
    add_embedding_dropout(model, m.dropout.embedding)
    if m.lora.enabled:
        from peft import TaskType, get_peft_model, prepare_model_for_kbit_training

        if quantization == "4bit":
            model = prepare_model_for_kbit_training(model)
        model = get_peft_model(model, lora_config(m.lora, TaskType.CAUSAL_LM, config))
    return model, tokenizer


# Attention projections to adapt where peft has no default for the architecture (peft then raises "Please
# specify target_modules"); the query and value projections, as peft's defaults for BERT and Llama.
EXTRA_LORA_TARGETS = {"mpnet": ["q", "v"], "distilbert": ["q_lin", "v_lin"]}


def default_lora_targets(config) -> list[str] | None:
    """The modules LoRA adapts when model.lora.target_modules is unset: peft's default for the architecture
    (None lets peft choose), else this project's, else a config error that asks for them."""
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_DEFAULTS

    kind = getattr(config, "model_type", "")
    if kind in PEFT_DEFAULTS:
        return None
    if kind in EXTRA_LORA_TARGETS:
        return EXTRA_LORA_TARGETS[kind]
    raise ConfigError(
        f"model.lora: peft has no default modules to adapt in a {kind!r} model",
        fix="set model.lora.target_modules to its attention projections' names, e.g. [query, value]",
    )


def lora_config(lora: LoraConfigModel, task_type, config, **extra):
    """peft's LoraConfig for a recipe's `model.lora`; `top_layers` becomes the indices of the last N layers."""
    from peft import LoraConfig

    layers = None
    if lora.top_layers is not None:
        total = getattr(config, "num_hidden_layers", None)
        if total is None:
            raise ConfigError(
                "model.lora.top_layers: this model's config does not say how many layers it has",
                fix="remove model.lora.top_layers",
            )
        # At most N: a recipe stays usable on a smaller model (the tests' two-layer ones adapt every layer).
        layers = list(range(max(0, total - lora.top_layers), total))
    return LoraConfig(
        task_type=task_type,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules or default_lora_targets(config),
        layers_to_transform=layers,
        **extra,
    )


def build_masked_model(m: PretrainedModelConfig):
    """(model, tokenizer, head_initialised). An encoder saved without its MLM head (the offline MiniLM
    and MPNet, saved as sentence encoders) gets one: decoder tied to the input embeddings, transform =
    identity."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    name = resolve_model_name(m.name)
    tokenizer = load_tokenizer(name)
    if tokenizer.mask_token is None:
        raise ConfigError(
            f"tokenizer of {name!r} has no mask token",
            fix="pretrain_mlm needs an encoder with a [MASK] token (use pretrain_clm for decoders)",
        )
    config = AutoConfig.from_pretrained(name)
    check_window_fits(config, m.max_length, m.name)
    apply_dropout(config, m.dropout)
    model, info = AutoModelForMaskedLM.from_pretrained(name, config=config, output_loading_info=True)
    missing = set(info.get("missing_keys", []))
    head_initialised = any("predictions" in k or k.startswith(("cls.", "lm_head")) for k in missing)
    if head_initialised:
        with torch.no_grad():
            for key in missing:
                # BERT names the head's dense layer cls.predictions.transform.dense, MPNet/RoBERTa lm_head.dense.
                if key.endswith(("transform.dense.weight", "lm_head.dense.weight")):
                    weight = model.get_parameter(key)
                    if weight.shape[0] == weight.shape[1]:
                        # Start from the encoder's own hidden states: predictions = LayerNorm(gelu(h)) @ E^T.
                        weight.copy_(torch.eye(weight.shape[0]))
                        model.get_parameter(key.replace(".weight", ".bias")).zero_()
        model.tie_weights()
    add_embedding_dropout(model, m.dropout.embedding)
    return model, tokenizer, head_initialised
