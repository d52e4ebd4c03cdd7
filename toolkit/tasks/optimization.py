"""Per-parameter learning rates for fine-tuning: layer-wise decay and a separate head rate, and
checkpoint averaging.

Layer-wise learning-rate decay (LLRD, ULMFiT / ELECTRA recipes) trains the lower layers, which hold
general features, more gently than the top ones; a freshly initialised head usually wants a larger
rate than the pretrained body. transformers' Trainer gives every parameter one rate, so the groups
are built here and handed to the Trainer's own optimizer class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from toolkit.models.building import parameter_depth


def learning_rates(
    names: Sequence[str],
    head: Iterable[str],
    num_layers: int,
    learning_rate: float,
    layer_decay: float | None,
    head_learning_rate: float | None,
) -> dict[str, float]:
    """Each parameter's rate: the head at head_learning_rate (or the top rate), the body at
    learning_rate x layer_decay^(num_layers + 1 - depth) (depth as `parameter_depth`)."""
    head = set(head)
    rates = {}
    for name in names:
        if name in head:
            rates[name] = head_learning_rate or learning_rate
        else:
            depth = parameter_depth(name, num_layers)
            rates[name] = learning_rate * (layer_decay ** (num_layers + 1 - depth) if layer_decay else 1.0)
    return rates


def parameter_groups(
    model,
    learning_rate: float,
    weight_decay: float,
    decay_names: set[str],
    layer_decay: float | None,
    head_learning_rate: float | None,
) -> list[dict]:
    """Optimizer groups of `model`'s trainable parameters, one per (rate, weight decay or not)."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    prefix = getattr(model, "base_model_prefix", "")
    # The head is what the base model does not hold (BERT's `classifier`, Llama's `score`).
    head = [n for n, _ in params if prefix and not n.startswith(prefix + ".")]
    num_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    rates = learning_rates([n for n, _ in params], head, num_layers, learning_rate, layer_decay, head_learning_rate)
    groups: dict[tuple[float, bool], list] = {}
    for n, p in params:
        groups.setdefault((rates[n], n in decay_names), []).append(p)
    return [
        {"params": ps, "lr": lr, "weight_decay": weight_decay if decays else 0.0}
        for (lr, decays), ps in sorted(groups.items(), key=lambda kv: kv[0])
    ]


def average_checkpoints(checkpoints: Sequence[Path]) -> dict:
    """The element-wise mean of the floating-point weights saved in `checkpoints` (model.safetensors
    each); integer buffers are taken from the last one."""
    from safetensors.torch import load_file

    states = [load_file(str(c / "model.safetensors")) for c in checkpoints]
    out = {}
    for key, last in states[-1].items():
        if last.is_floating_point():
            out[key] = sum(s[key].double() for s in states).div(len(states)).to(last.dtype)
        else:
            out[key] = last
    return out


def last_checkpoints(folder: Path, k: int) -> list[Path]:
    """The k checkpoints of a Trainer's output folder with the highest step numbers."""
    found = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return found[-k:]
