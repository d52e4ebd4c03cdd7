"""What the span-extraction recipes share: scoring (`eval:`) and their summary metrics."""

from __future__ import annotations

from pydantic import Field

from toolkit.registry.recipe_sections import EvalConfig
from toolkit.registry.task import RecipeBase
from toolkit.scoring import span_summary_names


class ExtractionRecipe(RecipeBase):
    """A recipe whose model extracts spans, scored by the one scorer."""

    eval: EvalConfig = Field(default_factory=EvalConfig)

    def metric_names(self) -> tuple[str, ...]:
        return span_summary_names(self.eval.boundary_tolerance)

    def curve_documents(self) -> int | None:
        return self.eval.curve_docs
