"""task: segment_classification: an encoder scores sentence-aligned segments per label; runs of positive
segments become spans."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.sections import ClassifierModelConfig, SegmentsConfig, TrainConfig, WindowsConfig
from toolkit.registry.task import Task


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
    def _segment_inputs_train_alone(self) -> SegmentClassificationRecipe:
        s = self.segments
        if s.encoder_input != "segments":
            return self
        problems = []
        if s.linear_prior and s.combination != "fitted":
            problems.append(
                "the encoder trains without the linear logit, so adding the two (segments.combination=sum) is not "
                "what it learned: set segments.combination=fitted, or segments.linear_prior=false"
            )
        if s.hard_negatives is not None:
            problems.append(
                "segments.hard_negatives mines windows; segment inputs sample clause-free segments anew each epoch "
                "(segments.negatives_per_positive): remove segments.hard_negatives"
            )
        if self.windows.negative_ratio is not None:
            problems.append(
                "windows.negative_ratio samples windows, which segment inputs do not read: remove it and set "
                "segments.negatives_per_positive"
            )
        if s.loss_weights != "none" or s.min_steps is not None:
            problems.append(
                "segment inputs balance the classes by sampling and train to a plateau: set segments.loss_weights=none "
                "and leave segments.min_steps unset (train.epochs caps, train.early_stopping_patience stops)"
            )
        if s.segment_tokens + 2 * s.context_tokens + 2 > self.model.max_length:
            problems.append(
                f"an input of segments.segment_tokens ({s.segment_tokens}) and twice segments.context_tokens "
                f"({s.context_tokens}) plus special tokens exceeds model.max_length ({self.model.max_length}): lower "
                "them or raise model.max_length"
            )
        if problems:
            raise ValueError("segments.encoder_input=segments: " + "; ".join(problems))
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
