"""toolkit.json: what a saved model is and how it reads text. `ModelMeta` holds the fields every task saves;
each task's module adds its own (`Task.meta`), as its recipe adds its sections, so a field of another task is
refused. Each default is what a model saved before that key existed meant."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from toolkit.spans.label_space import LabelSpace


class ExportInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str  # the export path chosen (toolkit.deploy.paths.PATHS)
    runtime: str  # its runtime (toolkit.models.runtimes.RUNTIMES)
    precision: str
    # Taggers: windows sized to each document up to this many tokens (one pass when a document fits), where
    # export measured it within the parity budget and faster; None: the trained windows.
    window_limit: int | None = None
    # OpenVINO: input widths are rounded up to a multiple of this (its kernels are prepared per shape); the
    # export measured the artifact at it. Artifacts saved before the key existed ran at 64.
    pad_multiple: int = 64
    # OpenVINO: single windows up to this width run on models compiled for their exact shape; the export
    # measured the artifact so. Artifacts saved before the key existed ran every shape on one dynamic model.
    static_max_width: int = 0


class ModelMeta(BaseModel):
    """The fields of toolkit.json every task saves (token_classification's are these alone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task: str = "token_classification"  # models saved before "task" existed were taggers
    classifier: Literal["linear"] | None = None  # the model kind of a task variant (the linear segment baseline)
    labels: list[str] = []
    multi_label: bool = False
    label_all_subtokens: bool = False
    decoding: Literal["argmax", "viterbi"] = "argmax"  # saved before decoding existed: decoded by argmax
    max_length: int | None = None  # tokens per window (None: the linear baseline reads no windows)
    stride: int | None = None
    export: ExportInfo | None = None  # an artifact: the path `toolkit export` chose

    @property
    def space(self) -> LabelSpace:
        return LabelSpace(tuple(self.labels), self.multi_label, self.label_all_subtokens, self.decoding)

    def side_files(self) -> list[str]:
        """Files beside the weights that the predictor loads (an artifact carries them)."""
        return []

    def card_lines(self) -> list[str]:
        """What the model card says of how this model decides, beyond its windows and labels."""
        return []

    @property
    def decides_by_thresholds(self) -> bool:
        """Whether the model decides at thresholds saved with it (else by its decision rule)."""
        return False
