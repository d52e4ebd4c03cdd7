"""The label space of a tagger: labels, their tag names and how model outputs map to them. Pure.

The one place tag names are written. Flat mode: one IOB2 tag per token (O, B-X, I-X, ...).
Multi-label mode: an O/B/I softmax per label, so spans of different labels may overlap.
Saved with every tagger (toolkit.json) and read back for decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LAYER_TAGS = ("O", "B", "I")  # one multi-label layer's outputs, in order


def flat_tags(labels: Sequence[str]) -> list[str]:
    """Flat IOB2 tag set: O, then B-/I- for each label in order."""
    return ["O"] + [f"{p}-{lb}" for lb in labels for p in ("B", "I")]


def layer_tags(label: str) -> list[str]:
    """The IOB2 tags of one label's multi-label layer: O, B-label, I-label."""
    return ["O", f"B-{label}", f"I-{label}"]


@dataclass(frozen=True)
class LabelSpace:
    labels: tuple[str, ...]
    multi_label: bool = False
    label_all_subtokens: bool = False
    decoding: str = "argmax"  # or "viterbi": see toolkit.spans.viterbi

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))

    @property
    def tags(self) -> list[str]:
        """The flat IOB2 tag set (also each training target's ids in flat mode)."""
        return flat_tags(self.labels)

    def output_names(self) -> list[str]:
        """The model's outputs in order (its id2label). Flat: O, B-X, I-X, ...; multi-label: O-X, B-X, I-X per label."""
        if self.multi_label:
            return [f"{p}-{lb}" for lb in self.labels for p in LAYER_TAGS]
        return self.tags

    def to_meta(self) -> dict:
        return {
            "labels": list(self.labels),
            "multi_label": self.multi_label,
            "label_all_subtokens": self.label_all_subtokens,
            "decoding": self.decoding,
        }
