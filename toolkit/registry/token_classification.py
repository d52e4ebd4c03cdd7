"""task: token_classification: an encoder (or a decoder) tags each word; spans are decoded from the tags."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.sections import MultiCorpusDataConfig, TaggerModelConfig, TaggerTrainConfig, WindowsConfig
from toolkit.registry.task import Task


class TokenClassificationRecipe(ExtractionRecipe):
    task: Literal["token_classification"]
    data: MultiCorpusDataConfig
    model: TaggerModelConfig = Field(default_factory=TaggerModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TaggerTrainConfig = Field(default_factory=TaggerTrainConfig)

    @model_validator(mode="after")
    def _averaging_needs_full_checkpoints(self) -> TokenClassificationRecipe:
        if self.train.average_checkpoints and self.model.lora.enabled:
            raise ValueError(
                "train.average_checkpoints averages full-model checkpoints; LoRA checkpoints hold adapters only: drop "
                "one of the two"
            )
        return self


TASK = Task(
    name="token_classification",
    recipe=TokenClassificationRecipe,
    summary="token classification (an encoder tags each word; spans are decoded from the tags)",
    flow="toolkit.tasks.token_classification:TokenClassification",
    predictor="toolkit.infer.tagger:Tagger",
    outputs="tags",
    pipeline_tag="token-classification",
    speed_docs=32,
)
