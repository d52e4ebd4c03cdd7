"""task: pretrain_mlm / pretrain_clm: domain-adaptive pre-training on unlabeled text. The result is a
base model for a fine-tuning recipe's model.name; it extracts nothing by itself."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from toolkit.registry.recipe_sections import ModelConfig, PretrainedModelConfig, Strict, TrainConfig
from toolkit.registry.saved import ModelMeta
from toolkit.registry.task import RecipeBase, Task
from toolkit.scoring_defaults import PRETRAIN_SUMMARY


class PretrainConfig(Strict):
    """pretrain_mlm / pretrain_clm: domain-adaptive pre-training on unlabeled text."""

    packing: bool = Field(
        default=True,
        description="Concatenate documents and cut blocks of model.max_length tokens (no padding); False: one window "
        "per block.",
    )
    eval_blocks: int = Field(default=256, ge=1, description="Held-out blocks scored before and after (same blocks).")


class MaskingConfig(PretrainConfig):
    """pretrain_mlm: which tokens are masked (BERT: 15% selected; of those 80% [MASK], 10% random, 10% kept)."""

    mlm_probability: float = Field(
        default=0.15, gt=0, lt=1, description="Share of tokens selected for prediction (BERT: 0.15)."
    )
    mask_replace_prob: float = Field(
        default=0.8, ge=0, le=1, description="Of the selected tokens, the share replaced by [MASK] (BERT: 0.8)."
    )
    random_replace_prob: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Of the selected tokens, the share replaced by a random token (BERT: 0.1); the rest stay "
        "unchanged.",
    )
    whole_word_mask: bool = Field(default=False, description="Select whole words (every sub-token of a word together).")
    eval_mlm_probability: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Selection rate of the held-out masks (default: mlm_probability). Fix it (e.g. 0.15) to compare "
        "runs "
        "trained at different rates on the same masks.",
    )

    @model_validator(mode="after")
    def _rates(self) -> MaskingConfig:
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError("mask_replace_prob + random_replace_prob must not exceed 1 (the rest stay unchanged)")
        if self.whole_word_mask and (self.mask_replace_prob != 1 or self.random_replace_prob != 0):
            # transformers' whole-word masking replaces selected words by [MASK] only.
            raise ValueError(
                "whole_word_mask supports [MASK] replacement only: set pretrain.mask_replace_prob=1 and "
                "pretrain.random_replace_prob=0"
            )
        return self


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


class PretrainedModelMeta(ModelMeta):
    """toolkit.json of a domain-adapted base model."""

    base_model: str | None = None  # the model pre-training started from


MLM = Task(
    name="pretrain_mlm",
    recipe=MaskedPretrainRecipe,
    summary="masked-language-model pre-training (BERT's objective) on domain text",
    flow="toolkit.tasks.pretrain:Pretraining",
    predictor=None,
    not_exported=NOT_EXPORTED,
    meta=PretrainedModelMeta,
)
CLM = Task(
    name="pretrain_clm",
    recipe=CausalPretrainRecipe,
    summary="causal-language-model pre-training (next-token prediction) on domain text",
    flow="toolkit.tasks.pretrain:Pretraining",
    predictor=None,
    decoder=True,
    not_exported=NOT_EXPORTED,
    meta=PretrainedModelMeta,
)
