"""The linear segment baseline at inference: segments -> TF-IDF -> one logistic regression per label ->
spans at the saved per-label thresholds (the same decisions as the encoder's segment model).

Written here rather than exported: a bag-of-words model is a yardstick for `toolkit compare` and the
clause benchmarks, not something to serve. It is stored with joblib (a pickle): load only models you
trained yourself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.infer.decisions import SegmentDecisions, SegmentScores
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import META_FILE, Run, open_run
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.segment_decoding import probability_logit
from toolkit.spans.segments import segment_text

LINEAR_FILE = "linear.joblib"
STARTS_FILE = "clause_starts.joblib"  # segments.clause_starts


def segment_inputs(text: str, segments: Sequence[tuple[int, int]]) -> list[str]:
    """Each segment's text with its neighbours' words prefixed (`p_`, `n_`), so the linear model sees a
    little of the context the encoder reads in its window."""
    pieces = [text[a:b] for a, b in segments]
    out = []
    for k, piece in enumerate(pieces):
        before = " ".join(f"p_{w}" for w in pieces[k - 1].split()) if k else ""
        after = " ".join(f"n_{w}" for w in pieces[k + 1].split()) if k + 1 < len(pieces) else ""
        out.append(f"{piece} {before} {after}")
    return out


class LinearModel(SegmentDecisions):
    """TF-IDF + logistic regression per label over segments (scikit-learn); with segments.clause_starts,
    also a classifier per label of whether a clause segment begins a clause (`starts`)."""

    def __init__(self, pipeline, meta: ModelMeta, starts: list | None = None):
        self.pipeline = pipeline
        self.starts = starts
        self.meta = meta
        self.init_decisions(meta)
        self.last_report: dict = {}

    @classmethod
    def load(cls, run: Run | Path, device: str | None = None) -> LinearModel:
        run = run if isinstance(run, Run) else open_run(run)
        return cls.load_files(run.model_dir, LINEAR_FILE, run.meta)

    def warm_up(self) -> None:
        """Nothing is compiled per shape."""

    @classmethod
    def load_files(cls, directory: Path, name: str, meta: ModelMeta) -> LinearModel:
        """The model in `directory`/`name`, with the clause-start classifiers `meta.clause_starts` names."""
        import joblib

        for file in (name, meta.clause_starts):
            if file and not (Path(directory) / file).is_file():
                raise ToolkitError(
                    f"{Path(directory) / file}: missing; {Path(directory) / META_FILE} names it",
                    fix="copy the whole model folder (or export it again with `toolkit export`)",
                )
        starts = joblib.load(Path(directory) / meta.clause_starts) if meta.clause_starts else None
        return cls(joblib.load(Path(directory) / name), meta, starts)

    def save_files(self, directory: Path, name: str) -> str | None:
        """Write the model (and its clause-start classifiers); returns the starts file's name, if any."""
        import joblib

        joblib.dump(self.pipeline, Path(directory) / name)
        if self.starts is None:
            return None
        joblib.dump(self.starts, Path(directory) / STARTS_FILE)
        return STARTS_FILE

    def score(self, texts: Sequence[str], batch_size: int | None = None) -> SegmentScores:
        start = time.perf_counter()
        segments = [segment_text(t) for t in texts]
        scores = self.score_segments(segments, [segment_inputs(t, segs) for t, segs in zip(texts, segments)])
        self.last_report = {
            "seconds": time.perf_counter() - start,
            "windows": sum(len(s) for s in segments),
            "tokens": 0,
        }
        return scores

    def score_segments(self, segments: Sequence[list[tuple[int, int]]], inputs: Sequence[list[str]]) -> SegmentScores:
        """Scores of documents already cut into segments, given each segment's input text (`segment_inputs`)."""
        flat = [x for doc in inputs for x in doc]
        n = len(self.labels)
        if not inputs:
            return SegmentScores([], [], None if self.starts is None else [])
        # The TF-IDF features once, for the label classifiers and the clause-start ones alike.
        features = self.pipeline[:-1].transform(flat) if flat else None
        probs = np.asarray(self.pipeline[-1].predict_proba(features)) if flat else np.zeros((0, n))
        begins = None
        if self.starts is not None:
            begins = np.zeros((len(flat), n))
            for j, model in enumerate(self.starts):
                if isinstance(model, float):  # a constant: the training clauses never or always began here
                    begins[:, j] = model
                elif flat:
                    begins[:, j] = model.predict_proba(features)[:, 1]
        cuts = np.cumsum([len(doc) for doc in inputs])[:-1]
        per_doc = [p.reshape(-1, n) for p in np.split(probs.reshape(-1, n), cuts)]
        starts = None if begins is None else [b.reshape(-1, n) for b in np.split(begins, cuts)]
        return SegmentScores(list(segments), per_doc, starts)

    def logits(self, texts: Sequence[str], segments: Sequence[list[tuple[int, int]]]) -> list[np.ndarray]:
        """Per document, [segments x labels] logits of its probabilities: what an encoder trained with
        segments.linear_prior adds to its own segment logits."""
        inputs = [segment_inputs(t, segs) for t, segs in zip(texts, segments)]
        return [probability_logit(p) for p in self.score_segments(segments, inputs).probabilities]

    def predict(self, texts: Sequence[str], batch_size: int | None = None) -> list[list[PredictedSpan]]:
        return self.spans_at(self.score(texts))
