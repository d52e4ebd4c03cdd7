"""task: token_classification: an encoder (or a decoder) tags each word; spans are decoded from the tags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_sections import (
    ClassifierModelConfig,
    MultiCorpusDataConfig,
    Strict,
    TrainConfig,
    WindowsConfig,
)
from toolkit.registry.saved import ModelMeta
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
    keep_layers: int | None = Field(
        default=None,
        ge=1,
        description="Keep only the first N transformer layers of the pretrained model (a smaller, faster tagger, "
        "e.g. a distilled student: distill); None: every layer. Saved with the model.",
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


class DistillConfig(Strict):
    """token_classification: learn from a teacher tagger's soft labels beside the gold ones (Hinton et al.
    2015), on the labelled training documents and on unlabelled in-domain text the teacher labels."""

    teacher: str = Field(
        description="The teacher: a token_classification run directory (or its model/ folder or an export) whose "
        "labels are this recipe's."
    )
    temperature: float = Field(
        default=2.0, gt=0, description="Softens both distributions in the soft loss; the loss is scaled by its square."
    )
    gold_weight: float = Field(
        default=0.5,
        ge=0,
        lt=1,
        description="Share of the loss on gold labels (labelled documents); the rest is the soft loss on every "
        "document.",
    )
    unlabelled: list[str] = Field(
        default_factory=list,
        description="Unlabelled in-domain text the teacher labels: .txt files, folders of them, or JSONL with a "
        "'text' field (a span file's spans are ignored). None: the labelled training documents alone.",
    )
    unlabelled_share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Share of the unlabelled documents used, a random sample by seed (what more text buys: 0.5, 1).",
    )
    max_unlabelled_docs: int | None = Field(default=None, ge=1, description="Read at most this many per source.")
    leak_sentence_chars: int = Field(
        default=40,
        ge=10,
        description="A dev document sharing a sentence this long with an unlabelled one stops the run (a leak).",
    )
    teacher_batch_size: int = Field(default=16, ge=1, description="Windows per teacher forward pass.")


class TokenClassificationRecipe(ExtractionRecipe):
    task: Literal["token_classification"]
    data: MultiCorpusDataConfig
    model: TaggerModelConfig = Field(default_factory=TaggerModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TaggerTrainConfig = Field(default_factory=TaggerTrainConfig)
    distill: DistillConfig | None = Field(default=None, description="Learn from a teacher tagger (off when absent).")

    @model_validator(mode="after")
    def _distill_flat_tags(self) -> TokenClassificationRecipe:
        if self.distill is not None and self.model.multi_label:
            raise ValueError(
                "distill supports flat tagging (one label per word); set model.multi_label=false or drop distill"
            )
        return self

    @model_validator(mode="after")
    def _averaging_needs_full_checkpoints(self) -> TokenClassificationRecipe:
        if self.train.average_checkpoints and self.model.lora.enabled:
            raise ValueError(
                "train.average_checkpoints averages full-model checkpoints; LoRA checkpoints hold adapters only: drop "
                "one of the two"
            )
        return self


class TeacherInfo(BaseModel):
    """What a distilled tagger learned from (toolkit.json "distilled_from")."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    teacher: str  # the teacher's run directory as the recipe named it
    teacher_model: str | None = None  # the teacher's model.name
    temperature: float
    gold_weight: float
    labelled_documents: int
    unlabelled_documents: int


class TaggerMeta(ModelMeta):
    """toolkit.json of a tagger: ModelMeta's fields, and its teacher when it was distilled."""

    distilled_from: TeacherInfo | None = None

    def card_lines(self) -> list[str]:
        d = self.distilled_from
        if d is None:
            return []
        teacher = d.teacher + (f" ({d.teacher_model})" if d.teacher_model else "")
        return [
            f"- Distilled from the tagger {teacher}: its soft labels at temperature {d.temperature:g} on "
            f"{d.labelled_documents} labelled and {d.unlabelled_documents} unlabelled documents, gold labels weighted "
            f"{d.gold_weight:g}"
        ]


TASK = Task(
    name="token_classification",
    recipe=TokenClassificationRecipe,
    summary="token classification (an encoder tags each word; spans are decoded from the tags)",
    flow="toolkit.tasks.token_classification:TokenClassification",
    predictor="toolkit.infer.tagger:Tagger",
    outputs="tags",
    pipeline_tag="token-classification",
    speed_docs=32,
    meta=TaggerMeta,
)
