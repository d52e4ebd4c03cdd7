"""The one scorer for both tracks: gold and predicted character spans in, metrics out.

Pure (no torch, no I/O). Token-based measures (seqeval, +/-k boundaries, length
buckets, Jaccard) use the same word tokenization of the text (`words`), so the
MLM tagger and the CLM generator are scored identically whatever their tokenizers.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.scoring_defaults import SCORING
from toolkit.spans.content import drop_contentless
from toolkit.spans.error_analysis import analyse_errors
from toolkit.spans.overlaps import SpanLike, max_disjoint
from toolkit.spans.words import iter_words

_ALNUM = re.compile(r"\w+")
LENGTH_BUCKETS = [(1, 2), (3, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None)]


def word_set(text: str) -> set[str]:
    """Lower-cased words without punctuation (CUAD's Jaccard normalisation)."""
    return set(_ALNUM.findall(text.lower()))


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)  # |a | b| without building the union


@dataclass
class DocCounts:
    """Per-document counts from which every summary metric (and its bootstrap) is computed."""

    gold: Counter = field(default_factory=Counter)  # per label
    pred: Counter = field(default_factory=Counter)
    exact_tp: Counter = field(default_factory=Counter)
    jaccard_tp: Counter = field(default_factory=Counter)
    start_hit: int = 0
    end_hit: int = 0
    both_hit: int = 0
    within: dict[int, list[int]] = field(default_factory=dict)  # k -> [start, end, both]
    bucket_gold: Counter = field(default_factory=Counter)
    bucket_exact: Counter = field(default_factory=Counter)
    bucket_jaccard: Counter = field(default_factory=Counter)
    unlocated: int = 0


def _bucket(n_words: int) -> str:
    for lo, hi in LENGTH_BUCKETS:
        if hi is None or n_words <= hi:
            return f"{lo}-{hi}" if hi else f"{lo}+"
    raise AssertionError("the last bucket is open-ended")


class _WordIndex:
    """Word indices (`words`) at the character positions asked, from one pass over the text's words: no list of
    a document's words is built, so scoring a long document holds its spans, not its words. Written here because
    a bisect over the whole word list is what this replaces."""

    def __init__(self, text: str, starts: Iterable[int], ends: Iterable[int]):
        starts, ends = sorted(set(starts)), sorted(set(ends))
        self._first: dict[int, int] = {}  # position -> words ending at or before it
        self._before: dict[int, int] = {}  # position -> words starting before it
        i = j = seen = 0
        for a, b in iter_words(text):
            while j < len(ends) and ends[j] <= a:
                self._before[ends[j]] = seen
                j += 1
            while i < len(starts) and starts[i] < b:
                self._first[starts[i]] = seen
                i += 1
            seen += 1
        self._first |= {q: seen for q in starts[i:]}
        self._before |= {q: seen for q in ends[j:]}

    def first(self, start: int) -> int:
        """Index of the first word ending after `start`."""
        return self._first[start]

    def last(self, end: int) -> int:
        """Index of the last word starting before `end`."""
        return self._before[end] - 1

    def length(self, start: int, end: int) -> int:
        return max(1, self.last(end) - self.first(start) + 1)


def _match_jaccard(gold: Sequence[SpanLike], pred: Sequence[SpanLike], text: str, threshold: float) -> set[int]:
    """Indices of gold spans matched one-to-one (greedy, best Jaccard first) by a same-label prediction."""
    pairs = []
    gsets = [word_set(text[g.start : g.end]) for g in gold]
    for j, p in enumerate(pred):
        pset = word_set(text[p.start : p.end])
        for i, g in enumerate(gold):
            if g.label == p.label and p.start < g.end and g.start < p.end:
                score = jaccard(gsets[i], pset)
                if score >= threshold:
                    pairs.append((score, i, j))
    used_g, used_p = set(), set()
    for _, i, j in sorted(pairs, reverse=True):
        if i not in used_g and j not in used_p:
            used_g.add(i)
            used_p.add(j)
    return used_g


def count_document(
    text: str,
    gold: Sequence[SpanLike],
    pred: Sequence[SpanLike],
    tolerances: Sequence[int] = SCORING.boundary_tolerance,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    unlocated: Sequence[str] = (),
) -> DocCounts:
    """`unlocated`: labels of predicted spans with no offsets (generated text not found in the document):
    each counts as a prediction that matches nothing, i.e. a false positive."""
    c = DocCounts(within={k: [0, 0, 0] for k in tolerances})
    c.unlocated = len(unlocated)
    c.pred.update(unlocated)
    gold = list({(s.start, s.end, s.label): s for s in gold}.values())
    pred = list({(s.start, s.end, s.label): s for s in pred}.values())
    c.gold.update(s.label for s in gold)
    c.pred.update(s.label for s in pred)
    pred_keys = {(s.start, s.end, s.label) for s in pred}
    idx = _WordIndex(text, [s.start for s in (*gold, *pred)], [s.end for s in (*gold, *pred)])
    by_label: dict[str, list[SpanLike]] = defaultdict(list)
    for p in pred:
        by_label[p.label].append(p)
    matched = _match_jaccard(gold, pred, text, jaccard_threshold)
    for i, g in enumerate(gold):
        exact = (g.start, g.end, g.label) in pred_keys
        if exact:
            c.exact_tp[g.label] += 1
        if i in matched:
            c.jaccard_tp[g.label] += 1
        cands = by_label.get(g.label, [])
        c.start_hit += any(p.start == g.start for p in cands)
        c.end_hit += any(p.end == g.end for p in cands)
        c.both_hit += exact
        gs, ge = idx.first(g.start), idx.last(g.end)
        for k in tolerances:
            ds = [abs(idx.first(p.start) - gs) <= k for p in cands]
            de = [abs(idx.last(p.end) - ge) <= k for p in cands]
            c.within[k][0] += any(ds)
            c.within[k][1] += any(de)
            c.within[k][2] += any(a and b for a, b in zip(ds, de))
        bucket = _bucket(idx.length(g.start, g.end))
        c.bucket_gold[bucket] += 1
        c.bucket_exact[bucket] += exact
        c.bucket_jaccard[bucket] += i in matched
    return c


def _prf(tp: float, n_pred: float, n_gold: float) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def _summary_vector(docs: Sequence[DocCounts], tolerances: Sequence[int]) -> tuple[list[str], np.ndarray]:
    """Per-document additive counts as a matrix, so bootstrap resampling is a sum over rows."""
    names = ["gold", "pred", "exact_tp", "jaccard_tp", "start", "end", "both", "unlocated"]
    for k in tolerances:
        names += [f"w{k}_start", f"w{k}_end", f"w{k}_both"]
    rows = []
    for d in docs:
        row = [
            sum(d.gold.values()),
            sum(d.pred.values()),
            sum(d.exact_tp.values()),
            sum(d.jaccard_tp.values()),
            d.start_hit,
            d.end_hit,
            d.both_hit,
            d.unlocated,
        ]
        for k in tolerances:
            row += d.within[k]
        rows.append(row)
    return names, np.asarray(rows, dtype=np.float64).reshape(len(docs), len(names))


def _metrics_from_sums(names: list[str], sums: np.ndarray, tolerances: Sequence[int]) -> dict[str, np.ndarray]:
    """Vectorised over the leading axis (one row per bootstrap sample, or a single row)."""
    col = {n: sums[..., i] for i, n in enumerate(names)}
    gold, pred = col["gold"], col["pred"]
    with np.errstate(divide="ignore", invalid="ignore"):

        def ratio(a, b):
            return np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)

        def f1(p, r):
            return np.where(p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1), 0.0)

        out = {}
        p, r = ratio(col["exact_tp"], pred), ratio(col["exact_tp"], gold)
        out.update(span_precision=p, span_recall=r, span_f1=f1(p, r))
        p, r = ratio(col["jaccard_tp"], pred), ratio(col["jaccard_tp"], gold)
        out.update(jaccard_precision=p, jaccard_recall=r, jaccard_f1=f1(p, r))
        out["hallucination_rate"] = ratio(col["unlocated"], pred)
        out["boundary_start_recall"] = ratio(col["start"], gold)
        out["boundary_end_recall"] = ratio(col["end"], gold)
        out["boundary_both_recall"] = ratio(col["both"], gold)
        for k in tolerances:
            for part in ("start", "end", "both"):
                out[f"boundary_{part}_within_{k}_recall"] = ratio(col[f"w{k}_{part}"], gold)
    return out


def point_summary(
    texts: Sequence[str],
    golds: Sequence[Sequence[SpanLike]],
    preds: Sequence[Sequence[SpanLike]],
    tolerances: Sequence[int] = SCORING.boundary_tolerance,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    unlocated=None,
) -> dict[str, float]:
    """The summary's span, Jaccard and boundary figures alone (no seqeval, no error analysis, no intervals):
    what a curve needs at each of its many points. `score` reports the same figures."""
    docs = document_counts(texts, golds, preds, tolerances, jaccard_threshold, unlocated)
    names, matrix = _summary_vector(docs, tolerances)
    totals = matrix.sum(axis=0) if len(docs) else np.zeros(len(names))
    return {k: round(float(v), 4) for k, v in _metrics_from_sums(names, totals, tolerances).items()}


def bootstrap_ci(docs: Sequence[DocCounts], tolerances: Sequence[int], n: int, seed: int = 0) -> dict[str, list[float]]:
    """95% percentile intervals from resampling documents with replacement."""
    if n <= 0 or not docs:
        return {}
    names, matrix = _summary_vector(docs, tolerances)
    rng = np.random.default_rng(seed)
    sample = rng.integers(0, len(docs), size=(n, len(docs)))
    sums = matrix[sample].sum(axis=1)
    metrics = _metrics_from_sums(names, sums, tolerances)
    return {
        k: [round(float(np.percentile(v, 2.5)), 4), round(float(np.percentile(v, 97.5)), 4)] for k, v in metrics.items()
    }


def _seqeval(
    texts: Sequence[str], golds: Sequence[Sequence[SpanLike]], preds: Sequence[Sequence[SpanLike]]
) -> dict[str, float]:
    """seqeval strict IOB2 entity scores on word-level tags (a flat projection: overlapping spans reduced to a largest
    disjoint set). Each document's tags are given for the runs of words some gold or predicted span covers, each run
    a sequence of its own: no entity crosses an O word, so the entities are the whole document's, and a long
    document costs its spans' words, not all of its words."""
    # seqeval's strict mode with a scheme is its v1 scorer; asking it once for all three figures parses the
    # entities of every sequence once, not once per figure (the parse is most of a long document's cost).
    from seqeval.metrics.v1 import precision_recall_fscore_support
    from seqeval.scheme import IOB2

    y_true, y_pred = [], []
    for text, gold, pred in zip(texts, golds, preds):
        true_runs, pred_runs = _tag_runs(text, list(gold), list(pred))
        y_true += true_runs
        y_pred += pred_runs
    if not y_true:  # no span anywhere: no entity to find or to miss (seqeval's own answer, at zero_division=0)
        return {"seqeval_precision": 0.0, "seqeval_recall": 0.0, "seqeval_f1": 0.0}
    precision, recall, f1, _ = precision_recall_fscore_support(
        y_true, y_pred, average="micro", scheme=IOB2, zero_division=0
    )
    return {"seqeval_precision": float(precision), "seqeval_recall": float(recall), "seqeval_f1": float(f1)}


def _tag_runs(text: str, gold: list[SpanLike], pred: list[SpanLike]) -> tuple[list[list[str]], list[list[str]]]:
    """One document's gold and predicted IOB2 tags over each run of words a span covers (the words between are O)."""
    flat = {"gold": [gold[i] for i in max_disjoint(gold)], "pred": [pred[i] for i in max_disjoint(pred)]}
    every = flat["gold"] + flat["pred"]
    idx = _WordIndex(text, [s.start for s in every], [s.end for s in every])
    # The words overlapping a span: words are sorted and disjoint, so they are one range.
    ranges = {k: [(idx.first(s.start), idx.last(s.end) + 1, s.label) for s in v] for k, v in flat.items()}
    covered = sorted({(a, b) for v in ranges.values() for a, b, _ in v if b > a})
    runs: list[list[int]] = []
    for a, b in covered:
        if runs and a <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    out: dict[str, list[list[str]]] = {"gold": [], "pred": []}
    for lo, hi in runs:
        for key, spans in ranges.items():
            tags = ["O"] * (hi - lo)
            for a, b, label in spans:  # in the flat set's order: a later span's tags overwrite an earlier one's
                if lo <= a < b <= hi:
                    for n, i in enumerate(range(a, b)):
                        tags[i - lo] = ("B-" if n == 0 else "I-") + label
            out[key].append(tags)
    return out["gold"], out["pred"]


def document_counts(
    texts,
    golds,
    preds,
    tolerances: Sequence[int] = SCORING.boundary_tolerance,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    unlocated=None,
) -> list[DocCounts]:
    unlocated = unlocated or [()] * len(texts)
    return [
        count_document(t, g, p, tolerances, jaccard_threshold, u) for t, g, p, u in zip(texts, golds, preds, unlocated)
    ]


PARTS = ("start", "end", "both")
PAIRED_METRICS = (
    "span_recall",
    "span_precision",
    "span_f1",
    "jaccard_recall",
    "jaccard_precision",
    "jaccard_f1",
    "boundary_start_recall",
    "boundary_end_recall",
    "boundary_both_recall",
)


def paired_bootstrap(
    a: Sequence[DocCounts], b: Sequence[DocCounts], tolerances: Sequence[int], n: int = SCORING.bootstrap, seed: int = 0
) -> dict[str, dict]:
    """Difference a - b of each metric on the same resampled documents: the observed difference,
    its 95% interval, and a two-sided bootstrap p-value (how often the resampled difference
    falls on the other side of zero, doubled); with n = 0, the observed difference alone."""
    if len(a) != len(b):
        raise ValueError("paired bootstrap needs the same documents for both systems")
    names, ma = _summary_vector(a, tolerances)
    _, mb = _summary_vector(b, tolerances)
    point_a = _metrics_from_sums(names, ma.sum(axis=0), tolerances)
    point_b = _metrics_from_sums(names, mb.sum(axis=0), tolerances)
    # Boundary recall within +/-k words as well: the clause-boundary headline is read at a tolerance.
    keys = [*PAIRED_METRICS, *(f"boundary_{part}_within_{k}_recall" for k in tolerances for part in PARTS)]
    if n <= 0:  # no resamples asked for: the observed differences only
        return {
            key: {"difference": round(float(point_a[key] - point_b[key]), 4), "ci95": None, "p_value": None}
            for key in keys
        }
    rng = np.random.default_rng(seed)
    sample = rng.integers(0, len(a), size=(n, len(a)))
    boot_a = _metrics_from_sums(names, ma[sample].sum(axis=1), tolerances)
    boot_b = _metrics_from_sums(names, mb[sample].sum(axis=1), tolerances)
    out = {}
    for key in keys:
        diff = boot_a[key] - boot_b[key]
        observed = float(point_a[key] - point_b[key])
        p = 2 * min(float(np.mean(diff <= 0)), float(np.mean(diff >= 0)))
        out[key] = {
            "difference": round(observed, 4),
            "ci95": [round(float(np.percentile(diff, 2.5)), 4), round(float(np.percentile(diff, 97.5)), 4)],
            "p_value": round(min(1.0, p), 4),
        }
    return out


def score(
    texts: Sequence[str],
    golds: Sequence[Sequence[SpanLike]],
    preds: Sequence[Sequence[SpanLike]],
    tolerances: Sequence[int] = SCORING.boundary_tolerance,
    jaccard_threshold: float = SCORING.jaccard_threshold,
    bootstrap: int = SCORING.bootstrap,
    seed: int = 0,
    unlocated: Sequence[Sequence[str]] | None = None,
) -> dict:
    """Every metric of the toolkit for one system on one set of documents.

    `unlocated[i]`: labels of document i's predictions that have no offsets (CLM hallucinations)."""
    if not (len(texts) == len(golds) == len(preds)):
        raise ValueError("texts, golds and preds must have one entry per document")
    # Spans without a word are never returned (toolkit.spans.content), so they are not scored either: counted.
    kept = [drop_contentless(t, p) for t, p in zip(texts, preds)]
    preds, contentless = [k for k, _ in kept], sum(n for _, n in kept)
    docs = document_counts(texts, golds, preds, tolerances, jaccard_threshold, unlocated)
    names, matrix = _summary_vector(docs, tolerances)
    totals = matrix.sum(axis=0) if len(docs) else np.zeros(len(names))
    summary = {k: round(float(v), 4) for k, v in _metrics_from_sums(names, totals, tolerances).items()}

    labels = sorted(set().union(*[set(d.gold) | set(d.pred) for d in docs])) if docs else []
    per_label = {}
    for lb in labels:
        g = sum(d.gold[lb] for d in docs)
        pr = sum(d.pred[lb] for d in docs)
        tp = sum(d.exact_tp[lb] for d in docs)
        jtp = sum(d.jaccard_tp[lb] for d in docs)
        p, r, f = _prf(tp, pr, g)
        jp, jr, jf = _prf(jtp, pr, g)
        per_label[lb] = {
            "support": g,
            "predicted": pr,
            "precision": round(p, 4),
            "recall": round(r, 4),
            "f1": round(f, 4),
            "jaccard_recall": round(jr, 4),
            "jaccard_f1": round(jf, 4),
        }
    summary["span_macro_f1"] = round(float(np.mean([v["f1"] for v in per_label.values()])), 4) if per_label else 0.0
    summary.update({k: round(v, 4) for k, v in _seqeval(texts, golds, preds).items()})

    buckets = []
    for lo, hi in LENGTH_BUCKETS:
        name = f"{lo}-{hi}" if hi else f"{lo}+"
        n = sum(d.bucket_gold[name] for d in docs)
        if n:
            buckets.append(
                {
                    "words": name,
                    "gold": n,
                    "recall": round(sum(d.bucket_exact[name] for d in docs) / n, 4),
                    "jaccard_recall": round(sum(d.bucket_jaccard[name] for d in docs) / n, 4),
                }
            )
    return {
        "summary": summary,
        "ci95": bootstrap_ci(docs, tolerances, bootstrap, seed),
        "errors": analyse_errors(texts, golds, preds),
        "per_label": per_label,
        "length_buckets": buckets,
        "counts": {
            "documents": len(docs),
            "gold_spans": int(totals[0]) if len(docs) else 0,
            "predicted_spans": int(totals[1]) if len(docs) else 0,
            "unlocated_predictions": int(totals[7]) if len(docs) else 0,
            "spans_without_content": contentless,
        },
        "settings": {
            "boundary_tolerance_words": list(tolerances),
            "jaccard_threshold": jaccard_threshold,
            "bootstrap": bootstrap,
        },
    }
