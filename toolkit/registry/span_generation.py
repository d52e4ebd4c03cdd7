"""task: span_generation: a decoder writes the spans it finds; each is located in the text."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.task import Task
from toolkit.sections import DecoderModelConfig, GenerationConfig, TrainConfig, WindowsConfig


class SpanGenerationRecipe(ExtractionRecipe):
    task: Literal["span_generation"]
    model: DecoderModelConfig = Field(default_factory=DecoderModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)


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
