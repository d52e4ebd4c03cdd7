"""task: segment_classification: an encoder scores sentence-aligned segments per label; runs of positive
segments become spans."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from toolkit.registry.extraction import ExtractionRecipe
from toolkit.registry.recipe_sections import ClassifierModelConfig, Strict, TrainConfig, WindowsConfig
from toolkit.registry.saved import ModelMeta
from toolkit.registry.task import Task
from toolkit.scoring_defaults import SCORING


class HardNegativesConfig(Strict):
    """After training, score clause-free training windows that `windows.negative_ratio` left out, add those
    where the model fires, and train on, so the model learns from the text it confuses with clauses."""

    pool: int = Field(
        default=4000,
        ge=1,
        description="Left-out clause-free windows sampled and scored (about one dev evaluation per 4,000).",
    )
    min_score: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="A window is a hard negative when one of its segments scores at least this for a label.",
    )
    max_windows: int | None = Field(
        default=None,
        ge=1,
        description="Keep at most this many, highest scores first (default: as many as negative_ratio kept).",
    )
    epochs: float = Field(
        default=1.0,
        gt=0,
        description="Epochs of continued training on the clause windows, the sampled negatives and the mined ones.",
    )
    choose: Literal["hardest", "random"] = Field(
        default="hardest",
        description=(
            "random: as many left-out windows as would be mined, drawn at random (the control that tells mining from "
            "more data)."
        ),
    )


class SegmentDecisionConfig(Strict):
    """How segments are labeled for training and decided at inference (every segment model)."""

    min_overlap: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="A segment is positive for a label when this share of its characters lies in a span of it.",
    )
    thresholds: Literal["tuned", "out_of_fold", "cross_fitted", "held_out", "fixed"] = Field(
        default="tuned",
        description=(
            "Per-label thresholds saved with the model. tuned: chosen on dev (dev figures cross-fitted over its two "
            "halves); out_of_fold: chosen on the training documents' out-of-fold scores (segments.folds folds; the "
            "linear baseline); cross_fitted: every training document is scored by an encoder trained to its plateau "
            "on the other segments.encoder_folds folds, thresholds are chosen on those scores, and the encoder "
            "served is refit on every training document (for the folds' median best epoch); held_out: chosen on a "
            "share of the training documents (segments.held_out_share) the encoder does not train on (what "
            "cross_fitted does above segments.cross_fit_max_documents); with any of these three, dev only reports. "
            f"fixed: {SCORING.decision_threshold} for every label."
        ),
    )
    encoder_folds: int = Field(
        default=3, ge=2, le=10, description="thresholds=cross_fitted: folds of the training documents, an encoder each."
    )
    cross_fit_max_documents: int | None = Field(
        default=200,
        ge=2,
        description=(
            "thresholds=cross_fitted: above this many training documents a held-out share (segments.held_out_share) "
            "is evidence enough and costs one training, not encoder_folds + 1 (None: always cross-fit)."
        ),
    )
    folds: int = Field(default=5, ge=2, description="out_of_fold and linear_prior: folds of the training documents.")
    held_out_share: float = Field(
        default=0.1,
        gt=0,
        le=0.5,
        description="thresholds=held_out: the share of training documents kept out of training to choose them on.",
    )
    stopping_share: float = Field(
        default=0.2,
        gt=0,
        le=0.5,
        description=(
            "thresholds=cross_fitted or held_out: the share of an encoder's own training documents (each fold's, and "
            "the held-out path's) it is evaluated on after each epoch, to stop at its plateau and keep its best "
            "epoch; never the documents whose scores its thresholds and combination are then fitted on."
        ),
    )
    clause_starts: bool = Field(
        default=False,
        description=(
            "B/I/O over segments: the linear model also learns, per label, whether a clause segment begins a clause, "
            "and a run of positive segments splits where one does, so adjacent clauses of one label stay apart "
            "(the linear baseline, or an encoder with segments.linear_prior)."
        ),
    )


class SegmentsConfig(SegmentDecisionConfig):
    """segment_classification with an encoder: also the loss and hard-negative mining."""

    loss_weights: Literal["none", "balanced"] = Field(
        default="balanced", description="balanced: positives weighted by negatives/positives per label (capped at 100)."
    )
    focal_gamma: float = Field(default=0.0, ge=0, description="Focal loss exponent (0: plain binary cross-entropy).")
    hard_negatives: HardNegativesConfig | None = Field(
        default=None, description="Hard-negative mining after training (off when absent)."
    )
    linear_prior: bool = Field(
        default=False,
        description=(
            "Lexical and neural evidence in one model: the linear baseline (TF-IDF + logistic regression) is fitted "
            "on the training documents and its per-label logit is added to each segment's logit, so the encoder "
            "learns a correction to it. Training documents get out-of-fold logits (segments.folds folds), so the "
            "encoder learns how far to trust the linear model on text it has not seen."
        ),
    )
    combination: Literal["sum", "fitted"] = Field(
        default="sum",
        description=(
            "With segments.linear_prior, how the encoder's and the linear model's logits make the final score. sum: "
            "added (the prior the encoder trains against). fitted: one stack over every label, fitted on training "
            "documents the encoder did not train on (segments.thresholds=cross_fitted or held_out): the linear logit "
            "recalibrated per label and the encoder's at a weight pooled across labels, each label's departure "
            "shrunk by a penalty chosen by cross-validation grouped by document. One one-sided test at 5% over every "
            "label (out-of-fold log-loss, bootstrap over documents) keeps the encoder or not; a label departs from "
            "that decision only on its own test, Holm-corrected for the labels tested. Thresholds come from the "
            "stack's out-of-fold scores, a few clauses' shrunk toward the curve the labels share; a label without "
            "the encoder is the linear model alone at its out-of-fold threshold. Training's evaluations and best "
            "checkpoint read those documents "
            "too, so dev only reports."
        ),
    )
    encoder_input: Literal["windows", "segments"] = Field(
        default="windows",
        description=(
            "What the encoder reads. windows: model.max_length-token windows over the document, a segment's logit the "
            "mean over its tokens (the linear prior, if any, added while it trains). segments: one input per segment "
            "(its first segments.segment_tokens tokens with segments.context_tokens on either side), the encoder a "
            "segment classifier of its own (no linear logit added while it trains), every positive segment and "
            "segments.negatives_per_positive sampled negatives per epoch, drawn anew each epoch and batched by length; "
            "with train.early_stopping_patience it trains until the held-out segments' macro AUPR stops improving, "
            "at most train.epochs epochs."
        ),
    )
    segment_tokens: int = Field(
        default=96, ge=1, description="encoder_input=segments: a segment's tokens read (from its start)."
    )
    context_tokens: int = Field(
        default=16,
        ge=0,
        description="encoder_input=segments: tokens of the surrounding text on either side (read, never labelled).",
    )
    negatives_per_positive: float | None = Field(
        default=3,
        ge=0,
        description=(
            "encoder_input=segments: clause-free segments sampled per positive segment each epoch (None: every "
            "segment, every epoch)."
        ),
    )
    cache_frozen_layers: bool = Field(
        default=True,
        description=(
            "encoder_input=segments with model.train_layers: the embeddings and frozen lower layers are run once per "
            "input (in eval mode, so without their dropout) and their hidden states replayed in later epochs and "
            "evaluations; only the trainable top layers run each step."
        ),
    )
    frozen_cache_mb: float | None = Field(
        default=2048,
        gt=0,
        description=(
            "segments.cache_frozen_layers: the most memory the cached hidden states may take; past it the inputs read "
            "longest ago are evicted and computed again when they come back (None: no bound). The run reports the "
            "cache's hit rate and evictions."
        ),
    )
    evaluation_negatives: int | None = Field(
        default=2000,
        ge=1,
        description=(
            "encoder_input=segments: the evaluation after each epoch reads every held-out positive segment and at most "
            "this many held-out clause-free ones, drawn once; their AUPR weighs each drawn negative by how many it "
            "stands for, so it estimates the AUPR over every held-out segment at a fraction of the cost (None: every "
            "segment, and the Jaccard figures of the held-out documents beside it)."
        ),
    )
    min_steps: int | None = Field(
        default=None,
        ge=1,
        description=(
            "A training budget sized to the data: at least this many optimizer steps, train.epochs raised to reach "
            "them on a small set (at most segments.max_epochs epochs); with train.early_stopping_patience, stopped "
            "where the evaluation set stops improving."
        ),
    )
    max_epochs: float = Field(
        default=10, gt=0, description="segments.min_steps: the most epochs it may raise train.epochs to."
    )


class BudgetConfig(Strict):
    """What the whole run may take on this machine."""

    seconds: float = Field(
        gt=0,
        description=(
            "Wall seconds for the whole run, every stage included (the linear prior, each fold, the refit, scoring). "
            "Before training, a few steps are timed and the plan is sized to fit: the epoch cap lowered, then "
            "cross-fitting replaced by a held-out share; the run records what it gave up (run.budget). Training "
            "also stops at the budget's deadline, whatever the estimate said. train.max_seconds still bounds each "
            "training stage's steps alone."
        ),
    )


class SegmentClassificationRecipe(ExtractionRecipe):
    task: Literal["segment_classification"]
    model: ClassifierModelConfig = Field(default_factory=ClassifierModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    segments: SegmentsConfig = Field(default_factory=SegmentsConfig)
    budget: BudgetConfig | None = Field(
        default=None, description="A run-wide time budget (None: the plan as written, however long)."
    )

    @model_validator(mode="after")
    def _out_of_fold_is_the_baselines(self) -> SegmentClassificationRecipe:
        if self.segments.thresholds == "out_of_fold":
            raise ValueError(
                "segments.thresholds=out_of_fold refits the model per fold, which the linear baseline does in seconds "
                "and an encoder does not: use held_out (a share of the training documents kept out of training), "
                "tuned or fixed here"
            )
        return self

    @model_validator(mode="after")
    def _stopping_is_the_held_out_plateau(self) -> SegmentClassificationRecipe:
        if self.train.plateau is not None or self.train.eval_every == "doubling":
            raise ValueError(
                "a segment classifier's training stops at its held-out plateau (train.early_stopping_patience) and "
                "is read every epoch: remove train.plateau and train.eval_every=doubling (scripts/results.py curve "
                "reads its curve at doubling epochs)"
            )
        return self

    @model_validator(mode="after")
    def _clause_starts_come_from_the_linear_prior(self) -> SegmentClassificationRecipe:
        if self.segments.clause_starts and not self.segments.linear_prior:
            raise ValueError(
                "segments.clause_starts are learned by the linear model, which an encoder has only as its prior: set "
                "segments.linear_prior=true as well"
            )
        return self

    @model_validator(mode="after")
    def _a_fitted_combination_needs_held_out_documents(self) -> SegmentClassificationRecipe:
        s = self.segments
        if s.combination == "fitted" and (not s.linear_prior or s.thresholds not in ("cross_fitted", "held_out")):
            raise ValueError(
                "segments.combination=fitted fits the encoder's and the linear model's weights on training documents "
                "the encoder did not train on: set segments.linear_prior=true and segments.thresholds=cross_fitted "
                "(or held_out)"
            )
        if s.thresholds == "cross_fitted" and s.encoder_input != "segments":
            raise ValueError(
                "segments.thresholds=cross_fitted trains an encoder per fold to its held-out plateau, which segment "
                "inputs do: set segments.encoder_input=segments (or use segments.thresholds=held_out)"
            )
        return self

    @model_validator(mode="after")
    def _segment_inputs_train_alone(self) -> SegmentClassificationRecipe:
        s = self.segments
        if s.encoder_input != "segments":
            return self
        problems = []
        if s.linear_prior and s.combination != "fitted":
            problems.append(
                "the encoder trains without the linear logit, so adding the two (segments.combination=sum) is not "
                "what it learned: set segments.combination=fitted, or segments.linear_prior=false"
            )
        if s.hard_negatives is not None:
            problems.append(
                "segments.hard_negatives mines windows; segment inputs sample clause-free segments anew each epoch "
                "(segments.negatives_per_positive): remove segments.hard_negatives"
            )
        if self.windows.negative_ratio is not None:
            problems.append(
                "windows.negative_ratio samples windows, which segment inputs do not read: remove it and set "
                "segments.negatives_per_positive"
            )
        if s.loss_weights != "none" or s.min_steps is not None:
            problems.append(
                "segment inputs balance the classes by sampling and train to a plateau: set segments.loss_weights=none "
                "and leave segments.min_steps unset (train.epochs caps, train.early_stopping_patience stops)"
            )
        if s.segment_tokens + 2 * s.context_tokens + 2 > self.model.max_length:
            problems.append(
                f"an input of segments.segment_tokens ({s.segment_tokens}) and twice segments.context_tokens "
                f"({s.context_tokens}) plus special tokens exceeds model.max_length ({self.model.max_length}): lower "
                "them or raise model.max_length"
            )
        if problems:
            raise ValueError("segments.encoder_input=segments: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _mining_needs_left_out_windows(self) -> SegmentClassificationRecipe:
        if self.segments.hard_negatives and self.windows.negative_ratio is None:
            raise ValueError(
                "segments.hard_negatives mines the clause-free windows that windows.negative_ratio leaves out: set "
                "windows.negative_ratio (e.g. 0.5)"
            )
        return self


class SegmentModelMeta(ModelMeta):
    """toolkit.json of a segment model (the encoder's and the linear baseline's)."""

    min_overlap: float | None = None  # share of a segment's characters in a span to be positive
    thresholds: list[float] | None = None  # per-label decision thresholds (None: the default)
    clause_starts: str | None = None  # file of the clause-start classifiers (B/I/O over segments)
    linear_prior: str | None = None  # file (in the folder) of the linear model whose logits they add
    # segments.combination=fitted: per label (w_linear, w_encoder, bias) over the two logits (None: their sum)
    combination: list[list[float]] | None = None
    # segments.encoder_input=segments: one input per segment, its first segment_tokens tokens with
    # context_tokens on either side (None: windows of max_length tokens over the document)
    segment_tokens: int | None = None
    context_tokens: int | None = None

    def side_files(self) -> list[str]:
        return [f for f in (self.linear_prior, self.clause_starts) if f]

    @property
    def decides_by_thresholds(self) -> bool:
        return bool(self.thresholds)

    def card_lines(self) -> list[str]:
        lines = []
        if self.thresholds:
            lines.append(
                "- Decision thresholds per label (how they were chosen: `run.dev_thresholds` in the run's "
                "metrics.json): " + ", ".join(f"{lb} {t}" for lb, t in zip(self.labels, self.thresholds))
            )
        if self.linear_prior:
            lines.append(
                f"- Each segment's logit adds a TF-IDF + logistic regression model's logit (`{self.linear_prior}`, "
                "scikit-learn, stored with joblib: a pickle, so load only artifacts you trust)"
            )
        if self.combination:
            alone = [lb for lb, w in zip(self.labels, self.combination) if w[1] == 0]
            lines.append(
                "- The two logits are combined per label with weights fitted on training documents held out of "
                "training; "
                + (
                    f"these labels use the linear model alone (the encoder did not help there): {', '.join(alone)}"
                    if alone
                    else "every label uses both"
                )
            )
        return lines


TASK = Task(
    name="segment_classification",
    recipe=SegmentClassificationRecipe,
    summary="segment classification (an encoder scores sentence-aligned segments per label; thresholds per label)",
    flow="toolkit.tasks.segments.method:SegmentClassification",
    predictor="toolkit.infer.segment_classifier:SegmentClassifier",
    outputs="segment_scores",
    pipeline_tag="text-classification",
    speed_docs=8,
    baseline="toolkit.registry.linear_model:baseline_recipe_data",
    meta=SegmentModelMeta,
)
