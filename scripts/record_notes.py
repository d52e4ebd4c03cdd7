"""What a result record's generator says, and the checks that a record is what its generator wrote.

A record keeps the generator's sentence (`generated_note`) apart from the author's text (`note`), and the inputs
the sentence was made from (`note_inputs`: one entry per sentence, with its template). `verify` (run by
`scripts/results.py verify`, and by CI) fails on:

- a commit that is not in this repository's history (`commit_problems`);
- generated fields that do not follow from the record's own figures: the sentence against its inputs and the
  inputs against the figures they repeat (p-values, kept labels, unlabelled documents), the CI against the value
  (`field_problems`);
- where the outputs a record was made from are on this machine (`source`), any field the generator writes
  otherwise from them (`scripts/results.py`, `regenerated_problems`).

Pure but for `commit_problems` (git).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path


def _combination(i: dict) -> str:
    kept = i["kept"]
    head = f"the fitted combination kept the encoder for {len(kept)} of {i['labels']} labels"
    if i.get("pooled_p") is not None:  # one decision over every label (issue 75); each label's own p beside
        head += f" (one test over every label: p {i['pooled_p']:.3f}; each label's own test beside it)"
    if not kept:
        return head + "; every label is the linear model at its out-of-fold threshold"
    return head + ": " + ", ".join(k if p is None else f"{k} (p {p:.3f})" for k, p in kept.items())


def _distillation(i: dict) -> str:
    return (
        f"distilled from {i['teacher']} ({i['teacher_model']}) at temperature {i['temperature']:g}, gold weight "
        f"{i['gold_weight']:g}, on {i['labelled']} labelled and {i['unlabelled']} unlabelled documents "
        "(no dev sentence among them)"
    )


def _throughput(i: dict) -> str:
    text = f"{i['steps']} steps, {i['real_tokens']} real tokens, {i['padding']:.0%} padding, {i['precision']}"
    epoch = i.get("epoch_padding")
    return text + (f"; {epoch:.1%} padding over an epoch" if epoch is not None else "")


def _estimate(i: dict) -> str:
    off = i["expected"] / i["wall"] - 1
    return (
        f"the dry run expected {i['expected']:.0f} s for this plan ({i['low']:.0f}-{i['high']:.0f} s at the extremes, "
        f"{i['expected_epochs']:g} epochs expected); the run took {i['wall']:.0f} s, so the expected figure is "
        f"{abs(off):.0%} {'above' if off >= 0 else 'below'} it"
    )


# template name -> the sentence from its inputs
TEMPLATES: dict[str, Callable[[dict], str]] = {
    "combination": _combination,
    "distillation": _distillation,
    "serving": lambda i: (
        f"path {i['path']}; {i['requests']} requests, {i['errors']} errors, {i['differ']} answers unlike the "
        "single request"
    ),
    "headline": lambda i: f"path {i['path']}; {i['rounds']} rounds, {i['interleave']}",
    "peak": lambda i: (
        f"path {i['path']}; {i['gflop_per_document']} GFLOP a document; {i['rounds']} rounds, "
        f"peaks {i['peak_per_round']}"
    ),
    "memory": lambda i: f"{i['failed']} failed",
    "window_share": lambda i: (
        f"path {i['path']}; {i['gflop_per_window']} GFLOP a {i['tokens']}-token window; {i['rounds']} rounds, "
        f"peaks {i['peak_per_round']}"
    ),
    "cpu_peak": lambda i: (
        f"{i['threads']} threads, best of sizes {i['sizes']}; instruction-set caps: "
        + (", ".join(f"{k}={v}" for k, v in i["caps"].items()) or "none")
    ),
    "parity": lambda i: (
        f"groups of {i['group_windows']} windows, pieces of {i['chunk_chars']} characters; thresholds "
        f"{i['thresholds']}; whole path {i['seconds_whole']} s"
    ),
    "throughput": _throughput,
    "estimate": _estimate,
}


# The fixed words a template's sentence starts with: an author's note that holds them restates a generated sentence
# (and may give other figures than the generator did).
HEADS = {"combination": "the fitted combination kept the encoder for", "distillation": "distilled from "}


def generated(*entries: dict | None) -> dict:
    """A record's generated fields from its sentences' inputs (each {"template": name, ...inputs}; None skipped)."""
    kept = [e for e in entries if e]
    if not kept:
        return {"generated_note": None, "note_inputs": None}
    return {"generated_note": render(kept), "note_inputs": kept}


def render(entries: list[dict]) -> str:
    return "; ".join(TEMPLATES[e["template"]]({k: v for k, v in e.items() if k != "template"}) for e in entries)


def field_problems(r: dict) -> list[str]:
    """The generated fields of one record (a record's JSON) that do not follow from its own figures."""
    problems = []
    entries = r.get("note_inputs")
    if r.get("generated_note") and not entries:
        problems.append("generated_note without the note_inputs it was made from")
    if entries:
        try:
            again = render(entries)
        except (KeyError, TypeError, ValueError) as e:
            again, problems = None, [*problems, f"note_inputs cannot be rendered ({e!r})"]
        if again is not None and again != r.get("generated_note"):
            problems.append(f"generated_note is not what its note_inputs give: {again!r}")
        for e in entries:
            problems += _against_figures(e, r)
            head = HEADS.get(e["template"])
            if head and head in (r.get("note") or ""):
                problems.append(f"note restates the generated {e['template']} sentence: say it once, in generated_note")
    lo_hi = r.get("ci95")
    if lo_hi and not lo_hi[0] - 1e-4 <= r["value"] <= lo_hi[1] + 1e-4:
        problems.append(f"value {r['value']} lies outside its ci95 {lo_hi}")
    for key, (lo, hi) in (r.get("others_ci95") or {}).items():
        value = (r.get("others") or {}).get(key)
        if value is not None and not lo - 1e-4 <= value <= hi + 1e-4:
            problems.append(f"others[{key!r}] {value} lies outside its others_ci95 {[lo, hi]}")
    return problems


def _against_figures(e: dict, r: dict) -> list[str]:
    """An entry's inputs that repeat one of the record's figures, where they disagree."""
    problems = []
    if e["template"] == "combination":
        kept, p_values = r.get("encoder_kept"), r.get("encoder_p_values") or {}
        if kept is not None and set(kept) != set(e["kept"]):
            problems.append(f"the sentence keeps {sorted(e['kept'])}, encoder_kept {sorted(kept)}")
        for label, p in e["kept"].items():
            if p is not None and label in p_values and p != p_values[label]:
                problems.append(f"the sentence gives {label} p {p}, encoder_p_values {p_values[label]}")
    if e["template"] == "distillation":
        unlabelled = (r.get("others") or {}).get("unlabelled docs")
        if unlabelled is not None and unlabelled != e["unlabelled"]:
            problems.append(f"the sentence gives {e['unlabelled']} unlabelled documents, others {unlabelled}")
    if e["template"] == "estimate":
        others = r.get("others") or {}
        for key, figure in (("wall", "wall seconds"), ("expected", "expected s")):
            if others.get(figure) is not None and others[figure] != e[key]:
                problems.append(f"the sentence gives {key} {e[key]}, others[{figure!r}] {others[figure]}")
    return problems


def commit_problems(commits: set[str], root: Path) -> dict[str, str]:
    """commit -> why it is not one of this repository's commits on the way to HEAD ({} when all are); {} in a
    shallow clone, whose history does not reach them (said on stderr by the caller)."""
    problems = {}
    for commit in sorted(commits):
        known = subprocess.run(
            ["git", "-C", str(root), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
        ).returncode
        if known:
            problems[commit] = "not a commit of this repository"
            continue
        ancestor = subprocess.run(
            ["git", "-C", str(root), "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True
        ).returncode
        if ancestor:
            problems[commit] = "not in the history of HEAD"
    return problems


def shallow(root: Path) -> bool:
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
    )
    return done.stdout.strip() == "true"
