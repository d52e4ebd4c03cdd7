"""The segment method's state, passed between its steps: what prepare builds (`SegmentPrepared`), what training
evaluates on (`EvaluationSet`), what cross-fitting gathers (`OutOfFold`), what a strategy chooses (`Choice`) and
what training leaves (`SegmentTrained`); and the evidence strategy's interface with its dev-choosing default
(`EvidenceStrategy`; the strategies of every mode are in `evidence.py`). Typed, so every helper of the package
reads these fields without casts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from toolkit.data.schema import SpanRecord
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.linear_model import LinearModel
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.tasks.features import FeatureReport
from toolkit.tasks.flow import Prepared, Trained
from toolkit.tasks.segments.features import SegmentWindows
from toolkit.tasks.segments.thresholding import tuning_note


@dataclass(frozen=True)
class EvaluationSet:
    """What training evaluates after each epoch (and chooses its checkpoint and stops on): the documents, their
    encoder inputs and, for training documents, the linear model's out-of-fold scores of them (None on dev, whose
    inputs carry the linear model's logits already)."""

    records: list[SpanRecord]
    windows: SegmentWindows
    priors: SegmentScores | None = None
    on_dev: bool = True


@dataclass(frozen=True)
class OutOfFold:
    """Per training document, its segments and the logits of the fold encoder that did not train on it; the
    epochs the served encoder is refit for, over the folds' schedule (`refit_horizon` epochs); and what each fold
    did."""

    segments: list[list[tuple[int, int]]]
    encoder: list[np.ndarray]
    refit_epochs: float
    report: dict
    refit_horizon: float | None = None
    # Where budget.seconds cut the folds short: the documents a finished fold scored (the others have no scores),
    # and the encoder served instead of a refit (the last finished fold's; a cut one, weighted 0, where none
    # finished and the linear model alone decides).
    scored: list[int] | None = None
    served: Any = None

    def restricted(self, p: SegmentPrepared) -> tuple[OutOfFold, SegmentPrepared]:
        """These scores and `p`'s threshold documents restricted to the documents a fold scored."""
        if self.scored is None:
            return self, p
        keep = self.scored
        oof = dataclasses.replace(
            self, segments=[self.segments[i] for i in keep], encoder=[self.encoder[i] for i in keep]
        )
        priors = p.threshold_priors
        return oof, dataclasses.replace(
            p,
            threshold_records=[p.threshold_records[i] for i in keep],
            threshold_priors=None if priors is None else priors.subset(keep),
        )


@dataclass(frozen=True)
class Choice:
    """What a strategy chose on training documents: the thresholds and how (None: dev chooses, or they are fixed),
    the combination's record, and the encoder alone's thresholds (with a fitted combination)."""

    thresholds: tuple[list[float], str] | None = None
    record: dict = field(default_factory=dict)
    encoder_thresholds: list[float] | None = None


@dataclass(frozen=True)
class EvidenceStrategy:
    """Dev chooses the thresholds (or nothing does): no training document is held, training evaluates on dev. The
    strategies of the other modes (`evidence.py`) override what differs."""

    name: ClassVar[str] = ""
    why: str
    held: list[int] = field(default_factory=list)  # training documents kept out of the encoder's training
    scored: list[int] = field(default_factory=list)  # training documents scored to choose thresholds on
    # training documents the served encoder is evaluated on after each epoch (stops and keeps its best epoch by), not
    # trained on: never one of `scored`, so the encoder never chooses on the evidence it is judged on
    stopping: list[int] = field(default_factory=list)

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "why": self.why}

    def plan(self, recipe: SegmentClassificationRecipe, documents: int) -> dict:
        """What --dry-run adds about the evidence: how many threshold documents, and folds."""
        plan = {"threshold_documents": len(self.scored)} if self.scored else {}
        return plan | ({"stopping_documents": len(self.stopping)} if self.stopping else {})

    def evaluates_held_out(self, recipe: SegmentClassificationRecipe) -> bool:
        """Whether training evaluates (chooses its checkpoint, stops) on training documents (`stopping`), not dev."""
        return False

    def evaluation(
        self, recipe: SegmentClassificationRecipe, dev: EvaluationSet, stopping: Callable[[], EvaluationSet]
    ) -> EvaluationSet:
        return stopping() if self.evaluates_held_out(recipe) else dev

    def gather(
        self,
        recipe: SegmentClassificationRecipe,
        run_dir: Path,
        p: SegmentPrepared,
        fit: FitEncoder,
        scorer: ScorerOf,
        deadline: float | None = None,
    ) -> OutOfFold | None:
        """Evidence gathered before the served encoder trains (None: the served encoder's own scores are it), cut
        short at `deadline` (time.monotonic(), budget.seconds)."""
        return None

    def choose(
        self, recipe: SegmentClassificationRecipe, classifier: Any, p: SegmentPrepared, out_of_fold: OutOfFold | None,
        model_dir: Path,
    ) -> Choice:  # fmt: skip
        """The saved model's thresholds chosen on training documents, or none (dev chooses, or they are fixed)."""
        return Choice()

    def tuning_note(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared) -> dict[str, str]:
        """Labels with too few clauses where the thresholds are chosen (dev here)."""
        return tuning_note(recipe, p.dev_records, p.labels)


@dataclass
class SegmentPrepared(Prepared):
    labels: list[str]
    dev_records: list[SpanRecord]
    train: SegmentWindows
    dev: SegmentWindows
    train_report: FeatureReport
    dev_report: FeatureReport
    left_out: SegmentWindows  # clause-free training windows negative_ratio left out: the hard-negative pool
    strategy: EvidenceStrategy  # where thresholds (and a fitted combination) are chosen
    evaluation: EvaluationSet
    linear: LinearModel | None = None  # segments.linear_prior: the linear model fitted on every training document
    # The training documents the strategy scores to choose thresholds on (held out, or every one for cross-fitting),
    # and the linear model's out-of-fold scores of them.
    threshold_records: list[SpanRecord] = field(default_factory=list)
    threshold_priors: SegmentScores | None = None
    # combination=fitted: the linear model's out-of-fold thresholds over every training document (a label's
    # fallback when the encoder does not add to it)
    linear_thresholds: list[float] | None = None
    # the records `train` was built from, in order (a window's `doc` indexes them): what the encoder trains on
    train_records: list[SpanRecord] = field(default_factory=list)


@dataclass(frozen=True)
class SegmentTrained(Trained):
    """A trained segment encoder; with thresholds=cross_fitted, also the fold encoders' scores of every training
    document (the evidence thresholds and the combination are chosen on)."""

    out_of_fold: OutOfFold | None = None


# How a fold's encoder is trained (the flow's one training stage, checkpoints in the given directory) and how a
# model in training scores documents (the flow's predictor): passed in, so this module never imports the flow.
FitEncoder = Callable[[Path, SegmentPrepared], Trained]
ScorerOf = Callable[[SegmentPrepared, Any], Any]
