"""task: segment_classification with `model.kind: linear`: the bag-of-words baseline (TF-IDF and a
logistic regression per label), fitted in seconds, scored like every segment model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolkit.errors import ConfigError
from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.task import RecipeBase, Task
from toolkit.sections import LinearModelConfig, SegmentDecisionConfig


class LinearSegmentsRecipe(ExtractionRecipe):
    task: Literal["segment_classification"]
    model: LinearModelConfig
    segments: SegmentDecisionConfig = Field(default_factory=SegmentDecisionConfig)


def linear_baseline_of(recipe: RecipeBase) -> LinearSegmentsRecipe:
    """The bag-of-words baseline of a segment recipe (`toolkit run --linear-baseline`): the same data,
    segment decisions and scoring; its name gets a `_linear` suffix so the encoder's run is kept."""
    if recipe.task != TASK.name:
        raise ConfigError(
            f"--linear-baseline fits the segment task's bag-of-words baseline; this recipe's task is {recipe.task}",
            fix="pass a segment_classification recipe",
        )
    data = recipe.model_dump(include={"task", "seed", "output_dir", "data", "eval"})
    segments = recipe.segments.model_dump(include=set(SegmentDecisionConfig.model_fields))
    name = recipe.name if recipe.name.endswith("_linear") else f"{recipe.name}_linear"
    return LinearSegmentsRecipe(**data, name=name, model={"kind": "linear"}, segments=segments)


TASK = Task(
    name="segment_classification",
    variant="linear",
    recipe=LinearSegmentsRecipe,
    summary="segment classification with a bag-of-words baseline (TF-IDF and a logistic regression per label)",
    flow="toolkit.tasks.segment_linear:LinearSegments",
    predictor="toolkit.infer.linear:LinearSegmentClassifier",
    outputs="segment_scores",
    pipeline_tag="text-classification",
    not_exported="the linear segment baseline is a yardstick, not exported: export an encoder run",
)
