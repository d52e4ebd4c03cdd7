"""Give a finished `segments.linear_prior` run the clause starts (`segments.clause_starts`) that training
with that option would have saved, without training the encoder again.

The encoder never reads the clause starts: they are fitted on the training documents by the linear
model alone, after the run. So the run's model with them added is the model a run with
`segments.clause_starts=true` would have saved. The script checks that: it refits the linear prior from
the run's own recipe and fails unless its probabilities equal those of the saved `linear.joblib`. Then
`toolkit tune RUN` chooses the thresholds again on dev, with runs split at clause starts.

    .venv/bin/python bench/add_clause_starts.py /tmp/r28/cuad4_prior_neg2_starts
    .venv/bin/toolkit tune /tmp/r28/cuad4_prior_neg2_starts
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from toolkit.data.records import filter_labels, load_splits
from toolkit.infer.linear import LINEAR_FILE, LinearSegmentClassifier
from toolkit.rundir import load_meta, open_run, write_meta
from toolkit.tasks.linear_model import fit_linear_prior


def main(path: str) -> None:
    run = open_run(Path(path))
    recipe = run.recipe
    if not recipe.segments.linear_prior:
        raise SystemExit(f"{path}: not a segments.linear_prior run")
    train, _ = load_splits(recipe)
    train = filter_labels(train, run.labels)
    s = recipe.segments
    fitted = fit_linear_prior(train, run.labels, s.min_overlap, s.folds, recipe.seed, recipe.task, clause_starts=True)
    saved = LinearSegmentClassifier.load_files(
        run.model_dir, LINEAR_FILE, run.meta.model_copy(update={"clause_starts": None})
    )
    texts = [r.text for r in train[:20]]
    a, b = fitted.classifier.score(texts), saved.score(texts)
    same = all(np.array_equal(x, y) for x, y in zip(a.probabilities, b.probabilities))
    if not same:
        raise SystemExit("the refitted linear model differs from the saved one: not the run's model")
    name = fitted.classifier.save_files(run.model_dir, LINEAR_FILE)
    write_meta(run.model_dir, load_meta(run.model_dir).model_copy(update={"clause_starts": name}))
    # The run's saved recipe says what its model now is.
    config = run.path / "config.yaml"
    text = config.read_text()
    text = (
        text.replace("  clause_starts: false\n", "  clause_starts: true\n")
        if "  clause_starts:" in text
        else text.replace("  linear_prior: true\n", "  linear_prior: true\n  clause_starts: true\n")
    )
    config.write_text(text)
    print(f"{path}: clause starts saved ({name}); the refitted linear model equals the saved one on 20 documents")


if __name__ == "__main__":
    main(sys.argv[1])
