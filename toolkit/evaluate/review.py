"""`toolkit review`: predictions as one self-contained HTML page of highlighted documents.

Spans are drawn by spaCy's displaCy in its `span` style, which stacks overlapping spans (CUAD clauses
overlap) under the tokens they cover; spaCy's blank English tokenizer gives the tokens, and a span
covers the tokens its characters touch. With gold, every span is coloured by its verdict from
`toolkit.spans.error_analysis.classify_document` (the verdicts `report.md` counts), and a checkbox
shows only the documents with errors. The page loads nothing from the network.
"""

from __future__ import annotations

import functools
import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.spans.decoding import PredictedSpan
from toolkit.spans.error_analysis import KINDS, classify_document
from toolkit.spans.overlaps import SpanLike

# Verdict -> (tag shown before the label, colour). Exact matches green; what the model added red; what it
# missed orange; wrong boundaries yellow; split, merged and relabelled spans purple.
STYLE = {
    "exact": ("", "#7fd88f"),
    "false positive": ("FP", "#ff8a80"),
    "missed": ("MISSED", "#ffb74d"),
    "overlapped": ("GOLD", "#b0bec5"),
    "split span": ("SPLIT", "#ce93d8"),
    "merged spans": ("MERGED", "#ce93d8"),
    "wrong label": ("LABEL?", "#ce93d8"),
    **{kind: ("BOUNDARY", "#fff176") for kind in KINDS[:5]},
}
PREDICTED = "#90caf9"  # spans without gold to compare with


@functools.cache
def _tokenizer():
    """spaCy's blank English pipeline, built once per process (building it per document cost more than
    tokenizing)."""
    import spacy

    return spacy.blank("en")


def _tokens(text: str):
    return _tokenizer().make_doc(text)


def _rendered(text: str, spans: list[tuple[int, int, str]], colors: dict[str, str]) -> str:
    """displaCy span-style HTML of `text` with (start, end, tag) spans."""
    from spacy import displacy

    doc = _tokens(text)
    manual = []
    for start, end, tag in sorted(spans):
        window = doc.char_span(start, end, alignment_mode="expand")
        if window is None or len(window) == 0:  # offsets inside whitespace only: nothing to underline
            continue
        # displaCy escapes tokens but writes labels into the HTML as they are: escape them, or a label
        # holding markup would inject it into the page.
        manual.append({"start_token": window.start, "end_token": window.end, "label": html.escape(tag)})
    data = {"text": text, "tokens": [t.text for t in doc], "spans": manual}
    return displacy.render(
        data, style="span", manual=True, options={"colors": {html.escape(k): v for k, v in colors.items()}}
    )


def verdict_rows(text: str, gold: Sequence[SpanLike] | None, pred: Sequence[SpanLike]) -> list[dict]:
    """Each span to draw: start, end, label, verdict (None without gold) and its side."""
    if gold is None:
        return [{"start": p.start, "end": p.end, "label": p.label, "kind": None, "side": "pred"} for p in pred]
    rows = []
    for v in classify_document(text, gold, pred):
        if v.side == "gold" and v.kind in ("exact", "wrong label"):
            continue  # drawn once, from the prediction
        rows.append({"start": v.start, "end": v.end, "label": v.label, "kind": v.kind, "side": v.side})
    return rows


def summary_rows(docs: list[dict], with_gold: bool) -> list[list[str]]:
    """Per label: predicted spans, and with gold: gold spans, exact, missed, false positives, boundary
    errors, other errors, and exact P/R/F1."""
    counts: dict[str, Counter] = {}
    for d in docs:
        for r in d["rows"]:
            c = counts.setdefault(r["label"], Counter())
            if r["side"] == "pred":
                c["predicted"] += 1
            c[r["kind"] or "predicted only"] += 1
        for label, n in d["gold_per_label"].items():
            counts.setdefault(label, Counter())["gold"] += n
    out = []
    for label in sorted(counts):
        c = counts[label]
        if not with_gold:
            out.append([label, str(c["predicted"])])
            continue
        boundary = sum(c[k] for k in KINDS[:5])
        other = c["split span"] + c["merged spans"] + c["wrong label"]
        p = c["exact"] / c["predicted"] if c["predicted"] else 0.0
        r = c["exact"] / c["gold"] if c["gold"] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out.append(
            [
                label,
                str(c["gold"]),
                str(c["predicted"]),
                str(c["exact"]),
                str(c["missed"]),
                str(c["false positive"]),
                str(boundary),
                str(other),
            ]
        )
        out[-1] += [f"{p:.3f}", f"{r:.3f}", f"{f:.3f}"]
    return out


def review_html(predictions: list[dict], gold: dict[str, SpanRecord] | None, title: str, note: str = "") -> str:
    """The page: `predictions` are records with id, spans (and text, unless gold gives it)."""
    docs = []
    for rec in predictions:
        g = gold.get(rec["id"]) if gold is not None else None
        if gold is not None and g is None:
            raise ToolkitError(
                f"prediction {rec['id']!r} has no gold document of that id",
                fix="pass the gold file these predictions were made on",
            )
        text = rec.get("text") or (g.text if g else None)
        if text is None:
            raise ToolkitError(
                f"prediction {rec['id']!r} has no text and no gold document",
                fix="pass --gold with the documents (eval's predictions.jsonl holds ids only)",
            )
        if g is not None and rec.get("text") not in (None, g.text):
            raise ToolkitError(
                f"prediction {rec['id']!r}: its text differs from the gold document's",
                fix="review predictions made on these documents",
            )
        pred = [PredictedSpan(s["start"], s["end"], s["label"], s.get("score", 1.0)) for s in rec["spans"]]
        rows = verdict_rows(text, g.spans if g is not None else None, pred)
        errors = sum(1 for r in rows if r["kind"] not in (None, "exact", "overlapped"))
        docs.append(
            {
                "id": rec["id"],
                "text": text,
                "rows": rows,
                "errors": errors,
                "gold_per_label": Counter(s.label for s in g.spans) if g else {},
            }
        )
    colors = {}
    for d in docs:
        for r in d["rows"]:
            tag, color = STYLE[r["kind"]] if r["kind"] else ("", PREDICTED)
            r["tag"] = f"{tag} {r['label']}".strip()
            colors[r["tag"]] = color
    with_gold = gold is not None
    header = (
        [
            "label",
            "gold",
            "predicted",
            "exact",
            "missed",
            "false pos.",
            "boundary",
            "split/merged/label",
            "P",
            "R",
            "F1",
        ]
        if with_gold
        else ["label", "predicted"]
    )
    table = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    table += "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in summary_rows(docs, with_gold)
    )
    legend = (
        "".join(
            f'<span class="key" style="background:{c}">{html.escape(t or "exact")}</span>'
            for t, c in dict(STYLE.values()).items()
        )
        if with_gold
        else ""
    )
    body = []
    for d in docs:
        spans = [(r["start"], r["end"], r["tag"]) for r in d["rows"]]
        data = html.escape(json.dumps([[r["start"], r["end"], r["tag"]] for r in d["rows"]]), quote=True)
        errors_note = f", {d['errors']} errors" if with_gold else ""
        body.append(
            f'<section class="doc" data-errors="{d["errors"]}" data-spans="{data}">'
            f"<h2>{html.escape(d['id'])} <small>{len(d['rows'])} spans{errors_note}</small></h2>"
            f"{_rendered(d['text'], spans, colors)}</section>"
        )
    toggle = (
        '<label><input type="checkbox" id="only-errors"> show only documents with errors</label>' if with_gold else ""
    )
    return PAGE.format(
        title=html.escape(title),
        table=table,
        legend=legend,
        toggle=toggle,
        docs="\n".join(body),
        n=len(docs),
        note=html.escape(note),
    )


def load_predictions(path: Path) -> list[dict]:
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                assert isinstance(rec, dict) and "id" in rec and isinstance(rec.get("spans"), list)
            except (json.JSONDecodeError, AssertionError):
                raise ToolkitError(
                    f"{path}, line {n}: not a prediction record",
                    fix='each line needs {"id": ..., "spans": [...]} (toolkit predict or toolkit eval output)',
                ) from None
            out.append(rec)
    if not out:
        raise ToolkitError(f"{path}: no predictions", fix="pass the output of toolkit predict or toolkit eval")
    return out


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; max-width: 70em; }}
table {{ border-collapse: collapse; margin-bottom: 1em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
td:first-child {{ text-align: left; }}
.key {{ padding: 1px 6px; margin-right: 6px; border-radius: 3px; font-size: 0.85em; }}
section.doc {{ border-top: 1px solid #ddd; padding-top: 0.5em; }} h2 small {{ font-weight: normal; color: #666; }}
body.only-errors section.doc[data-errors="0"] {{ display: none; }}
</style></head>
<body><h1>{title}</h1>
<p>{n} documents. {note} {legend}</p>
<table>{table}</table>
<p>{toggle}</p>
{docs}
<script>
const box = document.getElementById("only-errors");
if (box) box.addEventListener("change", () => document.body.classList.toggle("only-errors", box.checked));
</script>
</body></html>
"""


def write_review(
    predictions_path: Path, out: Path, gold_path: str | None = None, label_map: dict[str, str] | None = None
) -> dict:
    """Write the page. `label_map` renames gold labels first (a run's `data.label_map`); gold spans of
    labels the predictions never use are then left out, and counted on the page."""
    from toolkit.data.records import load_records, map_record_labels

    predictions = load_predictions(predictions_path)
    gold, note = None, ""
    if gold_path:
        labels = {s["label"] for rec in predictions for s in rec["spans"]}
        records = load_records(gold_path)
        if label_map:
            records = [map_record_labels(r, label_map)[0] for r in records]
        other = Counter(s.label for r in records for s in r.spans if s.label not in labels)
        gold = {r.id: r.model_copy(update={"spans": [s for s in r.spans if s.label in labels]}) for r in records}
        if other:
            note = (
                f"Gold spans of {len(other)} labels the predictions never use were left out ({sum(other.values())} "
                f"spans)."
            )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(review_html(predictions, gold, f"Review of {Path(predictions_path).name}", note), encoding="utf-8")
    return {"documents": len(predictions), "out": str(out), "note": note}
