"""task: segment_classification: an encoder scores sentence-aligned segments per label; runs of positive
segments become spans."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.task import Task
from toolkit.sections import ClassifierModelConfig, SegmentsConfig, TrainConfig, WindowsConfig


class SegmentClassificationRecipe(ExtractionRecipe):
    task: Literal["segment_classification"]
    model: ClassifierModelConfig = Field(default_factory=ClassifierModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    segments: SegmentsConfig = Field(default_factory=SegmentsConfig)

    @model_validator(mode="after")
    def _out_of_fold_is_the_baselines(self) -> SegmentClassificationRecipe:
        if self.segments.thresholds == "out_of_fold":
            raise ValueError(
                "segments.thresholds=out_of_fold refits the model per fold, which the linear baseline does in seconds "
                "and an encoder does not: use held_out (a share of the training documents kept out of training), "
                "tuned or fixed here"
            )
        return self

    @model_validator(mode="after")
    def _clause_starts_come_from_the_linear_prior(self) -> SegmentClassificationRecipe:
        if self.segments.clause_starts and not self.segments.linear_prior:
            raise ValueError(
                "segments.clause_starts are learned by the linear model, which an encoder has only as its prior: set "
                "segments.linear_prior=true as well"
            )
        return self

    @model_validator(mode="after")
    def _a_fitted_combination_needs_held_out_documents(self) -> SegmentClassificationRecipe:
        s = self.segments
        if s.combination == "fitted" and (not s.linear_prior or s.thresholds != "held_out"):
            raise ValueError(
                "segments.combination=fitted fits the encoder's and the linear model's weights on training documents "
                "held out of training: set segments.linear_prior=true and segments.thresholds=held_out"
            )
        return self

    @model_validator(mode="after")
    def _mining_needs_left_out_windows(self) -> SegmentClassificationRecipe:
        if self.segments.hard_negatives and self.windows.negative_ratio is None:
            raise ValueError(
                "segments.hard_negatives mines the clause-free windows that windows.negative_ratio leaves out: set "
                "windows.negative_ratio (e.g. 0.5)"
            )
        return self


TASK = Task(
    name="segment_classification",
    recipe=SegmentClassificationRecipe,
    summary="segment classification (an encoder scores sentence-aligned segments per label; thresholds per label)",
    flow="toolkit.tasks.segment_classification:SegmentClassification",
    predictor="toolkit.infer.segmenter:SegmentClassifier",
    outputs="segment_scores",
    pipeline_tag="text-classification",
    speed_docs=8,
)
