"""The sections more than one task's recipe is made of (`data:`, `model:`, `train:`, `eval:`, `sweep:`), as
strict pydantic models.

Each task's module (`toolkit/registry/<task>.py`) holds its own sections and its own variants of these
(`TaggerModelConfig`, `SegmentsConfig`, `GenerationConfig`, ...), so an option of another task is an unknown
key with its path, reported before anything runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkit.scoring_defaults import SCORING


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --- data ------------------------------------------------------------------------------------------


class DataConfig(Strict):
    """Where the labelled data is and which labels to learn."""

    train: str = Field(
        description="Span JSONL for training (path, or sample:NAME for the embedded sample); pretrain_*: any text "
        "source (.txt file, directory of .txt, JSONL with a `text` field)."
    )
    dev: str = Field(
        description="Span JSONL for the dev metric and early stopping (pretrain_*: held-out text). "
        "Never the test split."
    )
    label_map: dict[str, str] | None = Field(
        default=None,
        description="Rename labels on load (OLD: NEW), e.g. NCBI's four classes to Disease; applied to train and dev.",
    )
    labels: list[str] | None = Field(
        default=None,
        description=(
            "Labels to learn (after label_map); spans of other labels are left out (counted) and not scored. Default: "
            "every label in train."
        ),
    )
    max_train_docs: int | None = Field(
        default=None, ge=1, description="Read only the first N training documents (a quick trial run)."
    )
    max_dev_docs: int | None = Field(default=None, ge=1, description="Score only the first N dev documents.")

    def extra_corpora(self) -> tuple[list[ExtraCorpus], float]:
        """(more training corpora, data.train's weight): none, at weight 1, where the task takes only data.train."""
        return [], 1.0


class ExtraCorpus(Strict):
    """Another labelled corpus trained on beside data.train (multi-corpus training). Dev stays data.dev."""

    path: str = Field(description="Span JSONL (path or sample:NAME).")
    label_map: dict[str, str] | None = Field(
        default=None,
        description='Rename its labels to the target\'s (OLD: NEW; NEW "" drops the label, e.g. {Chemical: ""}). '
        "data.label_map is not applied to it.",
    )
    weight: float = Field(
        default=1.0,
        gt=0,
        description=(
            "Its documents per epoch as a share of its size: 0.5 = half of them (drawn once with the seed), 2 = each "
            "twice."
        ),
    )


class MultiCorpusDataConfig(DataConfig):
    """token_classification: data.train plus more training corpora."""

    train_weight: float = Field(
        default=1.0,
        gt=0,
        description="data.train's documents per epoch as a share of its size (see extra_train[].weight).",
    )
    extra_train: list[ExtraCorpus] = Field(
        default_factory=list, description="More training corpora, each with its own label map and sampling weight."
    )

    def extra_corpora(self) -> tuple[list[ExtraCorpus], float]:
        return self.extra_train, self.train_weight


# --- model -----------------------------------------------------------------------------------------


class DropoutConfig(Strict):
    """None keeps the pretrained model's value."""

    hidden: float | None = Field(
        default=None, ge=0, lt=1, description="Residual/hidden dropout (BERT hidden_dropout_prob)."
    )
    attention: float | None = Field(default=None, ge=0, lt=1, description="Attention-probability dropout.")
    classifier: float | None = Field(
        default=None, ge=0, lt=1, description="Dropout before the token-classification head."
    )
    embedding: float = Field(
        default=0.0, ge=0, lt=1, description="Extra dropout on the token-embedding output, separate from the others."
    )


class LoraConfigModel(Strict):
    enabled: bool = Field(default=False, description="Train LoRA adapters (peft) instead of every weight.")
    r: int = Field(default=8, ge=1, description="Rank of each adapter.")
    alpha: int = Field(default=16, ge=1, description="Adapter scaling numerator (the update is scaled by alpha / r).")
    dropout: float = Field(default=0.1, ge=0, lt=1, description="Dropout on the adapters' input.")
    target_modules: list[str] | None = Field(
        default=None, description="Module names to adapt; None lets peft choose for the architecture."
    )
    top_layers: int | None = Field(
        default=None,
        ge=1,
        description="Adapt only the last N transformer layers (None, or N above the model's layer count: all). "
        "Backpropagation then stops below them, so a step costs less (bench/results/ncbi_throughput_mpnet_top6.json).",
    )


class PretrainedModelConfig(Strict):
    """A pretrained transformer by hub id or local path, read in windows."""

    name: str = Field(
        default="default",
        description=(
            "Hub id or local path; 'default' is the offline MiniLM encoder (encoder tasks) or SmolLM2-135M-Instruct "
            "(decoder tasks); 'minilm' and 'mpnet' (all-mpnet-base-v2, 12 x 768: `make mpnet`) name offline encoders, "
            "'smollm2' and 'gemma3-270m' (Gemma 3 270M base: `make gemma`) offline decoders."
        ),
    )
    max_length: int = Field(
        default=256,
        ge=16,
        description=(
            "Tokens per window (encoders: special tokens included; span_generation: the window's text, the prompt "
            "comes on top)."
        ),
    )
    stride: int = Field(default=64, ge=0, description="Tokens shared by consecutive windows.")
    dropout: DropoutConfig = Field(default_factory=DropoutConfig, description="Dropout rates (None keeps the model's).")

    @model_validator(mode="after")
    def _not_the_baseline(self) -> PretrainedModelConfig:
        if self.name == "linear":
            raise ValueError(
                "model.name linear is no longer the bag-of-words baseline: set model.kind=linear (or pass "
                "--linear-baseline to toolkit run)"
            )
        return self

    @model_validator(mode="after")
    def _stride_fits(self) -> PretrainedModelConfig:
        if self.stride >= self.max_length // 2:
            raise ValueError(
                f"stride {self.stride} must be under half of max_length {self.max_length}: lower model.stride"
            )
        return self


class ModelConfig(PretrainedModelConfig):
    """A pretrained transformer fine-tuned whole or with LoRA adapters (peft)."""

    lora: LoraConfigModel = Field(default_factory=LoraConfigModel, description="LoRA adapters (off by default).")


class ClassifierModelConfig(ModelConfig):
    """token_classification and segment_classification: an encoder, or a decoder used as a classifier."""

    attention: Literal["causal", "bidirectional"] = Field(
        default="causal",
        description=(
            "Decoders only: bidirectional removes the causal mask (LS-unLLaMA) so every token sees the whole "
            "window, in every layer or the top model.bidirectional_layers. Saved with the model. Encoders attend "
            "both ways already (setting it on one is an error)."
        ),
    )
    bidirectional_layers: int | None = Field(
        default=None, ge=1, description="attention=bidirectional: only the last N layers (None: all)."
    )
    train_layers: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Fine-tune only the last N transformer layers and the head; the embeddings and the layers below stay "
            "frozen, so backpropagation stops at layer N from the top and a step costs less (None, or N at or "
            "above the model's layer count: every weight). For a base-size encoder on CPU; LoRA has its own "
            "model.lora.top_layers."
        ),
    )

    @model_validator(mode="after")
    def _train_layers_without_lora(self) -> ClassifierModelConfig:
        if self.train_layers is not None and self.lora.enabled:
            raise ValueError(
                "model.train_layers fine-tunes the top layers' weights and model.lora.enabled trains adapters: keep "
                "one (model.lora.top_layers limits the adapters to the top layers)"
            )
        return self

    @model_validator(mode="after")
    def _layers_need_bidirectional(self) -> ClassifierModelConfig:
        if self.bidirectional_layers is not None and self.attention != "bidirectional":
            raise ValueError(
                "model.bidirectional_layers needs model.attention=bidirectional: set it or remove the count"
            )
        return self


# --- training --------------------------------------------------------------------------------------


class WindowsConfig(Strict):
    """How documents are cut into training windows (model.max_length tokens, model.stride apart)."""

    negative_ratio: float | None = Field(
        default=None,
        ge=0,
        description="Keep this many windows without spans per window with spans (training only). None keeps all.",
    )


class PlateauConfig(Strict):
    """The plateau rule of a learning curve read at doubling budgets: stop when the last doubling adds less to
    `metric` than half the width of its 95% CI at the newer point."""

    metric: str = Field(
        default="boundary_both_within_3_recall",
        description="A learning-curve score (curve.jsonl metrics), e.g. boundary_both_within_3_recall.",
    )
    min_epochs: float = Field(
        default=4,
        gt=0,
        description="Never stop before this many epochs: a curve still at zero is not flat, it has not started.",
    )


class TrainConfig(Strict):
    """The optimizer, schedule and budget of fine-tuning (transformers' Trainer)."""

    learning_rate: float = Field(default=5e-5, gt=0, description="Peak learning rate (AdamW, after warmup).")
    epochs: float = Field(default=3, gt=0, description="Passes over the training windows (fractions allowed).")
    max_steps: int = Field(default=-1, description="Stop after this many optimizer steps (-1: by epochs).")
    batch_size: int = Field(default=8, ge=1, description="Training windows per step (per process).")
    eval_batch_size: int = Field(default=16, ge=1, description="Windows per forward pass when scoring.")
    gradient_accumulation: int = Field(
        default=1, ge=1, description="Steps whose gradients add up to one optimizer step."
    )
    warmup_ratio: float = Field(
        default=0.1, ge=0, lt=1, description="Share of the schedule spent warming the learning rate up from 0."
    )
    warmup_steps: int | None = Field(
        default=None,
        ge=0,
        description="Warm up over this many optimizer steps instead of train.warmup_ratio (a schedule with no end "
        "known in advance: lr_schedule=constant).",
    )
    lr_schedule: Literal["linear", "constant"] = Field(
        default="linear",
        description="linear: warmup then decay to 0 at the end of the schedule. constant: warmup then the peak rate "
        "throughout, so the model after N epochs is what an N-epoch run would give (learning curves at doubling "
        "budgets).",
    )
    plateau: PlateauConfig | None = Field(
        default=None,
        description="Stop once the learning curve flattens: needs train.eval_every=doubling and eval.curve_docs.",
    )
    weight_decay: float = Field(default=0.01, ge=0, description="AdamW weight decay.")
    early_stopping_patience: int | None = Field(
        default=None, ge=1, description="Evaluations without dev improvement before stopping."
    )
    eval_every: Literal["epoch", "doubling"] | int = Field(
        default="epoch",
        description="'epoch', a number of steps, or 'doubling': after epochs 1, 2, 4, 8, ... and at the last one "
        "(learning curves at doubling budgets).",
    )
    logging_steps: int = Field(default=10, ge=1, description="Log the training loss every N steps.")
    save_total_limit: int = Field(default=2, ge=1, description="Checkpoints kept on disk (the best one is kept too).")
    group_by_length: bool = Field(
        default=True, description="Batch windows of similar length together (less padding per step)."
    )
    max_seconds: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Stop after this many seconds of training steps (evaluations excluded): a wall-clock budget to match "
            "between runs."
        ),
    )
    eval_every_seconds: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Evaluate and checkpoint every N seconds of training steps instead of by epoch or step count, so runs "
            "with different step times are scored at the same budgets (learning curves)."
        ),
    )
    schedule_by: Literal["steps", "seconds"] = Field(
        default="steps",
        description=(
            "steps: warmup and linear decay over the optimizer steps of train.epochs / max_steps. seconds: over "
            "train.max_seconds of training steps, so a run given a time budget ends it with its learning rate "
            "decayed, whatever its step time."
        ),
    )
    precision: Literal["auto", "prefer_bf16", "fp32", "bf16", "fp16"] = Field(
        default="auto",
        description="auto: bf16 on CUDA devices that support it, else fp32; prefer_bf16: also bf16 on CPUs with bf16 "
        "units "
        "(avx512_bf16, amx_bf16), fp32 elsewhere; bf16: bf16 or an error.",
    )

    @model_validator(mode="after")
    def _budget_settings(self) -> TrainConfig:
        if self.schedule_by == "seconds" and self.max_seconds is None:
            raise ValueError(
                "train.schedule_by=seconds spreads the learning-rate schedule over train.max_seconds: set "
                "train.max_seconds (e.g. 600) or use schedule_by=steps"
            )
        if self.schedule_by == "seconds" and self.lr_schedule != "linear":
            raise ValueError(
                "train.schedule_by=seconds decays the learning rate over train.max_seconds: use lr_schedule=linear "
                "with it, or schedule_by=steps"
            )
        if self.plateau is not None and self.eval_every != "doubling":
            raise ValueError(
                "train.plateau compares the curve at doubling budgets: set train.eval_every=doubling (and "
                "eval.curve_docs)"
            )
        if self.eval_every_seconds is not None and self.eval_every != "epoch":
            raise ValueError(
                "train.eval_every and train.eval_every_seconds both set: keep one (seconds scores runs with "
                "different step times at the same budgets)"
            )
        return self


# --- segment_classification ------------------------------------------------------------------------


# --- span_generation -------------------------------------------------------------------------------


# --- pretraining -----------------------------------------------------------------------------------


# --- scoring and sweeps ----------------------------------------------------------------------------


class EvalConfig(Strict):
    """How dev is scored (toolkit/evaluate): tolerances, bootstrap CIs, the Jaccard match and learning curves."""

    boundary_tolerance: list[int] = Field(
        default=list(SCORING.boundary_tolerance), description="k for boundary recall within +/-k tokens."
    )
    bootstrap: int = Field(
        default=SCORING.bootstrap, ge=0, description="Bootstrap resamples over documents for 95% CIs (0: none)."
    )
    jaccard_threshold: float = Field(
        default=SCORING.jaccard_threshold,
        gt=0,
        le=1,
        description="Word Jaccard at which a predicted span matches a gold one (Jaccard F1, ranking metrics, tuned "
        "thresholds).",
    )
    curve_docs: int | None = Field(
        default=None,
        ge=1,
        description="At every checkpoint, predict the first N dev documents with the task's own predictor and log "
        "recall "
        "against training seconds (curve.jsonl; `toolkit compare --curves`).",
    )
    precision: Literal["fp32", "prefer_bf16"] = Field(
        default="fp32",
        description="The precision of a classifier's evaluation (learning-curve points and the end-of-training "
        "score): prefer_bf16 runs it under bf16 autocast on machines with bf16 units (CUDA, avx512_bf16, amx_bf16), "
        "fp32 elsewhere. Span generation evaluates at generation.precision, the precision it also serves at.",
    )


class FloatRange(Strict):
    """An Optuna search range."""

    low: float = Field(description="Lowest value tried.")
    high: float = Field(description="Highest value tried.")
    log: bool = Field(default=False, description="Sample on a log scale (learning rates).")


class SweepConfig(Strict):
    """A sweep: one run per combination (grid) or per trial (optuna), each a run directory of its own."""

    method: Literal["grid", "optuna"] = Field(
        default="grid", description="grid: every combination of the listed values; optuna: n_trials TPE trials."
    )
    params: dict[str, list[Any] | FloatRange] = Field(
        description="Dotted config key -> values (grid, optuna) or {low, high, log} (optuna)."
    )
    n_trials: int | None = Field(default=None, ge=1, description="Optuna trials (required for method: optuna).")
    metric: str = Field(default="span_f1", description="Dev metric to maximise (a key of metrics.json 'summary').")

    @model_validator(mode="after")
    def _check(self) -> SweepConfig:
        if self.method == "optuna" and self.n_trials is None:
            raise ValueError("method: optuna needs n_trials: set sweep.n_trials")
        if self.method == "grid":
            ranged = [k for k, v in self.params.items() if isinstance(v, FloatRange)]
            if ranged:
                raise ValueError(f"grid needs lists of values; {ranged} are ranges: use method: optuna")
        return self
