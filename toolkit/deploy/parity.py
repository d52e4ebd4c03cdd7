"""The parity gate of an export: a path's outputs on the fixed parity documents against the run's PyTorch fp32
model's (largest logit difference, decision agreement, span F1 and its drop with a 95% interval), and the
budgets they must stay within. What a model's outputs are, and what a decision is, its predictor says
(`toolkit.infer.predictor.ExportablePredictor`)."""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.errors import ToolkitError
from toolkit.evaluate.scorer import document_counts, paired_bootstrap, score
from toolkit.rundir import Run, records_for
from toolkit.scoring_defaults import SCORING


@dataclass(frozen=True)
class ParityBudgets:
    """Largest differences from the PyTorch model an artifact may show on the parity sample."""

    max_logit_diff: float = 1e-3  # fp32, largest absolute logit difference
    max_f1_drop: float = 0.01  # span F1, fp32 and int8 (0.01 = one point)
    # Span F1 that windows sized to each document may cost against the same path on the trained windows: a
    # change of context, not of arithmetic, kept to half a point (and within max_f1_drop in all).
    max_window_f1_drop: float = 0.005


def parity_documents(run: Run, data: str | None, max_docs: int) -> tuple[list, str]:
    """The fixed parity sample: the first `max_docs` documents of the run's dev file (or `data`), as the run sees
    them."""
    source = data or (run.recipe.data.dev if run.recipe else None)
    if not source:
        raise ToolkitError(
            f"{run.path}: no dev file recorded for the parity check", fix="pass --data FILE with labeled documents"
        )
    return records_for(run, source, max_docs), str(source)


def span_f1(records, predictions) -> float:
    return score([r.text for r in records], [r.spans for r in records], predictions, bootstrap=0)["summary"]["span_f1"]


def parity_figures(reference: tuple[list, list], candidate: tuple[list, list], records, decisions) -> dict:
    """Largest logit difference, decision agreement and span F1 of a candidate against the reference outputs,
    with the F1 drop's 95% interval (paired bootstrap over the parity documents): how stable the gated figure is.
    `decisions`: the predictor's logits -> decisions."""
    import numpy as np

    (ref_logits, ref_spans), (cand_logits, cand_spans) = reference, candidate
    diff = max((float(np.abs(a - b).max()) for a, b in zip(ref_logits, cand_logits)), default=0.0)
    agree = [float((decisions(a) == decisions(b)).mean()) for a, b in zip(ref_logits, cand_logits)]
    texts, golds = [r.text for r in records], [r.spans for r in records]
    drop = paired_bootstrap(
        document_counts(texts, golds, ref_spans), document_counts(texts, golds, cand_spans), SCORING.boundary_tolerance
    )["span_f1"]
    return {
        "max_logit_diff": diff,
        "argmax_agreement": float(np.mean(agree)) if agree else 1.0,
        "span_f1": span_f1(records, cand_spans),
        "span_f1_drop": {
            "points": round(100 * drop["difference"], 2),
            "ci95_points": [round(100 * x, 2) for x in drop["ci95"]],
        },
    }


def budget_problems(reference_f1: float, figures: dict, budgets: ParityBudgets, exact: bool) -> list[str]:
    """What a path's figures exceed (empty: within budget); `exact` paths are gated on their logits too."""
    problems = []
    if exact and figures["max_logit_diff"] > budgets.max_logit_diff:
        problems.append(f"max logit difference {figures['max_logit_diff']:.2e} > {budgets.max_logit_diff:.0e}")
    if reference_f1 - figures["span_f1"] > budgets.max_f1_drop:
        problems.append(f"span F1 drop {reference_f1 - figures['span_f1']:.4f} > {budgets.max_f1_drop}")
    return problems
