"""The scoring contract in one place: the defaults (recipes' `eval:`, `toolkit eval` and `compare`,
thresholds and the ranking metrics read them here) and the names of the summary metrics a run writes.
Imports nothing, so every layer may use it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ScoringDefaults:
    boundary_tolerance: tuple[int, ...] = (1, 3)  # k of boundary recall within +/-k words
    jaccard_threshold: float = 0.5  # CUAD's matching: word Jaccard >= 0.5, one-to-one
    bootstrap: int = 1000  # document resamples for 95% intervals
    decision_threshold: float = 0.5  # a segment model's per-label probability threshold when none is tuned
    # Fewer gold clauses of a label than this in the documents its threshold is chosen on: the choice among
    # the grid's thresholds fits those few clauses (a run says so for each such label).
    min_clauses_to_tune: int = 20


SCORING = ScoringDefaults()

# Keys of metrics.json "summary" for a span extractor (evaluate.metrics.score writes them; a test checks).
SPAN_SUMMARY = (
    "span_precision",
    "span_recall",
    "span_f1",
    "jaccard_precision",
    "jaccard_recall",
    "jaccard_f1",
    "hallucination_rate",
    "boundary_start_recall",
    "boundary_end_recall",
    "boundary_both_recall",
    "span_macro_f1",
    "seqeval_precision",
    "seqeval_recall",
    "seqeval_f1",
)
# Keys of metrics.json "summary" for domain-adaptive pre-training (held-out masked or next-token loss).
PRETRAIN_SUMMARY = ("loss", "perplexity", "token_accuracy", "scored_tokens")


def span_summary_names(tolerances: Sequence[int]) -> tuple[str, ...]:
    """Every summary key of a span extractor scored with these boundary tolerances."""
    within = tuple(f"boundary_{part}_within_{k}_recall" for k in tolerances for part in ("start", "end", "both"))
    return SPAN_SUMMARY + within


# What a learning-curve point (curve.jsonl) keeps of the scorer's output, with their 95% CIs, besides boundary
# recall within +/-k words; train.plateau.metric names one of them.
CURVE_KEYS = (
    "span_recall",
    "span_precision",
    "span_f1",
    "jaccard_recall",
    "jaccard_f1",
    "boundary_both_recall",
    "hallucination_rate",
)


def curve_keys(tolerances: Sequence[int]) -> list[str]:
    """Every score a curve point holds for these boundary tolerances."""
    return [*CURVE_KEYS, *(f"boundary_both_within_{k}_recall" for k in tolerances)]
