"""Per-label decision thresholds for segment models, and their precision-recall curves over thresholds.
Pure (no torch, no I/O).

A label's threshold is the one of THRESHOLD_GRID that maximises its Jaccard F1 (one-to-one matching at
the run's eval.jaccard_threshold, CUAD's 0.5 by default) on the documents given. Thresholds chosen on a set and scored
on the same
set flatter the model, so `cross_fitted_from_counts` also gives each document thresholds chosen on the
other fold: scoring those predictions is an honest estimate of what the saved thresholds will do on
new documents.

A segment model's spans change with the threshold (consecutive segments merge), so its precision-recall
curve is traced by deciding at every threshold of the grid rather than by ranking one set of spans
(`threshold_counts`, read by `evaluate.ranking.sweep_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.evaluate.scorer import jaccard, word_set
from toolkit.scoring_defaults import SCORING
from toolkit.spans.content import has_content
from toolkit.spans.overlaps import SpanLike
from toolkit.spans.segment_decoding import START_THRESHOLD, segment_runs

# Balanced positive weights push probabilities up, so the grid is fine near 1; plain BCE on rare labels
# keeps them near 0 (an unweighted CUAD model's never reached 0.05), so it is fine near 0 too.
THRESHOLD_GRID = tuple(
    round(float(x), 3)
    for x in [
        0.001,
        0.002,
        0.005,
        0.01,
        0.02,
        0.03,
        *np.arange(0.05, 0.9, 0.05),
        0.9,
        0.925,
        0.95,
        0.96,
        0.97,
        0.98,
        0.99,
        0.995,
        0.999,
    ]
)


def _matches(gsets: list[set[str]], psets: list[set[str]], threshold: float) -> int:
    """One-to-one matches at word Jaccard >= threshold (greedy, best Jaccard first)."""
    pairs = []
    sizes = [len(g) for g in gsets]
    for k, p in enumerate(psets):
        n_p = len(p)
        for i, g in enumerate(gsets):
            small, large = (n_p, sizes[i]) if n_p < sizes[i] else (sizes[i], n_p)
            # Jaccard is at most small/large (and rounding keeps that order): a run as long as the contract
            # against a one-sentence clause is ruled out without intersecting them.
            if large and small / large < threshold:
                continue
            if (j := jaccard(g, p)) >= threshold:
                pairs.append((j, i, k))
    pairs.sort(reverse=True)
    used_g, used_p = set(), set()
    for _, i, k in pairs:
        if i not in used_g and k not in used_p:
            used_g.add(i)
            used_p.add(k)
    return len(used_g)


class RunWords:
    """word_set of the text from segment a's start to segment b's end, for any run (a, b) of one document's
    segments, each computed once. A sweep over 41 labels and the threshold grid asks for thousands of runs,
    many as long as the contract (every segment is above a threshold near 0); re-reading their text was most
    of a CUAD sweep, so a run's set is the union of its segments' and the gaps' sets wherever that is exact."""

    def __init__(self, text: str, segments: Sequence[tuple[int, int]]):
        self.text, self.segments = text, segments
        self.cache: dict[tuple[int, int], set[str]] = {}
        self.pieces: list[set[str]] | None = None  # segment 0, gap 0, segment 1, gap 1, ... (built on first need)
        self.unsafe: np.ndarray | None = None  # unsafe[i]: joins before segment i that a union could get wrong

    def __call__(self, a: int, b: int) -> set[str]:
        key = (a, b)
        if key not in self.cache:
            self.cache[key] = self._union(a, b) if b - a >= 2 and self._exact(a, b) else self._read(a, b)
        return self.cache[key]

    def _read(self, a: int, b: int) -> set[str]:
        return word_set(self.text[self.segments[a][0] : self.segments[b][1]])

    def _clean(self, k: int) -> bool:
        # No word, and no lower-casing context (Greek final sigma), crosses a cut next to whitespace.
        t = self.text
        return k <= 0 or k >= len(t) or t[k - 1].isspace() or t[k].isspace()

    def _build(self) -> None:
        t, segs = self.text, self.segments
        pieces, bad = [], [0]
        for i, (start, end) in enumerate(segs):
            pieces.append(word_set(t[start:end]))
            if i + 1 < len(segs):
                nxt = segs[i + 1][0]
                pieces.append(word_set(t[end:nxt]) if nxt > end else set())
                bad.append(bad[-1] + (nxt < end or not (self._clean(end) and self._clean(nxt))))
        self.pieces, self.unsafe = pieces, np.asarray(bad)

    def _exact(self, a: int, b: int) -> bool:
        if self.unsafe is None:
            self._build()
        return bool(self.unsafe[b] == self.unsafe[a])

    def _union(self, a: int, b: int) -> set[str]:
        assert self.pieces is not None
        return set().union(*self.pieces[2 * a : 2 * b + 1])


def threshold_counts(
    texts: Sequence[str],
    golds: Sequence[Sequence[SpanLike]],
    segments: Sequence[Sequence[tuple[int, int]]],
    probs: Sequence[np.ndarray],
    labels: Sequence[str],
    grid: Sequence[float] = THRESHOLD_GRID,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    starts: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """[labels, thresholds, documents, 3]: (matched, predicted, gold) of each label's spans at each threshold
    (runs split where `starts` says a segment begins a clause, as `merge_segments` does)."""
    out = np.zeros((len(labels), len(grid), len(texts), 3), dtype=np.int64)
    for d, (text, gold, segs, p) in enumerate(zip(texts, golds, segments, probs)):
        run_words = RunWords(text, segs)
        for j, label in enumerate(labels):
            gsets = [word_set(text[g.start : g.end]) for g in gold if g.label == label]
            begins = None if starts is None else starts[d][:, j] >= START_THRESHOLD
            for t_index, t in enumerate(grid):
                runs = segment_runs(p[:, j] >= t, begins) if len(segs) else []
                # A run without a word is never returned or scored (`spans.content`): not a predicted span here either.
                runs = [(a, b) for a, b in runs if has_content(text, segs[a][0], segs[b][1])]
                psets = [run_words(a, b) for a, b in runs]
                out[j, t_index, d] = (
                    _matches(gsets, psets, jaccard_threshold) if runs and gsets else 0,
                    len(runs),
                    len(gsets),
                )
    return out


def _f1(counts: np.ndarray) -> np.ndarray:
    tp, n_pred, n_gold = counts[..., 0], counts[..., 1], counts[..., 2]
    return np.where(n_pred + n_gold > 0, 2 * tp / np.maximum(n_pred + n_gold, 1), 0.0)


def choose_from_counts(
    counts: np.ndarray, default: float = SCORING.decision_threshold, grid: Sequence[float] = THRESHOLD_GRID
) -> list[float]:
    """The best grid threshold per label from `threshold_counts` summed over the documents given;
    ties go to the higher threshold (fewer, surer spans for a reviewer); `default` without gold spans."""
    totals = counts.sum(axis=2)  # [labels, thresholds, 3]
    chosen = []
    for j in range(totals.shape[0]):
        if not totals[j, :, 2].any():
            chosen.append(default)
            continue
        f1 = _f1(totals[j])
        best = max(range(len(grid)), key=lambda i: (f1[i], grid[i]))
        chosen.append(float(grid[best]))
    return chosen


# A label's own F1 curve counts as this many clauses beside the pooled curve of every label: a label with 5
# clauses takes its threshold mostly from the pooled rule, one with 100 mostly from its own.
POOLED_THRESHOLD_CLAUSES = 20


def choose_toward_pool(
    counts: np.ndarray, prior_clauses: float = POOLED_THRESHOLD_CLAUSES, grid: Sequence[float] = THRESHOLD_GRID
) -> list[float]:
    """Per label, the grid threshold that maximises its own Jaccard F1 and the pooled one (every label's counts
    summed) averaged with weights n_l and `prior_clauses` (n_l: the label's gold clauses): a few clauses' curve
    is noise around a threshold the labels share, so it is shrunk toward it. Ties go to the higher threshold."""
    totals = counts.sum(axis=2)  # [labels, thresholds, 3]
    pooled = _f1(totals.sum(axis=0))
    chosen = []
    for j in range(totals.shape[0]):
        clauses = float(totals[j, 0, 2])
        f1 = (clauses * _f1(totals[j]) + prior_clauses * pooled) / (clauses + prior_clauses)
        chosen.append(float(grid[max(range(len(grid)), key=lambda i: (f1[i], grid[i]))]))
    return chosen


def cross_fitted_from_counts(counts: np.ndarray, default: float = SCORING.decision_threshold) -> list[list[float]]:
    """Per document, the thresholds chosen on the other fold (documents split by even and odd position)."""
    n_docs = counts.shape[2]
    folds = [list(range(0, n_docs, 2)), list(range(1, n_docs, 2))]
    per_doc: list[list[float]] = [[] for _ in range(n_docs)]
    for fold, other in ((0, 1), (1, 0)):
        chosen = choose_from_counts(counts[:, :, folds[other]], default)
        for i in folds[fold]:
            per_doc[i] = chosen
    return per_doc
