"""`toolkit review`: one self-contained page of highlighted spans, coloured by verdict against gold."""

from __future__ import annotations

import json
import re

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
    gold.write_text(json.dumps({"id": "d1", "text": TEXT, "spans": GOLD}) + "\n" + json.dumps({"id": "d2", "text": "Nothing here.", "spans": []}) + "\n")
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
    assert cells["Disease"][:6] == ["2", "1", "0", "1", "0", "1"] and cells["Chemical"][:6] == ["1", "2", "1", "0", "1", "0"]
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


def chromium(*args: str, timeout: int = 120) -> tuple[str, list[str]]:
    """Headless Debian Chromium: stdout, and the page's console messages (errors included)."""
    import shutil
    import subprocess

    import pytest

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("Chromium is not installed (make install adds Debian's chromium package where apt-get is available)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    proc = subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=timeout)
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def test_the_review_page_in_a_real_browser(tmp_path):
    gold, preds = _files(tmp_path)
    page = tmp_path / "review.html"
    assert CliRunner().invoke(app, ["review", str(preds), "--gold", str(gold), "-o", str(page)]).exit_code == 0
    # The console check is real: a page that throws is caught.
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>notDefined();</script></body></html>")
    assert any("Uncaught ReferenceError" in m for m in chromium("--dump-dom", broken.as_uri())[1])
    dom, console = chromium("--dump-dom", page.as_uri())
    assert console == [], console
    # The rendered DOM underlines the tokens of each span: in order, they spell the spans' characters.
    doc = dom[dom.index('data-errors="3"') :]
    doc = doc[: doc.index("</section>")]
    underlined = re.findall(r'<span style="font-weight: bold; display: inline-block; position: relative; height: \d+px;">\s*(.*?)\s*<span', doc, re.S)
    import html as html_lib

    # Every span is drawn (the late-starting prediction over the grey extent of its gold span), so the
    # underlined characters are the union of all spans.
    covered = sorted({i for s in GOLD + PRED for i in range(s["start"], s["end"])})
    assert "".join(html_lib.unescape(t) for t in underlined) == "".join(TEXT[i] for i in covered).replace(" ", "")
    shot = tmp_path / "review.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,900", page.as_uri())
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
