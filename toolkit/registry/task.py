"""What every task is: a `Task` (its recipe, flow, predictor and what export, the model card and
compare need to know of it) and `RecipeBase`, the sections every recipe shares."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from toolkit.registry.recipe_sections import DataConfig, Strict, SweepConfig
from toolkit.registry.saved import ModelMeta

# What a task's model puts out, which is what export compares for parity and how compare times it:
# per-token tag logits, per-token logits of segment labels, or generated text.
Outputs = Literal["tags", "segment_scores", "generated", "none"]


class RecipeBase(Strict):
    """The keys every recipe has; each task's recipe adds the sections it accepts."""

    task: str = Field(description="Which task the recipe trains (the sections below depend on it).")
    name: str = Field(description="Run name; the run directory is <output_dir>/<name>.")
    seed: int = Field(default=13, description="Random seed of the run (sampling, initialisation, splits).")
    output_dir: str = Field(default="runs", description="Where run directories go.")
    data: DataConfig = Field(description="Where the labelled data is and which labels to learn.")
    sweep: SweepConfig | None = Field(default=None, description="Makes the recipe a sweep (off when absent).")

    # The keys of metrics.json "summary" a run of this recipe writes (what sweep.metric may name).
    summary_metrics: ClassVar[tuple[str, ...]] = ()

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not v or any(c in v for c in "/\\") or v.startswith("."):
            raise ValueError("name must be a plain directory name (no slashes)")
        return v

    @model_validator(mode="after")
    def _sweep_keys_exist(self) -> RecipeBase:
        if self.sweep is None:
            return self
        data = self.model_dump()
        for key in self.sweep.params:
            node: Any = data
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    raise ValueError(
                        f"sweep.params key {key!r} is not a key of this recipe: check its spelling and the task's "
                        f"sections"
                    )
                node = node[part]
        metrics = self.metric_names()
        if self.sweep.metric not in metrics:
            raise ValueError(
                f"sweep.metric {self.sweep.metric!r} is not a dev metric of task {self.task}: use one of "
                f"{sorted(metrics)}"
            )
        return self

    def metric_names(self) -> tuple[str, ...]:
        """The keys of metrics.json "summary" this recipe's runs write."""
        return self.summary_metrics

    def curve_documents(self) -> int | None:
        """Dev documents scored at every checkpoint for the learning curve (eval.curve_docs); None: no curve."""
        return None


def _attribute(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Task:
    """One `task:` of a recipe (or one model kind of it: the linear segment baseline). Every module that
    needs to know something about a task asks its Task; none branches on a task's name."""

    name: str  # the recipe's task: value, and toolkit.json's "task"
    recipe: type[RecipeBase]
    summary: str  # what the model card says the model does
    flow: str  # "module:Class" of its training flow (imported on demand: torch is heavy)
    predictor: str | None  # "module:Class" of its predictor; None: the model extracts nothing by itself
    variant: str | None = None  # the model kind that selects this entry (toolkit.json "classifier")
    decoder: bool = False  # 'default' model.name is the offline decoder, not the encoder
    outputs: Outputs = "none"
    pipeline_tag: str | None = None  # the Hugging Face pipeline tag of the model card
    not_exported: str | None = None  # why `toolkit export` refuses it (None: it exports)
    speed_docs: int = 8  # documents export times one at a time per path
    onnx_task: str = "token-classification"  # optimum's task name for the ONNX graph
    # "module:function": (a recipe mapping, a function applying the command line's overrides) -> its baseline's
    # mapping (`toolkit run --linear-baseline`); None: the task has no baseline
    baseline: str | None = None
    meta: type[ModelMeta] = ModelMeta  # the toolkit.json fields its models save

    @property
    def key(self) -> str:
        """Its registry key: the task name, with the model kind for a variant ("segment_classification/linear")."""
        return f"{self.name}/{self.variant}" if self.variant else self.name

    @property
    def generates(self) -> bool:
        return self.outputs == "generated"

    def flow_class(self) -> type:
        return _attribute(self.flow)

    def predictor_class(self) -> type | None:
        return _attribute(self.predictor) if self.predictor else None

    def baseline_data(self, data: dict, apply_overrides) -> dict | None:
        """A recipe mapping of this task as its baseline's, overrides applied (None: the task has no baseline)."""
        return _attribute(self.baseline)(data, apply_overrides) if self.baseline else None
