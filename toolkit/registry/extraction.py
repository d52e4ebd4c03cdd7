"""What the span-extraction recipes share: scoring (`eval:`) and their summary metrics."""

from __future__ import annotations

from pydantic import Field, model_validator

from toolkit.registry.recipe_sections import EvalConfig
from toolkit.registry.task import RecipeBase
from toolkit.scoring_defaults import curve_keys, span_summary_names


class ExtractionRecipe(RecipeBase):
    """A recipe whose model extracts spans, scored by the one scorer."""

    eval: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="after")
    def _plateau_reads_the_curve(self) -> ExtractionRecipe:
        plateau = getattr(getattr(self, "train", None), "plateau", None)
        if plateau is None:
            return self
        if self.eval.curve_docs is None:
            raise ValueError(
                "train.plateau reads the learning curve: set eval.curve_docs (the dev documents each point scores)"
            )
        known = curve_keys(self.eval.boundary_tolerance)
        if plateau.metric not in known:
            raise ValueError(
                f"train.plateau.metric {plateau.metric!r} is not a learning-curve score: use one of {known}"
            )
        return self

    def metric_names(self) -> tuple[str, ...]:
        return span_summary_names(self.eval.boundary_tolerance)

    def curve_documents(self) -> int | None:
        return self.eval.curve_docs
