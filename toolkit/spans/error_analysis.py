"""Error analysis: why a system's exact span F1 is what it is. Pure (no torch, no I/O).

Every prediction that is not an exact match, and every gold span with no exact match, gets one kind:

- boundary errors (one prediction overlaps one gold span of its label, and that gold span overlaps no
  other prediction): `start late` (leading words missing: often a modifier, "hereditary" in "hereditary
  breast cancer"), `start early`, `end early`, `end late` (the other boundary exact), or `both boundaries`;
  each split by how far the boundary is off, 1 word or 2+ (words as `toolkit.spans.words` counts them);
- `split span`: one gold span overlapped by two or more predictions of its label (its fragments);
- `merged spans`: one prediction overlapping two or more gold spans of its label;
- `wrong label`: same offsets, another label;
- `false positive`: a prediction overlapping no gold span of its label;
- `missed`: a gold span overlapping no prediction of its label.

The most frequent false-positive and missed texts, and the words a boundary error leaves out or adds,
come with the counts, so a user sees what to fix (guidelines, data, decoding) rather than a number.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.spans.overlaps import SpanLike
from toolkit.spans.words import words_around

KINDS = (
    "start late",
    "start early",
    "end early",
    "end late",
    "both boundaries",
    "split span",
    "merged spans",
    "wrong label",
    "false positive",
    "missed",
)


def _overlaps(a: SpanLike, b: SpanLike) -> bool:
    return a.start < b.end and b.start < a.end


class _SpanIndex:
    """The spans of one document by label, sorted by start, so the spans overlapping a span are found by
    bisection instead of a scan of all of them (an early-training tagger can predict thousands a document)."""

    def __init__(self, spans: Sequence[SpanLike]):
        self.by_label: dict[str, tuple[list[SpanLike], list[int], int]] = {}
        for label in {s.label for s in spans}:
            ordered = sorted((s for s in spans if s.label == label), key=lambda s: s.start)
            self.by_label[label] = (ordered, [s.start for s in ordered], max(s.end - s.start for s in ordered))

    def overlapping(self, span: SpanLike) -> list[SpanLike]:
        if span.label not in self.by_label:
            return []
        ordered, starts, longest = self.by_label[span.label]
        # Only spans starting in (span.start - longest, span.end) can reach into `span`.
        lo, hi = bisect_right(starts, span.start - longest), bisect_left(starts, span.end)
        return [s for s in ordered[lo:hi] if _overlaps(s, span)]


def _word_gap(starts: list[int], a: int, b: int) -> tuple[int, list[int]]:
    """How many words start in the characters [a, b), and their indices."""
    lo, hi = bisect_left(starts, a), bisect_left(starts, b)
    return hi - lo, list(range(lo, hi))


@dataclass(frozen=True)
class SpanVerdict:
    """What one span of a document is: `side` "pred" or "gold", `kind` "exact" or one of KINDS (a gold
    span that predictions overlap without an exact match is "overlapped": its predictions carry the
    error), `words_off` for boundary kinds, and the words a boundary error leaves out or adds."""

    side: str
    start: int
    end: int
    label: str
    kind: str
    words_off: int = 0
    gap: tuple[str, tuple[str, ...]] = ("", ())  # ("missing" | "extra", the words themselves)


def classify_document(text: str, gold: Sequence[SpanLike], pred: Sequence[SpanLike]) -> list[SpanVerdict]:
    """A verdict for every predicted and every gold span of one document. `analyse_errors` counts
    these, and `toolkit review` colours spans by them."""
    gold_keys = {(g.start, g.end, g.label) for g in gold}
    pred_keys = {(p.start, p.end, p.label) for p in pred}
    out = [
        SpanVerdict("pred", p.start, p.end, p.label, "exact") for p in pred if (p.start, p.end, p.label) in gold_keys
    ]
    out += [
        SpanVerdict("gold", g.start, g.end, g.label, "exact") for g in gold if (g.start, g.end, g.label) in pred_keys
    ]
    open_pred = [p for p in pred if (p.start, p.end, p.label) not in gold_keys]
    open_gold = [g for g in gold if (g.start, g.end, g.label) not in pred_keys]
    same_offsets = {(g.start, g.end) for g in open_gold} & {(p.start, p.end) for p in open_pred}
    out += [
        SpanVerdict("pred", p.start, p.end, p.label, "wrong label")
        for p in open_pred
        if (p.start, p.end) in same_offsets
    ]
    out += [
        SpanVerdict("gold", g.start, g.end, g.label, "wrong label")
        for g in open_gold
        if (g.start, g.end) in same_offsets
    ]
    open_pred = [p for p in open_pred if (p.start, p.end) not in same_offsets]
    open_gold = [g for g in open_gold if (g.start, g.end) not in same_offsets]
    # Overlaps against every gold/pred span of the label, matched or not: a fragment that overlaps
    # an exactly matched gold span is still an error of that span's neighbourhood.
    gold_index, pred_index = _SpanIndex(gold), _SpanIndex(pred)
    for p in open_pred:
        hits = gold_index.overlapping(p)
        if not hits:
            out.append(SpanVerdict("pred", p.start, p.end, p.label, "false positive"))
        elif len(hits) > 1:
            out.append(SpanVerdict("pred", p.start, p.end, p.label, "merged spans"))
        elif len(pred_index.overlapping(hits[0])) > 1:
            out.append(SpanVerdict("pred", p.start, p.end, p.label, "split span"))  # per fragment
        else:
            spans = words_around(text, min(hits[0].start, p.start), max(hits[0].end, p.end))
            starts, ends = [s for s, _ in spans], [e for _, e in spans]
            kind, n, (side, idx) = _boundary_kind(hits[0], p, starts, ends)
            out.append(
                SpanVerdict(
                    "pred",
                    p.start,
                    p.end,
                    p.label,
                    kind,
                    n,
                    (side, tuple(text[spans[w][0] : spans[w][1]] for w in idx)),
                )
            )
    for g in open_gold:
        out.append(
            SpanVerdict("gold", g.start, g.end, g.label, "overlapped" if pred_index.overlapping(g) else "missed")
        )
    return out


def analyse_errors(
    texts: Sequence[str], golds: Sequence[Sequence[SpanLike]], preds: Sequence[Sequence[SpanLike]], top: int = 15
) -> dict:
    """Counts by kind (with 1-word / 2+-word splits for boundary kinds) and the most frequent texts behind them."""
    counts: Counter = Counter()
    one_word: Counter = Counter()
    fp_texts: Counter = Counter()
    missed_texts: Counter = Counter()
    boundary_words: Counter = Counter()  # "missing: hereditary", "extra: the"
    exact = 0
    for text, gold, pred in zip(texts, golds, preds):
        verdicts = classify_document(text, gold, pred)
        counts["wrong label"] += len({(v.start, v.end) for v in verdicts if v.kind == "wrong label"})  # one per offsets
        for v in verdicts:
            if v.kind == "exact":
                exact += v.side == "gold"
            elif v.kind == "wrong label":
                continue
            elif v.kind == "missed":
                counts[v.kind] += 1
                missed_texts[text[v.start : v.end].lower()] += 1
            elif v.side == "pred":
                counts[v.kind] += 1
                if v.kind == "false positive":
                    fp_texts[text[v.start : v.end].lower()] += 1
                elif v.kind in KINDS[:5]:
                    one_word[v.kind] += v.words_off == 1
                    for w in v.gap[1]:
                        boundary_words[f"{v.gap[0]}: {w.lower()}"] += 1
    return {
        "exact_matches": exact,
        "kinds": {k: {"count": counts[k], **({"one_word": one_word[k]} if k in KINDS[:5] else {})} for k in KINDS},
        "top_false_positives": fp_texts.most_common(top),
        "top_missed": missed_texts.most_common(top),
        "top_boundary_words": boundary_words.most_common(top),
    }


def _boundary_kind(
    g: SpanLike, p: SpanLike, starts: list[int], ends: list[int]
) -> tuple[str, int, tuple[str, list[int]]]:
    """(kind, words off, (missing|extra, word indices)) for a prediction overlapping one gold span."""
    if p.end == g.end:
        if p.start > g.start:
            n, idx = _word_gap(starts, g.start, p.start)
            return "start late", n, ("missing", idx)
        n, idx = _word_gap(starts, p.start, g.start)
        return "start early", n, ("extra", idx)
    if p.start == g.start:
        if p.end < g.end:
            n, idx = _word_gap(starts, p.end, g.end)
            return "end early", n, ("missing", idx)
        n, idx = _word_gap(starts, g.end, p.end)
        return "end late", n, ("extra", idx)
    n_start = abs(bisect_right(starts, p.start) - bisect_right(starts, g.start))
    n_end = abs(bisect_left(ends, p.end) - bisect_left(ends, g.end))
    return "both boundaries", max(n_start, n_end), ("", [])
