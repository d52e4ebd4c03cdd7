"""Where a segment encoder's thresholds (and a fitted combination) are chosen: one evidence strategy per
`segments.thresholds` mode, chosen once from the recipe and the number of training documents (`choose_strategy`)
and named, with the reason, in the plan (`--dry-run`, data_report.json).

A strategy decides three things, and the flow (`method.py`) asks it rather than branching on the mode:
- which training documents the encoder does not train on (`held`), and which are scored to choose thresholds
  on (`scored`);
- what training evaluates after each epoch (`evaluation`), and what evidence is gathered before the served
  encoder trains (`gather`: the fold encoders of cross-fitting, whose epochs the served one is refit for);
- how thresholds are chosen once the encoder is saved (`choose`).

To add a mode: add it to `SegmentDecisionConfig.thresholds` (registry), write a strategy here, and return it
from `choose_strategy`; `bench/output_parity.py` runs each mode once.
"""

from __future__ import annotations

from toolkit.errors import ToolkitError
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.scoring_defaults import SCORING
from toolkit.tasks.segments.cross_fit import cross_fit
from toolkit.tasks.segments.held_out import choose_on_held_out, hold_out, stopping_split
from toolkit.tasks.segments.prepared import Choice, EvidenceStrategy, OutOfFold, SegmentPrepared
from toolkit.tasks.segments.thresholding import tuning_note


class Tuned(EvidenceStrategy):
    name = "tuned"


class Fixed(EvidenceStrategy):
    name = "fixed"


class HeldOut(EvidenceStrategy):
    """A share of the training documents is kept out of training; thresholds (and a fitted combination) are chosen
    on the saved encoder's scores of them. Where training evaluates on training documents, it evaluates on another
    share of them (`stopping`), also kept out of training."""

    name = "held_out"

    def plan(self, recipe: SegmentClassificationRecipe, documents: int) -> dict:
        held = (
            {"evaluated_during_training_on": "a share of the training documents, apart from the threshold documents"}
            if self.evaluates_held_out(recipe)
            else {}
        )
        return {**held, **super().plan(recipe, documents)}

    def evaluates_held_out(self, recipe: SegmentClassificationRecipe) -> bool:
        # A fitted combination is fitted on these documents; segment inputs train to their plateau on them.
        s = recipe.segments
        return s.combination == "fitted" or s.encoder_input == "segments"

    def choose(self, recipe, classifier, p, out_of_fold, model_dir) -> Choice:
        return choose_on_held_out(recipe, classifier, p, None, model_dir)

    def tuning_note(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared) -> dict[str, str]:
        return tuning_note(recipe, p.threshold_records, p.labels)


class CrossFitted(EvidenceStrategy):
    """Every training document is scored by a fold encoder that did not train on it; the served encoder is refit on
    every document for the folds' epochs."""

    name = "cross_fitted"

    def plan(self, recipe: SegmentClassificationRecipe, documents: int) -> dict:
        folds = min(recipe.segments.encoder_folds, documents)
        return {
            **super().plan(recipe, documents),
            "cross_fitted": {"folds": folds, "then": "refit on every training document"},
        }

    def gather(self, recipe, run_dir, p, fit, scorer, deadline=None) -> OutOfFold:
        return cross_fit(recipe, run_dir, p, fit, scorer, deadline)

    def choose(self, recipe, classifier, p, out_of_fold, model_dir) -> Choice:
        return choose_on_held_out(recipe, classifier, p, out_of_fold, model_dir)

    def tuning_note(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared) -> dict[str, str]:
        return tuning_note(recipe, p.threshold_records, p.labels, out_of_fold=True)


def choose_strategy(recipe: SegmentClassificationRecipe, documents: int) -> EvidenceStrategy:
    """The one strategy a run takes, from segments.thresholds and the number of training documents."""
    s = recipe.segments
    everyone = list(range(documents))
    if s.thresholds == "fixed":
        return Fixed(f"segments.thresholds=fixed: every label at {SCORING.decision_threshold}")
    if s.thresholds == "tuned":
        return Tuned("segments.thresholds=tuned: chosen on dev, dev figures cross-fitted over its two halves")
    if s.thresholds == "cross_fitted" and (s.cross_fit_max_documents is None or documents <= s.cross_fit_max_documents):
        folds = min(s.encoder_folds, documents)
        if documents - -(-documents // folds) < 2:  # a fold's encoder trains on one document and stops on another
            raise ToolkitError(
                f"segments.thresholds=cross_fitted needs at least 2 training documents besides each fold's own; "
                f"data.train has {documents} in {folds} folds",
                fix="add training documents, or use segments.thresholds=tuned",
            )
        limit = "no document limit" if s.cross_fit_max_documents is None else f"at most {s.cross_fit_max_documents}"
        why = (
            f"segments.thresholds=cross_fitted: {documents} training documents is {limit} "
            f"(segments.cross_fit_max_documents), so {min(s.encoder_folds, documents)} fold encoders score every one"
        )
        return CrossFitted(why, [], everyone)
    if s.thresholds not in ("held_out", "cross_fitted"):
        raise ValueError(f"segments.thresholds={s.thresholds} has no encoder strategy (the recipe validates it)")
    _, held = hold_out(documents, s.held_out_share, recipe.seed)
    share = f"held-out share {s.held_out_share:g} ({len(held)} documents)"
    if s.thresholds == "cross_fitted":
        why = (
            f"{share}: {documents} training documents is above segments.cross_fit_max_documents "
            f"({s.cross_fit_max_documents})"
        )
    else:
        why = f"{share}: segments.thresholds=held_out"
    strategy = HeldOut(why, held, held)
    if not strategy.evaluates_held_out(recipe):
        return strategy
    kept = [i for i in everyone if i not in set(held)]
    if len(kept) < 2:  # the encoder trains on one document and stops on another
        raise ToolkitError(
            f"{share} leaves {len(kept)} training document to train on and to stop on; it needs 2",
            fix="add training documents, or lower segments.held_out_share",
        )
    return HeldOut(why, held, held, stopping_split(kept, s.stopping_share, recipe.seed)[1])
