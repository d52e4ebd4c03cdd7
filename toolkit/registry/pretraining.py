"""task: pretrain_mlm / pretrain_clm: domain-adaptive pre-training on unlabeled text. The result is a
base model for a fine-tuning recipe's model.name; it extracts nothing by itself."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from toolkit.registry.sections import MaskingConfig, ModelConfig, PretrainConfig, PretrainedModelConfig, TrainConfig
from toolkit.registry.task import RecipeBase, Task
from toolkit.scoring import PRETRAIN_SUMMARY

NOT_EXPORTED = (
    "a domain-adapted base model extracts nothing by itself: fine-tune it first (model.name: its run's model/ folder)"
)


class MaskedPretrainRecipe(RecipeBase):
    task: Literal["pretrain_mlm"]
    model: PretrainedModelConfig = Field(default_factory=PretrainedModelConfig)  # full-weight MLM training: no LoRA
    train: TrainConfig = Field(default_factory=TrainConfig)
    pretrain: MaskingConfig = Field(default_factory=MaskingConfig)
    summary_metrics = PRETRAIN_SUMMARY
    objective: ClassVar[str] = "mlm"


class CausalPretrainRecipe(RecipeBase):
    task: Literal["pretrain_clm"]
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    pretrain: PretrainConfig = Field(default_factory=PretrainConfig)
    summary_metrics = PRETRAIN_SUMMARY
    objective: ClassVar[str] = "clm"


MLM = Task(
    name="pretrain_mlm",
    recipe=MaskedPretrainRecipe,
    summary="masked-language-model pre-training (BERT's objective) on domain text",
    flow="toolkit.tasks.pretrain:Pretraining",
    predictor=None,
    not_exported=NOT_EXPORTED,
)
CLM = Task(
    name="pretrain_clm",
    recipe=CausalPretrainRecipe,
    summary="causal-language-model pre-training (next-token prediction) on domain text",
    flow="toolkit.tasks.pretrain:Pretraining",
    predictor=None,
    decoder=True,
    not_exported=NOT_EXPORTED,
)
