"""The sections a recipe is made of (`data:`, `model:`, `train:`, ...), as strict pydantic models.

Each task's recipe (`toolkit/registry/<task>.py`) takes the sections it accepts, and task-only options
live in a task's own variant of a section (`TaggerModelConfig`, `TaggerTrainConfig`, ...), so an option
of another task is an unknown key with its path, reported before anything runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkit.scoring import SCORING


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
        "Backpropagation then stops below them, so a step costs less (docs/benchmarks.md at 0ea11c2).",
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


class TaggerModelConfig(ClassifierModelConfig):
    """token_classification: how words are tagged and tags become spans."""

    label_all_subtokens: bool = Field(
        default=False, description="Train on every sub-token (True) or the first of each word only."
    )
    multi_label: bool = Field(
        default=False,
        description="An independent O/B/I layer per label, so spans of different labels may overlap (CUAD).",
    )
    decoding: Literal["argmax", "viterbi"] = Field(
        default="argmax",
        description="Tags -> spans: argmax per word (orphan I- tags repaired), or viterbi: the most probable valid "
        "IOB2 "
        "sequence (no fragments from one doubtful word). Saved with the model; eval and serving use it.",
    )


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


class LinearModelConfig(Strict):
    """The segment task's bag-of-words baseline: TF-IDF and a logistic regression per label (scikit-learn)."""

    kind: Literal["linear"] = Field(description="linear: the bag-of-words baseline (no transformer, no training loop).")

    @property
    def name(self) -> str:
        """What run records and tables show as the model."""
        return self.kind


# --- training --------------------------------------------------------------------------------------


class WindowsConfig(Strict):
    """How documents are cut into training windows (model.max_length tokens, model.stride apart)."""

    negative_ratio: float | None = Field(
        default=None,
        ge=0,
        description="Keep this many windows without spans per window with spans (training only). None keeps all.",
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
    weight_decay: float = Field(default=0.01, ge=0, description="AdamW weight decay.")
    early_stopping_patience: int | None = Field(
        default=None, ge=1, description="Evaluations without dev improvement before stopping."
    )
    eval_every: Literal["epoch"] | int = Field(default="epoch", description="'epoch' or a number of steps.")
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
        if self.eval_every_seconds is not None and self.eval_every != "epoch":
            raise ValueError(
                "train.eval_every and train.eval_every_seconds both set: keep one (seconds scores runs with "
                "different step times at the same budgets)"
            )
        return self


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


# --- segment_classification ------------------------------------------------------------------------


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
    thresholds: Literal["tuned", "out_of_fold", "held_out", "fixed"] = Field(
        default="tuned",
        description=(
            "Per-label thresholds saved with the model. tuned: chosen on dev (dev figures cross-fitted over its two "
            "halves); out_of_fold: chosen on the training documents' out-of-fold scores (segments.folds folds; the "
            "linear baseline); held_out: chosen on a share of the training documents (segments.held_out_share) the "
            "encoder does not train on; with either, dev only reports. fixed: "
            f"{SCORING.decision_threshold} for every label."
        ),
    )
    folds: int = Field(default=5, ge=2, description="out_of_fold and linear_prior: folds of the training documents.")
    held_out_share: float = Field(
        default=0.1,
        gt=0,
        le=0.5,
        description="thresholds=held_out: the share of training documents kept out of training to choose them on.",
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
            "added (the prior the encoder trains against). fitted: per label, a logistic regression over the two "
            "logits and a threshold, fitted on the training documents held out of training "
            "(segments.thresholds=held_out); a label where the encoder does not raise the held-out Jaccard F1 "
            "(cross-fitted over two halves of them), or its logit fails a likelihood-ratio test against the linear "
            "one, falls back to the linear model alone at its out-of-fold threshold. Training's evaluations and "
            "best checkpoint then read those documents too, so dev only reports."
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


# --- span_generation -------------------------------------------------------------------------------


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
            "avx512_bf16, amx_bf16), fp32 elsewhere. Spans can differ from fp32's (docs/benchmarks.md at 0ea11c2)."
        ),
    )
    min_similarity: float = Field(
        default=90.0, ge=0, le=100, description="Fuzzy offset recovery threshold (rapidfuzz partial ratio, 0-100)."
    )
    chat_template: bool = Field(
        default=False, description="Wrap prompt and target in the tokenizer's chat template (instruction-tuned models)."
    )


# --- pretraining -----------------------------------------------------------------------------------


class PretrainConfig(Strict):
    """pretrain_mlm / pretrain_clm: domain-adaptive pre-training on unlabeled text."""

    packing: bool = Field(
        default=True,
        description="Concatenate documents and cut blocks of model.max_length tokens (no padding); False: one window "
        "per block.",
    )
    eval_blocks: int = Field(default=256, ge=1, description="Held-out blocks scored before and after (same blocks).")


class MaskingConfig(PretrainConfig):
    """pretrain_mlm: which tokens are masked (BERT: 15% selected; of those 80% [MASK], 10% random, 10% kept)."""

    mlm_probability: float = Field(
        default=0.15, gt=0, lt=1, description="Share of tokens selected for prediction (BERT: 0.15)."
    )
    mask_replace_prob: float = Field(
        default=0.8, ge=0, le=1, description="Of the selected tokens, the share replaced by [MASK] (BERT: 0.8)."
    )
    random_replace_prob: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Of the selected tokens, the share replaced by a random token (BERT: 0.1); the rest stay "
        "unchanged.",
    )
    whole_word_mask: bool = Field(default=False, description="Select whole words (every sub-token of a word together).")
    eval_mlm_probability: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Selection rate of the held-out masks (default: mlm_probability). Fix it (e.g. 0.15) to compare "
        "runs "
        "trained at different rates on the same masks.",
    )

    @model_validator(mode="after")
    def _rates(self) -> MaskingConfig:
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError("mask_replace_prob + random_replace_prob must not exceed 1 (the rest stay unchanged)")
        if self.whole_word_mask and (self.mask_replace_prob != 1 or self.random_replace_prob != 0):
            # transformers' whole-word masking replaces selected words by [MASK] only.
            raise ValueError(
                "whole_word_mask supports [MASK] replacement only: set pretrain.mask_replace_prob=1 and "
                "pretrain.random_replace_prob=0"
            )
        return self


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
