"""task: token_classification: an encoder (or a decoder) tags each word; spans are decoded from the tags."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_sections import ClassifierModelConfig, MultiCorpusDataConfig, TrainConfig, WindowsConfig
from toolkit.registry.task import Task


class TaggerModelConfig(ClassifierModelConfig):
    """token_classification: how words are tagged and tags become spans."""

    label_all_subtokens: bool = Field(
        default=False, description="Train on every sub-token (True) or the first of each word only."
    )
    multi_label: bool = Field(
        default=False,
        description="An independent O/B/I layer per label, so spans of different labels may overlap (CUAD).",
    )
    decoding: Literal["argmax", "viterbi"] = Field(
        default="argmax",
        description="Tags -> spans: argmax per word (orphan I- tags repaired), or viterbi: the most probable valid "
        "IOB2 "
        "sequence (no fragments from one doubtful word). Saved with the model; eval and serving use it.",
    )


class TaggerTrainConfig(TrainConfig):
    """token_classification: loss weights, per-layer learning rates and checkpoint averaging."""

    class_weights: Literal["none", "balanced"] | dict[str, float] = Field(
        default="none", description="Loss weights for rare labels."
    )
    layer_lr_decay: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "Layer-wise learning-rate decay: layer l of L trains at learning_rate x decay^(L - l), the embeddings at "
            "decay^L (e.g. 0.9)."
        ),
    )
    head_learning_rate: float | None = Field(
        default=None,
        gt=0,
        description="A separate learning rate for the freshly initialised classification head (e.g. 1e-3).",
    )
    average_checkpoints: int | None = Field(
        default=None,
        ge=2,
        description="Average the weights of the last k checkpoints (by step) and save that model instead of the best "
        "one "
        "(needs save_total_limit >= k and full-model checkpoints: not with LoRA).",
    )

    @model_validator(mode="after")
    def _enough_checkpoints(self) -> TaggerTrainConfig:
        if self.average_checkpoints and self.save_total_limit < self.average_checkpoints:
            k = self.average_checkpoints
            raise ValueError(
                f"train.average_checkpoints={k} needs that many checkpoints kept: set train.save_total_limit >= {k}"
            )
        return self


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
