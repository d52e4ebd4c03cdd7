"""`toolkit review`: one self-contained page of highlighted spans, coloured by verdict against gold."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from toolkit.cli import app

TEXT = "Hereditary breast cancer and <b>ovarian</b> cancer; aspirin helps."
GOLD = [
    {"start": 0, "end": 24, "label": "Disease"},  # hereditary breast cancer: predicted late (start late)
    {"start": 29, "end": 50, "label": "Disease"},  # <b>ovarian</b> cancer: missed
    {"start": 52, "end": 59, "label": "Chemical"},  # aspirin: exact
]
PRED = [
    {"start": 11, "end": 24, "label": "Disease", "score": 0.9},
    {"start": 52, "end": 59, "label": "Chemical", "score": 0.8},
    {"start": 60, "end": 65, "label": "Chemical", "score": 0.6},  # helps: false positive
]


def _files(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        json.dumps({"id": "d1", "text": TEXT, "spans": GOLD})
        + "\n"
        + json.dumps({"id": "d2", "text": "Nothing here.", "spans": []})
        + "\n"
    )
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "d1", "spans": PRED}) + "\n" + json.dumps({"id": "d2", "spans": []}) + "\n")
    return gold, preds


def test_review_page_colours_each_verdict_and_is_self_contained(tmp_path):
    gold, preds = _files(tmp_path)
    out = tmp_path / "review.html"
    result = CliRunner().invoke(app, ["review", str(preds), "--gold", str(gold), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "http" not in page.replace("http-equiv", "")  # nothing loaded from the network
    assert "<b>" not in page and "&lt;/b" in page  # document text is escaped
    # Per-label summary: Disease has 2 gold, 1 predicted, 0 exact, 1 missed, 0 false positives, 1 boundary.
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    cells = {re.findall(r"<td>(.*?)</td>", r)[0]: re.findall(r"<td>(.*?)</td>", r)[1:] for r in rows}
    assert cells["Disease"][:6] == ["2", "1", "0", "1", "0", "1"] and cells["Chemical"][:6] == [
        "1",
        "2",
        "1",
        "0",
        "1",
        "0",
    ]
    for tag in ("BOUNDARY Disease", "MISSED Disease", "FP Chemical", "Chemical"):
        assert re.search(rf">\s*{re.escape(tag)}\s*</span>", page), tag
    # The document without errors is marked so the filter can hide it; the exact offsets travel with each.
    assert 'data-errors="3"' in page and 'data-errors="0"' in page and 'id="only-errors"' in page
    spans = json.loads(re.search(r'data-spans="([^"]*)"', page).group(1).replace("&quot;", '"'))
    assert [60, 65, "FP Chemical"] in spans and [0, 24, "MISSED Disease"] not in spans


def test_review_without_gold_needs_texts(tmp_path):
    gold, preds = _files(tmp_path)
    result = CliRunner().invoke(app, ["review", str(preds), "-o", str(tmp_path / "r.html")])
    assert "has no text" in str(result.exception)
    with_text = tmp_path / "with_text.jsonl"
    with_text.write_text(json.dumps({"id": "d1", "text": TEXT, "spans": PRED}) + "\n")
    result = CliRunner().invoke(app, ["review", str(with_text), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0 and 'id="only-errors"' not in (tmp_path / "r.html").read_text()


# Slow tier (issue 76): starts a real browser; the review page's HTML is checked fast.
@pytest.mark.slow
def test_the_review_page_in_a_real_browser(tmp_path, browser_page):
    """In Debian Chromium: no console errors, the underlined tokens spell the spans' characters, the
    error filter hides the document without errors, and a screenshot is taken."""
    import html as html_lib

    page, problems = browser_page
    gold, preds = _files(tmp_path)
    page_file = tmp_path / "review.html"
    assert CliRunner().invoke(app, ["review", str(preds), "--gold", str(gold), "-o", str(page_file)]).exit_code == 0
    page.goto(page_file.as_uri())
    # displaCy draws each covered token as a bold inline block; in order they spell the covered text.
    underlined = page.eval_on_selector_all(
        'section.doc[data-errors="3"] span[style*="inline-block"]',
        "els => els.map(e => e.firstChild.textContent.trim())",
    )
    assert page.is_visible('section.doc[data-errors="0"]')
    page.check("#only-errors")
    assert not page.is_visible('section.doc[data-errors="0"]') and page.is_visible('section.doc[data-errors="3"]')
    page.screenshot(path=str(tmp_path / "review.png"), full_page=True)
    assert problems == []
    # Every span is drawn (the late-starting prediction over the grey extent of its gold span), so the
    # underlined characters are the union of all spans.
    covered = sorted({i for s in GOLD + PRED for i in range(s["start"], s["end"])})
    assert "".join(html_lib.unescape(t) for t in underlined) == "".join(TEXT[i] for i in covered).replace(" ", "")
    assert (tmp_path / "review.png").stat().st_size > 10_000
