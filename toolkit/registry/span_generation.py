"""task: span_generation: a decoder writes the spans it finds; each is located in the text."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_sections import ModelConfig, Strict, TrainConfig, WindowsConfig
from toolkit.registry.saved import ModelMeta
from toolkit.registry.task import Task


class DecoderModelConfig(ModelConfig):
    """span_generation: a causal LM."""

    quantization: Literal["none", "4bit"] = Field(
        default="none", description="4bit: QLoRA (needs model.lora.enabled, a CUDA device and bitsandbytes)."
    )

    @model_validator(mode="after")
    def _qlora_needs_lora(self) -> DecoderModelConfig:
        if self.quantization == "4bit" and not self.lora.enabled:
            raise ValueError("model.quantization=4bit is QLoRA: set model.lora.enabled=true")
        return self


class SelectorConfig(Strict):
    """span_generation: which windows the decoder reads (toolkit/infer/selector.py)."""

    kind: Literal["none", "linear"] = Field(
        default="none",
        description="linear: TF-IDF + logistic regression over window text, fitted on the training windows.",
    )
    recall: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Share of training windows with spans the selector keeps (3-fold cross-validation sets its "
        "threshold).",
    )


class GenerationConfig(Strict):
    """span_generation: how spans are written, generated and mapped back to the text."""

    target: Literal["text", "anchors", "segments"] = Field(
        default="text",
        description="text: each span copied verbatim; anchors: its first and last words; segments: the numbers of the "
        "window's segments it covers (toolkit/infer/completions.py).",
    )
    anchor_words: int = Field(
        default=4, ge=1, description="anchors: words at each end of a span (shorter spans are written whole)."
    )
    min_overlap: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="segments: a segment belongs to a span when this share of its characters lies in it.",
    )
    selector: SelectorConfig = Field(
        default_factory=SelectorConfig, description="Which windows the decoder reads (default: all)."
    )
    max_new_tokens: int = Field(default=128, ge=1, description="Generation budget per window.")
    batch_size: int = Field(default=8, ge=1, description="Windows generated together (left-padded).")
    constrained: bool = Field(
        default=False,
        description="Constrained decoding: a completion can only name text (or segments) its window holds.",
    )
    precision: Literal["fp32", "prefer_bf16"] = Field(
        default="fp32",
        description=(
            "Inference: prefer_bf16 generates with the weights in bf16 on machines with bf16 units (CUDA, "
            "avx512_bf16, amx_bf16), fp32 elsewhere. Spans can differ from fp32's."
        ),
    )
    min_similarity: float = Field(
        default=90.0, ge=0, le=100, description="Fuzzy offset recovery threshold (rapidfuzz partial ratio, 0-100)."
    )
    chat_template: bool = Field(
        default=False, description="Wrap prompt and target in the tokenizer's chat template (instruction-tuned models)."
    )


class SpanGenerationRecipe(ExtractionRecipe):
    task: Literal["span_generation"]
    model: DecoderModelConfig = Field(default_factory=DecoderModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)

    @model_validator(mode="after")
    def _one_inference_precision(self) -> SpanGenerationRecipe:
        # A generator is scored at the precision it is saved to serve at: one setting, not two that could differ.
        if self.eval.precision != "fp32":
            raise ValueError(
                "eval.precision is for classifiers; span generation evaluates and serves at generation.precision: "
                "set generation.precision=prefer_bf16 and leave eval.precision unset"
            )
        return self


# Keys a span_generation model saved at the top level of toolkit.json before they were nested under "generation"
# (its "selector" was the fitted selector's report, which stays at the top level).
_FLAT_GENERATION_KEYS = tuple(k for k in GenerationConfig.model_fields if k != "selector")


class GenerationModelMeta(ModelMeta):
    """toolkit.json of a span-generation model."""

    generation: GenerationConfig | None = None  # how spans are written and generated
    selector: dict[str, Any] | None = None  # the fitted window selector's report

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_generation(cls, data: Any) -> Any:
        if isinstance(data, dict) and "target" in data and "generation" not in data:
            data = dict(data)
            data["generation"] = {k: data.pop(k) for k in _FLAT_GENERATION_KEYS if k in data}
        return data


TASK = Task(
    name="span_generation",
    recipe=SpanGenerationRecipe,
    summary=(
        "span generation (a decoder writes the spans it finds; each is located in the text, unlocated ones are dropped "
        "and counted)"
    ),
    flow="toolkit.tasks.span_generation:SpanGeneration",
    predictor="toolkit.infer.generator:SpanGenerator",
    decoder=True,
    outputs="generated",
    pipeline_tag="text-generation",
    speed_docs=4,
    onnx_task="text-generation-with-past",
    meta=GenerationModelMeta,
)
