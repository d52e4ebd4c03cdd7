"""Inference: a trained run or artifact as a predictor of character spans.

`Tagger` (token_classification) and `SpanGenerator` (span_generation) share one call,
`predict(texts) -> spans per document`, and report timing in `last_report`. Training-time
scoring, `toolkit eval`, `toolkit compare`, export parity and the service all use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.rundir import Run, open_run

# task -> (module, class) of its predictor; imported on demand (torch is heavy).
PREDICTORS = {
    "token_classification": ("toolkit.infer.tagger", "Tagger"),
    "segment_classification": ("toolkit.infer.segmenter", "SegmentClassifier"),
    # The segment task's bag-of-words baseline (toolkit.json "classifier": "linear").
    "segment_classification/linear": ("toolkit.infer.linear", "LinearSegmentClassifier"),
    "span_generation": ("toolkit.infer.generator", "SpanGenerator"),
}


def load_predictor(run: Run | Path | str):
    """A trained run (or artifact) as its predictor: Tagger, SegmentClassifier, LinearSegmentClassifier or SpanGenerator."""
    import importlib

    run = run if isinstance(run, Run) else open_run(run)
    if run.task not in PREDICTORS:
        raise ToolkitError(
            f"{run.path} is a domain-adapted base model ({run.task}): it extracts nothing by itself",
            fix=f"fine-tune it: set model.name: {run.model_dir} in a token_classification or span_generation recipe",
        )
    kind = f"{run.task}/{run.meta['classifier']}" if run.meta.get("classifier") else run.task
    module, name = PREDICTORS[kind]
    return getattr(importlib.import_module(module), name).load(run)


def predict_with_report(predictor, texts: Sequence[str]) -> tuple[list, list[list[str]], dict]:
    """Predictions, labels of unlocated (hallucinated) predictions per document, and timing."""
    predictions = predictor.predict(list(texts))
    report = predictor.last_report
    unlocated = [[h["label"] for h in report.get("hallucinated", []) if h["doc"] == i] for i in range(len(texts))]
    return predictions, unlocated, report
