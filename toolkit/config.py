"""Recipes: strict, typed configuration read from YAML.

One recipe file is one run, or one sweep when it has a `sweep:` block. Unknown
keys fail with their key path; every error is reported at once. `key=value`
overrides on the command line use the same dotted paths (`train.learning_rate=2e-5`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolkit.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ExtraCorpus(_Strict):
    """Another labelled corpus trained on beside data.train (multi-corpus training). Dev stays data.dev."""

    path: str = Field(description="Span JSONL (path or sample:NAME).")
    label_map: dict[str, str] | None = Field(
        default=None,
        description='Rename its labels to the target\'s (OLD: NEW; NEW "" drops the label, e.g. {Chemical: ""}). data.label_map is not applied to it.',
    )
    weight: float = Field(
        default=1.0,
        gt=0,
        description="Its documents per epoch as a share of its size: 0.5 = half of them (drawn once with the seed), 2 = each twice.",
    )


class DataConfig(_Strict):
    train: str = Field(
        description="Span JSONL for training (path, or sample:NAME for the embedded sample); pretrain_*: any text source (.txt file, directory of .txt, JSONL with a `text` field)."
    )
    dev: str = Field(description="Span JSONL for the dev metric and early stopping (pretrain_*: held-out text). Never the test split.")
    label_map: dict[str, str] | None = Field(
        default=None, description="Rename labels on load (OLD: NEW), e.g. NCBI's four classes to Disease; applied to train and dev."
    )
    labels: list[str] | None = Field(
        default=None,
        description="Labels to learn (after label_map); spans of other labels are left out (counted) and not scored. Default: every label in train.",
    )
    max_train_docs: int | None = Field(default=None, ge=1)
    max_dev_docs: int | None = Field(default=None, ge=1)
    train_weight: float = Field(default=1.0, gt=0, description="data.train's documents per epoch as a share of its size (see extra_train[].weight).")
    extra_train: list[ExtraCorpus] = Field(
        default_factory=list, description="More training corpora, each with its own label map and sampling weight (token_classification)."
    )


class DropoutConfig(_Strict):
    """None keeps the pretrained model's value."""

    hidden: float | None = Field(default=None, ge=0, lt=1, description="Residual/hidden dropout (BERT hidden_dropout_prob).")
    attention: float | None = Field(default=None, ge=0, lt=1, description="Attention-probability dropout.")
    classifier: float | None = Field(default=None, ge=0, lt=1, description="Dropout before the token-classification head.")
    embedding: float = Field(default=0.0, ge=0, lt=1, description="Extra dropout on the token-embedding output, separate from the others.")


class LoraConfigModel(_Strict):
    enabled: bool = False
    r: int = Field(default=8, ge=1)
    alpha: int = Field(default=16, ge=1)
    dropout: float = Field(default=0.1, ge=0, lt=1)
    target_modules: list[str] | None = Field(default=None, description="Module names to adapt; None lets peft choose for the architecture.")
    top_layers: int | None = Field(
        default=None,
        ge=1,
        description="Adapt only the last N transformer layers (None, or N above the model's layer count: all). Backpropagation then stops below them, so a step costs less "
        "(SmolLM2-135M, 10 of 30 layers: about half the fp32 step time on 2 CPU cores; docs/benchmarks.md).",
    )


class ModelConfig(_Strict):
    name: str = Field(
        default="default",
        description="Hub id or local path; 'default' is the offline MiniLM encoder (token_classification) or SmolLM2-135M-Instruct (span_generation); "
        "'linear' (segment_classification only) is the TF-IDF + logistic-regression baseline.",
    )
    max_length: int = Field(
        default=256,
        ge=16,
        description="Tokens per window (token_classification: special tokens included; span_generation: the window's text, the prompt comes on top).",
    )
    stride: int = Field(default=64, ge=0, description="Tokens shared by consecutive windows.")
    label_all_subtokens: bool = Field(default=False, description="Train on every sub-token (True) or the first of each word only.")
    multi_label: bool = Field(default=False, description="An independent O/B/I layer per label, so spans of different labels may overlap (CUAD).")
    decoding: Literal["argmax", "viterbi"] = Field(
        default="argmax",
        description="Tags -> spans: argmax per word (orphan I- tags repaired), or viterbi: the most probable valid IOB2 sequence (no fragments from one doubtful word). Saved with the model; eval and serving use it.",
    )
    dropout: DropoutConfig = Field(default_factory=DropoutConfig)
    lora: LoraConfigModel = Field(default_factory=LoraConfigModel)
    quantization: Literal["none", "4bit"] = Field(default="none", description="4bit: QLoRA (span_generation with LoRA; needs CUDA and bitsandbytes).")

    @model_validator(mode="after")
    def _stride_fits(self) -> ModelConfig:
        if self.stride >= self.max_length // 2:
            raise ValueError(f"stride {self.stride} must be under half of max_length {self.max_length}")
        return self


class WindowsConfig(_Strict):
    negative_ratio: float | None = Field(
        default=None, ge=0, description="Keep this many windows without spans per window with spans (training only). None keeps all."
    )


class TrainConfig(_Strict):
    learning_rate: float = Field(default=5e-5, gt=0)
    epochs: float = Field(default=3, gt=0)
    max_steps: int = Field(default=-1, description="Stop after this many optimizer steps (-1: by epochs).")
    batch_size: int = Field(default=8, ge=1)
    eval_batch_size: int = Field(default=16, ge=1)
    gradient_accumulation: int = Field(default=1, ge=1)
    warmup_ratio: float = Field(default=0.1, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    class_weights: Literal["none", "balanced"] | dict[str, float] = Field(default="none", description="Loss weights for rare labels.")
    early_stopping_patience: int | None = Field(default=None, ge=1, description="Evaluations without dev improvement before stopping.")
    eval_every: Literal["epoch"] | int = Field(default="epoch", description="'epoch' or a number of steps.")
    logging_steps: int = Field(default=10, ge=1)
    save_total_limit: int = Field(default=2, ge=1)
    group_by_length: bool = True
    layer_lr_decay: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Layer-wise learning-rate decay: layer l of L trains at learning_rate x decay^(L - l), the embeddings at decay^L (token_classification; e.g. 0.9).",
    )
    head_learning_rate: float | None = Field(
        default=None, gt=0, description="A separate learning rate for the freshly initialised classification head (token_classification; e.g. 1e-3)."
    )
    average_checkpoints: int | None = Field(
        default=None,
        ge=2,
        description="Average the weights of the last k checkpoints (by step) and save that model instead of the best one (token_classification; needs save_total_limit >= k).",
    )
    max_seconds: float | None = Field(
        default=None, gt=0, description="Stop after this many seconds of training steps (evaluations excluded): a wall-clock budget to match between runs."
    )
    precision: Literal["auto", "prefer_bf16", "fp32", "bf16", "fp16"] = Field(
        default="auto",
        description="auto: bf16 on CUDA devices that support it, else fp32; prefer_bf16: also bf16 on CPUs with bf16 units (avx512_bf16, amx_bf16), fp32 elsewhere; bf16: bf16 or an error.",
    )


class HardNegativesConfig(_Strict):
    """After training, score clause-free training windows that `windows.negative_ratio` left out, add those
    where the model fires, and train on, so the model learns from the text it confuses with clauses."""

    pool: int = Field(default=4000, ge=1, description="Left-out clause-free windows sampled and scored (scoring costs about one dev evaluation per 4,000).")
    min_score: float = Field(default=0.5, gt=0, lt=1, description="A window is a hard negative when one of its segments scores at least this for a label.")
    max_windows: int | None = Field(default=None, ge=1, description="Keep at most this many, highest scores first (default: as many as negative_ratio kept).")
    epochs: float = Field(default=1.0, gt=0, description="Epochs of continued training on the clause windows, the sampled negatives and the mined ones.")
    choose: Literal["hardest", "random"] = Field(
        default="hardest", description="random: as many left-out windows as would be mined, drawn at random (the control that tells mining from more data)."
    )


class SegmentsConfig(_Strict):
    """segment_classification only: how segments are labeled, weighted and decided."""

    min_overlap: float = Field(default=0.5, gt=0, le=1, description="A segment is positive for a label when this share of its characters lies in a span of it.")
    loss_weights: Literal["none", "balanced"] = Field(
        default="balanced", description="balanced: positives weighted by negatives/positives per label (capped at 100)."
    )
    focal_gamma: float = Field(default=0.0, ge=0, description="Focal loss exponent (0: plain binary cross-entropy).")
    thresholds: Literal["tuned", "fixed"] = Field(
        default="tuned", description="tuned: per-label thresholds chosen on dev and saved with the model; fixed: 0.5 for every label."
    )
    hard_negatives: HardNegativesConfig | None = Field(default=None, description="Hard-negative mining after training (off when absent).")


class SelectorConfig(_Strict):
    """span_generation: which windows the decoder reads (toolkit/infer/selector.py)."""

    kind: Literal["none", "linear"] = Field(
        default="none", description="linear: TF-IDF + logistic regression over window text, fitted on the training windows."
    )
    recall: float = Field(
        default=0.95, gt=0, le=1, description="Share of training windows with spans the selector keeps (3-fold cross-validation sets its threshold)."
    )


class GenerationConfig(_Strict):
    """span_generation only: how spans are written, generated and mapped back to the text."""

    target: Literal["text", "anchors", "segments"] = Field(
        default="text",
        description="text: each span copied verbatim; anchors: its first and last words; segments: the numbers of the window's segments it covers (toolkit/infer/completions.py).",
    )
    anchor_words: int = Field(default=4, ge=1, description="anchors: words at each end of a span (shorter spans are written whole).")
    min_overlap: float = Field(default=0.5, gt=0, le=1, description="segments: a segment belongs to a span when this share of its characters lies in it.")
    selector: SelectorConfig = Field(default_factory=SelectorConfig)
    max_new_tokens: int = Field(default=128, ge=1, description="Generation budget per window.")
    batch_size: int = Field(default=8, ge=1, description="Windows generated together (left-padded).")
    constrained: bool = Field(default=False, description="Constrained decoding: a completion can only name text (or segments) its window holds.")
    precision: Literal["fp32", "prefer_bf16"] = Field(
        default="fp32",
        description="Inference: prefer_bf16 generates under bf16 autocast on machines with bf16 units (CUDA, avx512_bf16, amx_bf16), fp32 elsewhere.",
    )
    min_similarity: float = Field(default=90.0, ge=0, le=100, description="Fuzzy offset recovery threshold (rapidfuzz partial ratio, 0-100).")
    chat_template: bool = Field(default=False, description="Wrap prompt and target in the tokenizer's chat template (instruction-tuned models).")


class PretrainConfig(_Strict):
    """pretrain_mlm / pretrain_clm: domain-adaptive pre-training on unlabeled text."""

    mlm_probability: float = Field(default=0.15, gt=0, lt=1, description="Share of tokens selected for prediction (BERT: 0.15).")
    mask_replace_prob: float = Field(default=0.8, ge=0, le=1, description="Of the selected tokens, the share replaced by [MASK] (BERT: 0.8).")
    random_replace_prob: float = Field(
        default=0.1, ge=0, le=1, description="Of the selected tokens, the share replaced by a random token (BERT: 0.1); the rest stay unchanged."
    )
    whole_word_mask: bool = Field(default=False, description="Select whole words (every sub-token of a word together).")
    packing: bool = Field(
        default=True, description="Concatenate documents and cut blocks of model.max_length tokens (no padding); False: one window per block."
    )
    eval_blocks: int = Field(default=256, ge=1, description="Held-out blocks scored before and after (fixed masks, same blocks).")
    eval_mlm_probability: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Selection rate of the held-out masks (default: mlm_probability). Fix it (e.g. 0.15) to compare runs trained at different rates on the same masks.",
    )

    @model_validator(mode="after")
    def _rates(self) -> PretrainConfig:
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError("mask_replace_prob + random_replace_prob must not exceed 1 (the rest stay unchanged)")
        if self.whole_word_mask and (self.mask_replace_prob != 1 or self.random_replace_prob != 0):
            # transformers' whole-word masking replaces selected words by [MASK] only.
            raise ValueError("whole_word_mask supports [MASK] replacement only: set pretrain.mask_replace_prob=1 and pretrain.random_replace_prob=0")
        return self


class EvalConfig(_Strict):
    boundary_tolerance: list[int] = Field(default=[1, 3], description="k for boundary recall within +/-k tokens.")
    bootstrap: int = Field(default=1000, ge=0, description="Bootstrap resamples over documents for 95% CIs (0: none).")
    jaccard_threshold: float = Field(default=0.5, gt=0, le=1)
    curve_docs: int | None = Field(
        default=None,
        ge=1,
        description="At every checkpoint, predict the first N dev documents with the task's own predictor and log recall against training seconds (curve.jsonl; `toolkit compare --curves`).",
    )


class FloatRange(_Strict):
    low: float
    high: float
    log: bool = False


class SweepConfig(_Strict):
    method: Literal["grid", "optuna"] = "grid"
    params: dict[str, list[Any] | FloatRange] = Field(description="Dotted config key -> values (grid, optuna) or {low, high, log} (optuna).")
    n_trials: int | None = Field(default=None, ge=1, description="Optuna trials (required for method: optuna).")
    metric: str = Field(default="span_f1", description="Dev metric to maximise (a key of metrics.json 'summary').")

    @model_validator(mode="after")
    def _check(self) -> SweepConfig:
        if self.method == "optuna" and self.n_trials is None:
            raise ValueError("method: optuna needs n_trials")
        if self.method == "grid":
            ranged = [k for k, v in self.params.items() if isinstance(v, FloatRange)]
            if ranged:
                raise ValueError(f"grid needs lists of values; {ranged} are ranges (use method: optuna)")
        return self


class Recipe(_Strict):
    task: Literal["token_classification", "segment_classification", "span_generation", "pretrain_mlm", "pretrain_clm"]
    name: str = Field(description="Run name; the run directory is <output_dir>/<name>.")
    seed: int = 13
    output_dir: str = Field(default="runs", description="Where run directories go.")
    data: DataConfig
    model: ModelConfig = Field(default_factory=ModelConfig)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    segments: SegmentsConfig = Field(default_factory=SegmentsConfig)
    pretrain: PretrainConfig = Field(default_factory=PretrainConfig)
    sweep: SweepConfig | None = None

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not v or any(c in v for c in "/\\") or v.startswith("."):
            raise ValueError("name must be a plain directory name (no slashes)")
        return v

    @model_validator(mode="after")
    def _task_options(self) -> Recipe:
        if self.task != "token_classification":
            if self.model.multi_label or self.model.label_all_subtokens:
                raise ValueError("model.multi_label and model.label_all_subtokens apply to token_classification only")
            if self.train.class_weights != "none":
                raise ValueError("train.class_weights applies to token_classification only")
            t = self.train
            if t.layer_lr_decay or t.head_learning_rate or t.average_checkpoints or self.model.decoding != "argmax":
                raise ValueError(
                    "train.layer_lr_decay, train.head_learning_rate, train.average_checkpoints and model.decoding apply to token_classification only"
                )
            if self.data.extra_train or self.data.train_weight != 1.0:
                raise ValueError("data.extra_train and data.train_weight (multi-corpus training) apply to token_classification only")
        if self.train.average_checkpoints and self.train.save_total_limit < self.train.average_checkpoints:
            raise ValueError(
                f"train.average_checkpoints={self.train.average_checkpoints} needs that many checkpoints kept: set train.save_total_limit >= {self.train.average_checkpoints}"
            )
        if self.task != "segment_classification" and self.segments != SegmentsConfig():
            raise ValueError("segments.* applies to segment_classification only")
        if self.segments.hard_negatives and self.windows.negative_ratio is None:
            raise ValueError(
                "segments.hard_negatives mines the clause-free windows that windows.negative_ratio leaves out: set windows.negative_ratio (e.g. 0.5)"
            )
        if self.segments.hard_negatives and self.model.name == "linear":
            raise ValueError("segments.hard_negatives trains an encoder on; the linear baseline already fits on every segment: drop it for model.name=linear")
        if self.task != "span_generation" and self.generation != GenerationConfig():
            raise ValueError("generation.* applies to span_generation only")
        if self.eval.curve_docs and self.task.startswith("pretrain"):
            raise ValueError("eval.curve_docs scores extraction: it applies to token_classification, segment_classification and span_generation")
        if self.model.name == "linear" and self.task != "segment_classification":
            raise ValueError("model.name=linear is the segment task's bag-of-words baseline: it needs task segment_classification")
        if self.model.quantization == "4bit" and not (self.task == "span_generation" and self.model.lora.enabled):
            raise ValueError("model.quantization=4bit is QLoRA: it needs task span_generation with model.lora.enabled")
        return self

    @model_validator(mode="after")
    def _sweep_keys_exist(self) -> Recipe:
        if self.sweep is not None:
            data = self.model_dump()
            for key in self.sweep.params:
                node: Any = data
                for part in key.split("."):
                    if not isinstance(node, dict) or part not in node:
                        raise ValueError(f"sweep.params key {key!r} is not a config key")
                    node = node[part]
        return self


def _format_errors(exc: ValidationError, source: str) -> ConfigError:
    lines = []
    for err in exc.errors(include_url=False):
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            fix = "remove it or check its spelling (see the recipes in recipes/ for valid keys)"
        elif err["type"] == "missing":
            fix = "add it"
        else:
            fix = "correct the value"
        lines.append(f"  {path}: {err['msg']} (got {err.get('input')!r}); fix: {fix}")
    return ConfigError(f"{source}: {len(lines)} config error(s)\n" + "\n".join(lines), fix="edit the recipe or the key=value override")


def parse_override(text: str) -> tuple[str, Any]:
    """'train.learning_rate=2e-5' -> ('train.learning_rate', 2e-05); values are parsed as YAML."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not key=value", fix="e.g. train.learning_rate=2e-5")
    return key.strip(), (_yaml(raw) if raw != "" else None)


def set_dotted(data: dict, key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads 2e-5 (no dot) as a string; resolve floats the YAML 1.2 way."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)$|^[-+]?(?:[0-9][0-9_]*)\.[0-9_]*$|^[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_recipe(path: Path | str, overrides: list[str] | None = None) -> Recipe:
    """Read, override and validate a recipe; raises ConfigError listing every problem."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such recipe", fix="pass a YAML file from recipes/ or your own")
    try:
        data = _yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})", fix="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe is a YAML mapping", fix="see recipes/demo_mlm.yaml")
    return recipe_from_dict(data, overrides, str(path))


def recipe_from_dict(data: dict, overrides: list[str] | None = None, source: str = "recipe") -> Recipe:
    data = copy.deepcopy(data)
    for text in overrides or []:
        key, value = parse_override(text)
        set_dotted(data, key, value)
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise _format_errors(exc, source) from None


def with_params(recipe: Recipe, params: dict[str, Any]) -> Recipe:
    """A copy of `recipe` with dotted keys set (used by sweeps); validated again."""
    data = recipe.model_dump()
    data.pop("sweep", None)
    for key, value in params.items():
        set_dotted(data, key, value)
    return recipe_from_dict(data, source=f"trial {params}")


def dump_recipe(recipe: Recipe, path: Path) -> None:
    """Save the resolved config (every default filled in) beside a run's outputs."""
    path.write_text(yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False, allow_unicode=True), encoding="utf-8")
