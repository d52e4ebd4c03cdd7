"""segments.cache_frozen_layers: with model.train_layers, the embeddings and frozen lower layers of an encoder
give the same hidden states for an input every epoch, so they are computed once per input and replayed.

Our own because neither transformers nor peft caches a frozen trunk's activations across epochs. The model is
not changed: for the replayed forward pass its embeddings module is swapped, for that call only, for one that
returns the cached states and its layer list for the trainable top layers, so the model's own attention-mask
preparation, top layers and head run as they always do. The cached states are computed with the frozen part
in eval mode (no dropout inside it), and the model that is saved, exported and served is the whole model.

One cache serves every encoder of a run (each fold's, the refit, a hard-negative stage): they all start from the
same pretrained weights and never train the frozen part, so an input's states are the same for each; `bind` points
the cache at the next encoder.

The cache holds at most `max_bytes` of states (segments.frozen_cache_mb): past that, the inputs read longest ago
are evicted and computed again when they come back, so memory stays bounded on any training set; its report gives
the hit rate and what was evicted.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager

from toolkit.errors import ConfigError


def _trunk(model):
    """(the model's base, its embeddings, its list of transformer layers) for BERT-family encoders."""
    base = getattr(model, "base_model", None)
    embeddings = getattr(base, "embeddings", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if embeddings is None or layers is None:
        raise ConfigError(
            f"segments.cache_frozen_layers: {type(model).__name__} does not keep its layers where BERT-family "
            "encoders do (base_model.embeddings, base_model.encoder.layer)",
            fix="set segments.cache_frozen_layers=false",
        )
    return base, embeddings, layers


class FrozenLayerCache:
    """Hidden states after the embeddings and the lowest `frozen` layers, one entry per distinct input, at most
    `max_bytes` of them (least recently read evicted first)."""

    def __init__(self, model, frozen: int, max_bytes: int | None = None):
        self.bind(model)
        if not 0 < frozen < len(self.layers):
            raise ConfigError(
                f"segments.cache_frozen_layers: model.train_layers leaves {frozen} of {len(self.layers)} layers "
                "frozen; there is nothing to cache below a trainable layer",
                fix="set model.train_layers below the model's layer count, or segments.cache_frozen_layers=false",
            )
        self.frozen, self.max_bytes = frozen, max_bytes  # bind() read the layers
        self.states: OrderedDict[tuple[int, ...], object] = OrderedDict()  # least recently read first
        self.bytes = self.peak_bytes = 0
        self.computed = 0  # inputs whose frozen part was run (again, after an eviction)
        self.replayed = 0  # inputs served from the cache
        self.evicted = 0

    def bind(self, model) -> FrozenLayerCache:
        """Serve `model` from now on, with the states cached so far (its frozen part is the same pretrained one)."""
        self.base, self.embeddings, self.layers = _trunk(model)
        return self

    @contextmanager
    def _swapped(self, embeddings, layers):
        import torch

        saved = self.base.embeddings, self.base.encoder.layer
        self.base.embeddings, self.base.encoder.layer = embeddings, torch.nn.ModuleList(layers)
        try:
            yield
        finally:
            self.base.embeddings, self.base.encoder.layer = saved

    def _compute(self, ids, mask, rows: list[int]) -> dict[tuple[int, ...], object]:
        """The frozen part's states of these rows, by input."""
        import torch

        lower = list(self.layers[: self.frozen])
        modes = [m.training for m in (self.embeddings, *lower)]
        for m in (self.embeddings, *lower):
            m.eval()
        try:
            with torch.no_grad(), self._swapped(self.embeddings, lower):
                hidden = self.base(input_ids=ids[rows], attention_mask=mask[rows]).last_hidden_state
        finally:
            for m, mode in zip((self.embeddings, *lower), modes):
                m.train(mode)
        self.computed += len(rows)
        out = {}
        for row, states in zip(rows, hidden):
            n = int(mask[row].sum())
            out[tuple(ids[row, :n].tolist())] = states[:n].detach().clone()
        return out

    def _keep(self, computed: dict) -> None:
        """Add computed states, then evict the least recently read until the cache is within its bound."""
        for key, states in computed.items():
            if key not in self.states:
                self.states[key] = states
                self.bytes += states.numel() * states.element_size()
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        while self.max_bytes is not None and self.bytes > self.max_bytes and self.states:
            _, states = self.states.popitem(last=False)
            self.bytes -= states.numel() * states.element_size()
            self.evicted += 1

    def forward(self, model, inputs: dict):
        """The model's outputs on `inputs` (input_ids, attention_mask, right-padded), its frozen part replayed."""
        import torch

        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        lengths = mask.sum(dim=1).tolist()
        keys = [tuple(ids[i, :n].tolist()) for i, n in enumerate(lengths)]
        missing = [i for i, k in enumerate(keys) if k not in self.states]
        computed = self._compute(ids, mask, missing) if missing else {}
        self.replayed += len(keys) - len(missing)
        for k in keys:
            if k in self.states:
                self.states.move_to_end(k)  # read now: the last to be evicted
        batch = [computed[k] if k in computed else self.states[k] for k in keys]
        hidden = torch.zeros(
            (len(keys), ids.shape[1], batch[0].shape[-1]), dtype=batch[0].dtype, device=batch[0].device
        )
        for i, (states, n) in enumerate(zip(batch, lengths)):
            hidden[i, :n] = states
        self._keep(computed)
        with self._swapped(_Replay(hidden), list(self.layers[self.frozen :])):
            return model(input_ids=ids, attention_mask=mask)

    def report(self) -> dict:
        read = self.computed + self.replayed
        return {
            "frozen_layers": self.frozen,
            "inputs_computed": self.computed,
            "inputs_replayed": self.replayed,
            "hit_rate": round(self.replayed / read, 4) if read else None,
            "evicted": self.evicted,
            "max_mb": None if self.max_bytes is None else round(self.max_bytes / 2**20, 1),
            "peak_mb": round(self.peak_bytes / 2**20, 1),
        }


def _replay_class():
    import torch

    class Replay(torch.nn.Module):
        """Stands in for the embeddings: returns the cached states whatever it is asked."""

        def __init__(self, hidden):
            super().__init__()
            self.hidden = hidden

        def forward(self, *args, **kwargs):
            return self.hidden

    return Replay


def _Replay(hidden):  # noqa: N802  (a module built on first use: importing torch here would load it for the CLI)
    return _replay_class()(hidden)
