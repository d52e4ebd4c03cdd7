"""task: segment_classification with `model.kind: linear`: the bag-of-words baseline (TF-IDF and a
logistic regression per label), fitted in seconds, scored like every segment model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.errors import ConfigError
from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_sections import Strict
from toolkit.registry.segment_classification import SegmentDecisionConfig, SegmentModelMeta
from toolkit.registry.task import RecipeBase, Task


class LinearModelConfig(Strict):
    """The segment task's bag-of-words baseline: TF-IDF and a logistic regression per label (scikit-learn)."""

    kind: Literal["linear"] = Field(description="linear: the bag-of-words baseline (no transformer, no training loop).")

    @property
    def name(self) -> str:
        """What run records and tables show as the model."""
        return self.kind


class LinearModelRecipe(ExtractionRecipe):
    task: Literal["segment_classification"]
    model: LinearModelConfig
    segments: SegmentDecisionConfig = Field(default_factory=SegmentDecisionConfig)

    @model_validator(mode="after")
    def _held_out_is_the_encoders(self) -> LinearModelRecipe:
        if self.segments.thresholds in ("held_out", "cross_fitted"):
            raise ValueError(
                f"segments.thresholds={self.segments.thresholds} keeps training documents from an encoder; the linear "
                "baseline refits in seconds, so it chooses on every training document out of fold: use out_of_fold"
            )
        return self


def linear_baseline_data(data: dict) -> dict:
    """A segment recipe's mapping as its bag-of-words baseline's: the same data, segment decisions and
    scoring, no encoder sections, and a name with a `_linear` suffix so the encoder's run is kept. An encoder's
    thresholds=held_out, cross_fitted or fixed becomes out_of_fold: thresholds chosen on training documents, dev only
    reporting (the linear model's balanced probabilities are not calibrated for a fixed 0.5)."""
    if data.get("task") != TASK.name:
        raise ConfigError(
            "--linear-baseline fits the segment task's bag-of-words baseline; "
            f"this recipe's task is {data.get('task')}",
            fix="pass a segment_classification recipe",
        )
    kept = {k: v for k, v in data.items() if k in ("task", "name", "seed", "output_dir", "data", "eval")}
    segments = {k: v for k, v in (data.get("segments") or {}).items() if k in SegmentDecisionConfig.model_fields}
    if segments.get("thresholds") in ("held_out", "cross_fitted", "fixed"):
        # The baseline's way to choose on training documents, not dev: all of them, out of fold.
        segments["thresholds"] = "out_of_fold"
    return {
        **kept,
        "name": linear_name(kept.get("name")),
        "model": {"kind": "linear"},
        "segments": segments,
    }


def baseline_recipe_data(data: dict, apply_overrides) -> dict:
    """`--linear-baseline` (the segment Task's baseline hook): the overrides apply to the baseline's mapping (an
    encoder key is refused there), and a name given by an override gets the `_linear` suffix as a name in the
    file does, so the encoder's run is kept."""
    baseline = apply_overrides(linear_baseline_data(data))
    baseline["name"] = linear_name(baseline.get("name"))
    return baseline


def linear_name(name: object) -> str:
    """The baseline's run name: the encoder's with a `_linear` suffix (once)."""
    name = str(name or "")
    return name if name.endswith("_linear") else f"{name}_linear"


def linear_baseline_of(recipe: RecipeBase) -> LinearModelRecipe:
    """The bag-of-words baseline of a validated segment recipe (see `linear_baseline_data`)."""
    return LinearModelRecipe.model_validate(linear_baseline_data(recipe.model_dump()))


TASK = Task(
    name="segment_classification",
    variant="linear",
    recipe=LinearModelRecipe,
    summary="segment classification with a bag-of-words baseline (TF-IDF and a logistic regression per label)",
    flow="toolkit.tasks.segments.linear_flow:LinearModelFlow",
    predictor="toolkit.infer.linear_model:LinearModel",
    outputs="segment_scores",
    pipeline_tag="text-classification",
    not_exported="the linear segment baseline is a yardstick, not exported: export an encoder run",
    meta=SegmentModelMeta,
)
