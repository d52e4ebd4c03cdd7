"""A decoder that tags with its causal mask removed (LS-unLLaMA, arXiv 2310.01208): every layer, or the top
N, attends to the whole window (padding excepted), as an encoder does.

Our own because transformers 4.57 has no switch for it outside Gemma 3 (`use_bidirectional_attention`,
all layers at once): each chosen layer's attention is told it is not causal, and a pre-hook hands it a
padding-only mask in place of the causal one. The number of layers is saved in the model's config.json
(`CONFIG_KEY`), so a reloaded model (eval, predict, export, serving) attends as it was trained."""

from __future__ import annotations

from toolkit.errors import ConfigError

CONFIG_KEY = "toolkit_bidirectional_layers"


def _decoder_layers(model):
    """(the module holding the layer stack, the layers): the first ModuleList of layers with a causal
    `self_attn` (Llama, Gemma, Qwen, Mistral ...)."""
    import torch.nn as nn

    for module in model.modules():
        for child in module.children():
            if isinstance(child, nn.ModuleList) and len(child) and getattr(child[0], "self_attn", None) is not None:
                if getattr(child[0].self_attn, "is_causal", False):
                    return module, list(child)
    return None, []


def make_bidirectional(model, top_layers: int | None = None) -> int:
    """Remove the causal mask from the top `top_layers` decoder layers (all when None or more than there are);
    returns how many. A model without causal decoder layers (an encoder) is a config error."""
    import threading

    import torch

    owner, layers = _decoder_layers(model)
    if not layers:
        raise ConfigError(
            f"model.attention=bidirectional: {type(model).__name__} has no causal decoder layers",
            fix="use it with a decoder (Llama, Gemma, Qwen ...); encoders attend both ways already",
        )
    implementation = getattr(model.config, "_attn_implementation", "eager")
    if implementation not in ("sdpa", "eager"):
        raise ConfigError(
            f"model.attention=bidirectional supports the sdpa and eager attention, not {implementation!r}",
            fix="load the model with attn_implementation sdpa or eager",
        )
    chosen = layers[-top_layers:] if top_layers else layers
    seen = threading.local()  # per thread: a service may run one model from several threads

    def remember_padding(module, args, kwargs):
        seen.mask = kwargs.get("attention_mask")

    def padding_only(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        batch, length = hidden.shape[:2]
        padding = getattr(seen, "mask", None)
        if padding is None:  # no padding: nothing to mask, and the layer is no longer causal
            kwargs["attention_mask"] = None
            return args, kwargs
        keys = padding[:, None, None, :length].bool().expand(batch, 1, length, length)
        if implementation == "sdpa":
            kwargs["attention_mask"] = keys
        else:  # eager adds the mask to the scores
            blocked = torch.finfo(hidden.dtype).min
            kwargs["attention_mask"] = torch.zeros(keys.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
                ~keys, blocked
            )
        return args, kwargs

    owner.register_forward_pre_hook(remember_padding, with_kwargs=True)
    for layer in chosen:
        layer.self_attn.is_causal = False
        layer.register_forward_pre_hook(padding_only, with_kwargs=True)
    setattr(model.config, CONFIG_KEY, len(chosen))
    return len(chosen)


def restore_attention(model) -> None:
    """Rebuild a saved model's bidirectional layers (config.json says how many); causal models are left alone."""
    count = getattr(model.config, CONFIG_KEY, None)
    if count:
        make_bidirectional(model, count)
