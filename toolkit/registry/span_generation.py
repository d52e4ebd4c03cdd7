"""task: span_generation: a decoder writes the spans it finds; each is located in the text."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.sections import DecoderModelConfig, GenerationConfig, TrainConfig, WindowsConfig
from toolkit.registry.task import Task


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
)
