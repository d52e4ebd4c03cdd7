"""Inference: a trained run or artifact as a predictor of character spans.

Every task's predictor (its `Task` in `toolkit.registry` names it) is a `Predictor` (`predictor.py`):
`predict(texts) -> spans per document`, with timing in `last_report`. Training-time
scoring, `toolkit eval`, `toolkit compare`, export parity and the service all use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.infer.predictor import Predictor
from toolkit.rundir import Run, open_run


def load_predictor(run: Run | Path | str, **options) -> Predictor:
    """A trained run (or artifact) as the predictor its task registers (Tagger, SegmentClassifier,
    LinearModel, SpanGenerator); `options` go to its `load` (SpanGenerator: precision)."""
    run = run if isinstance(run, Run) else open_run(run)
    predictor = run.spec.predictor_class()
    if predictor is None:
        raise ToolkitError(
            f"{run.path} is a domain-adapted base model ({run.task}): it extracts nothing by itself",
            fix=f"fine-tune it: set model.name: {run.model_dir} in a token_classification or span_generation recipe",
        )
    return predictor.load(run, **options)


def predict_with_report(predictor, texts: Sequence[str]) -> tuple[list, list[list[str]], dict]:
    """Predictions, labels of unlocated (hallucinated) predictions per document, and timing."""
    predictions = predictor.predict(list(texts))
    report = predictor.last_report
    unlocated = [[h["label"] for h in report.get("hallucinated", []) if h["doc"] == i] for i in range(len(texts))]
    return predictions, unlocated, report
