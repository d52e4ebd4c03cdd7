"""The docs cannot drift from the code: the config reference is what the recipe models give, the results
page and the README's headline table are what the benchmark records give, the site builds in strict
mode, and its front page and results page render in a real browser."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from toolkit.registry import RECIPE, recipe_key


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


config_reference = _module(REPO / "scripts" / "config_reference.py")
results = _module(REPO / "scripts" / "results.py")


def test_the_config_reference_is_what_the_models_give():
    page = (REPO / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    assert page == config_reference.render(), "run python scripts/config_reference.py"


def test_every_recipe_key_has_a_description():
    assert config_reference.undocumented() == []


def _keys(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict) and key != "label_map":
            out += _keys(value, f"{path}.")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out += _keys(value[0], f"{path}[].")
    return out


@pytest.mark.parametrize("recipe", sorted((REPO / "toolkit" / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_key_of_every_shipped_recipe_is_in_the_reference(recipe):
    data = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    RECIPE.validate_python(data)
    from toolkit.registry import TASKS

    documented = {row[0] for row in config_reference.rows(TASKS[recipe_key(data)].recipe)}
    # sweep.params and label maps are keyed by the user's own names
    keys = [k for k in _keys(data) if not k.startswith("sweep.params.")]
    assert [k for k in keys if k not in documented] == []


def test_a_key_the_reference_shows_is_one_the_recipe_accepts():
    """Rows are read off the models, so a documented key validates and a misspelt one does not."""
    from pydantic import ValidationError

    base = {"task": "segment_classification", "name": "x", "data": {"train": "a", "dev": "b"}}
    keys = {row[0] for row in config_reference.rows(type(RECIPE.validate_python(base)))}
    assert {"segments.combination", "segments.held_out_share", "train.precision", "model.lora.top_layers"} <= keys
    RECIPE.validate_python({**base, "segments": {"combination": "sum"}})
    with pytest.raises(ValidationError):
        RECIPE.validate_python({**base, "segments": {"combinaton": "sum"}})


def test_the_results_page_and_headline_tables_are_what_the_records_give():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "results.py"), "page", "--check"], capture_output=True
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_a_bad_record_is_refused_with_its_file_and_field(tmp_path):
    good = json.loads(next((REPO / "bench" / "results").glob("*.json")).read_text(encoding="utf-8"))
    (tmp_path / "ok.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps({**good, "value": "high"}))
    with pytest.raises(SystemExit) as e:
        results.load_records(tmp_path)
    assert "bad.json" in str(e.value) and "value" in str(e.value)


def test_the_headline_table_shows_only_records_marked_headline():
    records = results.load_records()
    marked = [r for r in records if r.headline and r.paired is None]  # a headline compare record is a sentence
    table = results.render_headline(records)
    assert table.count("\n| ") == 1 + len(marked)  # the header row, then one row per marked record


def test_a_clause_record_carries_and_renders_its_three_models_and_the_encoder_curve(tmp_path):
    figures = {"jaccard_f1": 0.5, "jaccard_f1_ci95": [0.4, 0.6], "jaccard_precision": 0.6, "jaccard_recall": 0.4}
    models = {
        "linear": {**figures, "macro_aupr": 0.66, "macro_aupr_ci95": [0.54, 0.79]},
        "encoder": {**figures, "macro_aupr": 0.52, "macro_aupr_ci95": [0.40, 0.65]},
        "final": {**figures, "macro_aupr": 0.66, "macro_aupr_ci95": [0.54, 0.79]},
    }
    curve = [{"epoch": e, "segment_aupr": a} for e, a in ((1, 0.1), (2, 0.45), (3, 0.5))]
    training = {"ended_by": "epoch cap (train.epochs=3)", "epochs": 3, "seconds": 90.0, "held_out_curve": curve}
    metrics = {
        "summary": {"jaccard_f1": 0.5, "jaccard_precision": 0.6, "jaccard_recall": 0.4},
        "ci95": {"jaccard_f1": [0.4, 0.6]},
        "ranking": {"macro": {"aupr": 0.66}},
        "counts": {"documents": 51},
        "models": models,
        "run": {"train_seconds": 90.0, "eval_seconds": 12.0, "encoder_training": training, "commit": "abc1234"},
    }
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "config.yaml").write_text("task: segment_classification\n")
    r = results.record_from_run(tmp_path, "Set (dev)", "recipe", "toolkit run r.yaml")
    assert r.models == models and r.encoder_training == training
    page = results.render_page([r])
    assert "| recipe | encoder | 0.500 (0.400-0.600) | 0.520 (0.400-0.650) | 3 epochs, 90 s, ended by epoch cap" in page
    assert "held-out segment AUPR per evaluation: 0.100, 0.450, 0.500" in page
    assert "| recipe | linear | 0.500 (0.400-0.600) | 0.660 (0.540-0.790) |  |" in page


def test_a_cross_fitted_clause_record_lists_the_kept_labels_with_p_values_and_each_folds_curve(tmp_path):
    figures = {"jaccard_f1": 0.5, "jaccard_f1_ci95": [0.4, 0.6], "macro_aupr": 0.6, "macro_aupr_ci95": [0.5, 0.7]}
    curve = [{"epoch": e, "segment_aupr": a} for e, a in ((1, 0.2), (2, 0.4), (3, 0.35))]
    fold = {"documents": 10, "best_epoch": 2.0, "ended_by": "plateau", "last_gain": -0.05, "held_out_curve": curve}
    fold |= {"training_seconds": 50.0, "scoring_seconds": 5.0, "clauses": {"A": 3, "B": 4}, "epochs": 3.0}
    crossing = {"folds": 3, "documents": 30, "out_of_fold_clauses": {"A": 9, "B": 12}, "refit_epochs": 2.0}
    crossing |= {"seconds": 165.0, "per_fold": [fold] * 3}
    training = {"ended_by": "refit on every training document for the folds' median best epoch (2)", "epochs": 2.0}
    training |= {"best_epoch": None, "held_out_curve": [], "last_gain": None, "seconds": 60.0, "folds_seconds": 165.0}
    training["folds"] = [{k: fold[k] for k in ("ended_by", "epochs", "best_epoch", "held_out_curve", "last_gain")}] * 3
    combination = {
        "A": {"uses": "encoder+linear", "p_value": 0.01, "threshold": 0.4},
        "B": {"uses": "linear", "p_value": 0.4, "threshold": 0.5},
    }
    metrics = {
        "summary": {"jaccard_f1": 0.5, "jaccard_precision": 0.6, "jaccard_recall": 0.4},
        "ci95": {"jaccard_f1": [0.4, 0.6]},
        "ranking": {"macro": {"aupr": 0.6}},
        "counts": {"documents": 51},
        "models": {"linear": figures, "encoder": figures, "final": figures},
        "run": {"train_seconds": 225.0, "eval_seconds": 12.0, "encoder_training": training, "commit": "abc1234"},
    }
    metrics["run"] |= {"combination": combination, "cross_fitting": crossing}
    budget = {"seconds": 900.0, "plan": {"low": 700.0, "high": 760.0}, "gave_up": ["the epoch cap: 20 -> 5 epochs"]}
    budget |= {"stopped_at_deadline": [49], "reserved_seconds": {"dev_scoring": 400.0}, "spent_before_training": 20.0}
    stages = {"budget_sizing": 20.0, "prepare": 15.0, "train": 300.0, "save_and_evaluate": 500.0}
    pooled = {"kept": True, "p_value": 0.01, "encoder_weight": 0.5, "departures": []}
    metrics["run"] |= {"budget": budget, "stage_seconds": stages, "combination_pooled": pooled}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "config.yaml").write_text("task: segment_classification\n")
    r = results.record_from_run(tmp_path, "Set (dev)", "recipe", "toolkit run r.yaml")
    assert r.encoder_kept == {"A": 0.01} and r.encoder_p_values == {"A": 0.01, "B": 0.4}
    assert r.note is None and r.commit == "abc1234"  # the author's text apart; the commit the run wrote
    assert r.cross_fitting["out_of_fold_clauses"] == {"B": 12, "A": 9} and len(r.cross_fitting["per_fold"]) == 3
    assert "clauses" not in r.cross_fitting["per_fold"][0]  # per fold: its size, plateau and cost
    # the budget, the plan and what it gave up; the seconds by stage; the one decision over every label
    assert r.budget == {k: v for k, v in budget.items() if k != "spent_before_training"}
    assert r.stage_seconds == stages and r.combination_pooled == pooled
    assert r.generated_note == (
        "the fitted combination kept the encoder for 1 of 2 labels (one test over every label: p 0.010; each "
        "label's own test beside it): A (p 0.010)"
    )
    page = results.render_page([r])
    assert "ended by refit on every training document for the folds' median best epoch (2) (folds: " in page
    assert "fold 1: best epoch 2, ended by plateau, AUPR per epoch 0.200, 0.400, 0.350" in page


def _load_row(clients: int, requests: int, errors: int, equal: int, p50: float, threads: int = 0) -> dict:
    return {
        "model_threads": threads,
        "clients": clients,
        "requests": requests,
        "errors": errors,
        "answers_equal_single": equal,
        "docs_per_s": 4.0 * clients**0.5,
        "p50_ms": p50,
        "p95_ms": 2 * p50,
    }


def test_a_serving_record_counts_every_request_that_failed_or_differed(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"path": "onnx_int8"}))
    result = {
        "artifact": str(tmp_path),
        "documents": 100,
        "threads_0_clients_1": _load_row(1, 20, 0, 20, 210.0),
        "threads_0_clients_32": _load_row(32, 640, 2, 637, 900.0),
    }
    r = results.serving_record(result, "BC5CDR (dev)", "mpnet", "serve_bench.py service RUN")
    assert (r.value, r.unit, r.documents) == (210.0, "ms", 100)
    assert r.others == {"p95 ms": 420.0, "docs/s, 1 client": 4.0, "docs/s, 32 clients": 4.0 * 32**0.5}
    assert r.generated_note == "path onnx_int8; 660 requests, 2 errors, 1 answers unlike the single request"
    assert results._figure(r) == "210 ms" and r.command == "serve_bench.py service RUN"
    with pytest.raises(SystemExit, match="1-client load"):
        results.serving_record({**result, "threads_0_clients_1": _load_row(8, 80, 0, 80, 300.0)}, "t", "s", "c")
    with pytest.raises(SystemExit, match="several --model-threads"):
        results.serving_record({**result, "threads_1_clients_1": _load_row(1, 20, 0, 20, 300.0, 1)}, "t", "s", "c")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (the dev extra has it: make install)")
    out = tmp_path_factory.mktemp("site")
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_site_builds_in_strict_mode(site):
    for page in ("index.html", "results/index.html", "reference/config/index.html", "guides/clauses/index.html"):
        assert (site / page).is_file(), page


# Slow tier (issue 76): starts a real browser; the site's strict build and the pages' text stay fast.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "heading"), [("index.html", "clause-entity-toolkit"), ("results/index.html", "Results")]
)
def test_a_site_page_in_a_real_browser(site, page, heading, browser_page, tmp_path):
    """Front page and results page in Debian Chromium: no console errors, the heading and a table drawn,
    nothing fetched from the network, and a screenshot taken."""
    browser, problems = browser_page
    remote = []
    browser.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    browser.goto((site / page).as_uri())
    assert browser.inner_text("h1").removesuffix("¶").strip() == heading  # less the heading's permalink mark
    assert browser.locator("table").count() >= 1 and browser.is_visible("table")
    shot = tmp_path / f"{page.replace('/', '_')}.png"
    browser.screenshot(path=str(shot), full_page=True)
    assert problems == [] and remote == []
    assert shot.stat().st_size > 10_000


# A repository path cited in prose or a comment (`docs/results.md`, `bench/results/<id>.json`, ...).
CITATION = re.compile(
    r"(?<![\w/.:-])((?:docs|bench|scripts|tests|toolkit|recipes|\.ci)/[\w./-]*\.(?:md|jsonl|json|py|yaml|sh|html|txt))"
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def missing_citations(text: str, where: Path) -> list[str]:
    """Links (in Markdown) and path citations in `text` whose file does not exist. Placeholders (<id>, NAME, *) and
    what benchmarks write (bench/out/) are not citations of a file."""
    missing = []
    if where.suffix == ".md":
        for link in MARKDOWN_LINK.findall(text):
            target = link.split("#")[0]
            if target and "://" not in target and not (where.parent / target).exists():
                missing.append(link)
    for cited in CITATION.findall(text):
        cited = cited.rstrip(".")
        placeholder = any(c in cited for c in "*<>{}") or any(part.isupper() for part in re.split(r"[/.]", cited))
        if not placeholder and not cited.startswith("bench/out/") and not (REPO / cited).exists():
            missing.append(cited)
    return missing


def test_no_link_or_citation_points_to_a_missing_file():
    """The changelog is exempt: it says which files went, and when."""
    files = [
        *REPO.glob("*.md"),
        *REPO.glob("docs/**/*.md"),
        *REPO.glob("toolkit/**/*.py"),
        *REPO.glob("toolkit/recipes/*.yaml"),
        *REPO.glob("bench/*.py"),
        *REPO.glob("bench/*.sh"),
        *REPO.glob("bench/*.md"),
        *REPO.glob("scripts/*.py"),
        *REPO.glob("tests/*.py"),
        REPO / "Makefile",
    ]
    found = {
        str(f.relative_to(REPO)): missing
        for f in files
        if f.resolve().name != "CHANGELOG.md" and (missing := missing_citations(f.read_text(encoding="utf-8"), f))
    }
    assert found == {}, f"cite a record (bench/results/<id>.json) or the results page instead: {found}"


def test_a_citation_of_a_gone_page_is_found():
    where, gone = REPO / "docs" / "index.md", "/".join(("docs", "benchmarks.md"))  # so this file cites no gone page
    text = f"Run time: {gone} at 0ea11c2. See [the guide](guides/gone.md) and bench/results/<id>.json."
    assert missing_citations(text, where) == ["guides/gone.md", gone]
    assert missing_citations("Figures: docs/results.md, bench/results/quickstart_demo.json.", where) == []


def test_the_architecture_guide_names_every_package_and_top_level_module():
    guide = (REPO / "docs" / "reference" / "architecture.md").read_text(encoding="utf-8")
    toolkit = REPO / "toolkit"
    packages = [p.parent for p in toolkit.rglob("__init__.py") if p.parent != toolkit]
    missing = [
        f"toolkit/{p.relative_to(toolkit).as_posix()}/"
        for p in packages
        if f"`toolkit/{p.relative_to(toolkit).as_posix()}/`" not in guide
        and f"(`{p.name}/`)" not in guide
        and f"`{p.name}/`" not in guide
    ]
    loose = [p.name for p in toolkit.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    missing += [name for name in loose if f"`{name}`" not in guide]
    assert missing == [], f"docs/reference/architecture.md does not name {missing}"


def missing_modules(guide: str, root: Path) -> list[str]:
    """Modules and paths the architecture guide names that do not exist: a `name.py` in a table row of
    `toolkit/<package>/` must be in that package (or a folder of it), one elsewhere anywhere in the repository; a
    backticked `toolkit/...` path must exist. The section that adds a task names its example's new modules, so it
    is not read."""
    import re

    missing, example = [], False
    for line in guide.splitlines():
        if line.startswith("## "):
            example = line.startswith("## Adding a task")
        if example:
            continue
        row = re.match(r"\| `(toolkit/[\w/]+/)` \|", line)
        where = root / row.group(1) if row else root
        for name in re.findall(r"`([\w/]+\.py)`", line):
            if not any(where.rglob(Path(name).name)):
                missing.append(f"{row.group(1) if row else ''}{name}")
        for path in re.findall(r"`(toolkit/[\w./]+)`", line):
            if not (root / path).exists():
                missing.append(path)
    return missing


def test_every_module_the_architecture_guide_names_exists():
    guide = (REPO / "docs" / "reference" / "architecture.md").read_text(encoding="utf-8")
    assert missing_modules(guide, REPO) == []
    gone = "_".join(("segment", "scoring.py"))  # spelt apart, so this file cites no gone module
    planted = f"| `toolkit/tasks/` | training (`flow.py`, `{gone}`) |\nSee `toolkit/gone/` and `stacking.py`."
    assert missing_modules(planted, REPO) == [f"toolkit/tasks/{gone}", "toolkit/gone/"]


# Slow tier (issue 76): starts a real browser; the results page's text and charts are generated and checked fast.
@pytest.mark.slow
def test_the_results_page_reads_at_1280_px_with_a_chart_per_table(site, browser_page, tmp_path):
    """No table scrolls sideways in a 1280 px window, and each table's generated chart is drawn above it."""
    browser, problems = browser_page
    browser.set_viewport_size({"width": 1280, "height": 900})
    browser.goto((site / "results" / "index.html").as_uri())
    tables = browser.locator("article table")
    # Material wraps each table in a box that scrolls sideways when the table is wider than the text column.
    wide = browser.evaluate(
        "() => [...document.querySelectorAll('article table')].map(t => [t.closest('.md-typeset__scrollwrap') ||"
        " t.parentElement, t]).filter(([box, t]) => box.scrollWidth > box.clientWidth + 1)"
        ".map(([box, t]) => t.querySelector('td').innerText)"
    )
    charts = browser.evaluate(
        "() => [...document.querySelectorAll('article img')].map(i => [i.getAttribute('src'), i.naturalWidth])"
    )
    headings = browser.locator("article h2").count()
    browser.screenshot(path=str(tmp_path / "results_1280.png"), full_page=True)
    assert tables.count() >= headings > 0 and wide == []
    assert len(charts) == headings and all(width > 0 for _, width in charts), charts
    assert problems == []


def _boundary_run(folder: Path, both3: float, points: list[tuple[int, float, float]], **run) -> Path:
    """A finished run's metrics.json and curve.jsonl, as a plateau run of bench/boundary_curves.sh writes them."""
    folder.mkdir(parents=True)
    key = "boundary_both_within_3_recall"
    summary = {key: both3, "boundary_both_recall": 0.2, "boundary_start_recall": 0.6, "boundary_end_recall": 0.5}
    summary |= {"jaccard_recall": 0.55, "jaccard_f1": 0.45}
    metrics = {
        "summary": summary,
        "ci95": {key: [both3 - 0.07, both3 + 0.07], "jaccard_f1": [0.38, 0.52]},
        "counts": {"documents": 51},
        "run": {"train_seconds": 700.0, "train_step_seconds": 600.0, "eval_seconds": 102.0, "epochs_completed": 8.0}
        | run,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    lines = [
        {
            "step": 40 * e,
            "epoch": e,
            "train_seconds": 75.0 * e,
            "documents": 10,
            "metrics": {key: v},
            "ci95": {key: [v - h, v + h]},
        }
        for e, v, h in points
    ]
    (folder / "curve.jsonl").write_text("".join(json.dumps(p) + "\n" for p in lines))
    return folder


def test_curve_and_compare_records_round_trip_and_render_the_table_the_plot_and_the_answer(tmp_path):
    mlm = _boundary_run(
        tmp_path / "runs" / "minilm_tagger",
        0.62,
        [(1, 0.1, 0.05), (2, 0.4, 0.1), (4, 0.55, 0.1), (8, 0.58, 0.1)],
        stopped_at_plateau=True,
    )
    clm = _boundary_run(
        tmp_path / "runs" / "smollm2_segments",
        0.48,
        [(1, 0.05, 0.05), (2, 0.2, 0.1), (4, 0.4, 0.1)],
        stopped_by_time_budget=True,
    )
    pair = {"difference": 0.14, "ci95": [0.05, 0.23], "p_value": 0.004}
    compare = {
        "documents": 51,
        "systems": {
            n: {"timing": {"seconds_per_document": s}} for n, s in (("minilm_tagger", 0.3), ("smollm2_segments", 9.5))
        },
        "paired_bootstrap": {
            "minilm_tagger - smollm2_segments": {
                "boundary_both_within_3_recall": pair,
                **{
                    k: {"difference": 0.1, "ci95": [0.0, 0.2], "p_value": 0.05}
                    for k in ("boundary_both_recall", "jaccard_recall")
                },
            }
        },
    }
    table = "MLM vs CLM on clause boundaries"
    made = [
        *(
            results._measured_here(
                "abc1234", table=table, system=name, command="bash b.sh", run_name=run.name, **results.curve_fields(run)
            )
            for name, run in (("MiniLM tagger", mlm), ("SmolLM2 generating segments", clm))
        ),
        results._measured_here(
            "abc1234",
            table=table,
            system="MiniLM tagger − SmolLM2 segments",
            command="toolkit compare",
            headline=True,
            **results.compare_fields(compare, "minilm_tagger", "smollm2_segments"),
        ),
    ]
    backwards = results.compare_fields(compare, "smollm2_segments", "minilm_tagger")  # the pair read the other way
    assert backwards["value"] == -0.14 and backwards["ci95"] == (-0.23, -0.05) and backwards["others"]["p"] == 0.004
    folder = tmp_path / "records"
    folder.mkdir()
    for i, r in enumerate(made):
        (folder / f"{i}.json").write_text(r.model_dump_json(indent=1))
    loaded = results.load_records(folder)
    assert loaded == made  # every field survives the file

    tagger, generator, difference = loaded
    assert tagger.curve["ended_by"] == "plateau rule" and tagger.curve["plateau_epoch"] == 8
    assert tagger.curve["last_doubling"]["gain"] == pytest.approx(0.03)
    assert generator.curve["ended_by"] == "time budget" and generator.curve["plateau_epoch"] is None
    assert generator.curve["last_doubling"] == {
        "from_epoch": 2,
        "to_epoch": 4,
        "gain": 0.2,
        "half_ci_width": 0.1,
        "seconds": 150.0,
    }
    assert tagger.others_ci95["Jaccard F1"] == (0.38, 0.52) and difference.others["p"] == 0.004

    page = results.render_page(loaded)
    assert "| 1. MiniLM tagger | 0.620 (0.550-0.690) | 0.200 / 0.600 / 0.500 | 0.550 | 0.450 (0.380-0.520) |" in page
    assert "| 0.450 (0.380-0.520) | 10 min; 2.00 s/doc |" in page
    assert (
        "1. MiniLM tagger: 8 epochs, ended by plateau rule; last doubling (epoch 4 to 8) +0.030, half CI 0.100; "
        "plateau: epoch 8, after 10 min of training." in page
    )
    assert "ended by time budget; last doubling (epoch 2 to 4) +0.200, half CI 0.100; plateau: not reached." in page
    assert "| MiniLM tagger − SmolLM2 segments | +0.140 (0.050-0.230) | 0.004 |" in page
    answer = (
        "MiniLM tagger finds more clauses' both ends within ±3 words than SmolLM2 generating segments: 0.620 against "
        "0.480 (0.140 apart, 95% CI +0.050 to +0.230, paired bootstrap p 0.004, 51 dev documents)"
    )
    assert answer in page and answer in results.render_headline(loaded) and answer in results.render_answer(loaded)
    assert "reads here as 0.620 for MiniLM tagger and 0.480 for SmolLM2 generating segments." in page
    assert (
        "SmolLM2 generating segments had not reached its plateau: its time budget ended it while its last doubling "
        "still added +0.200 (half a CI: 0.100)." in page
    )
    # Read the other way round (b wins), the sentence names the same winner with the same interval.
    flipped = difference.model_copy(
        update={
            "value": -0.14,
            "ci95": (-0.23, -0.05),
            "paired": {**difference.paired, "a": "smollm2_segments", "b": "minilm_tagger"},
        }
    )
    assert "0.620 against 0.480 (0.140 apart, 95% CI +0.050 to +0.230" in results.render_page(
        [tagger, generator, flipped]
    )
    svg = results.render_charts(loaded)[results.chart_name(table)]
    assert svg.count("<polyline") == 2 and "MiniLM tagger" in svg and "training seconds (log scale)" in svg


def test_an_entity_table_shows_its_span_f1_pairs_below_its_systems_and_leaves_them_out_of_the_chart(tmp_path):
    table = "NCBI-disease (dev, 100 abstracts)"
    timing = {n: {"timing": {"seconds_per_document": s}} for n, s in (("ncbi_distill", 0.07), ("ncbi_minilm", 0.06))}
    compare = {
        "documents": 100,
        "systems": timing,
        "paired_bootstrap": {
            "ncbi_minilm - ncbi_distill": {
                "span_f1": {"difference": -0.031, "ci95": [-0.052, -0.011], "p_value": 0.002},
                "span_precision": {"difference": -0.04, "ci95": [-0.07, -0.01], "p_value": 0.01},
                "span_recall": {"difference": -0.02, "ci95": [-0.04, 0.0], "p_value": 0.06},
                "boundary_both_within_3_recall": {"difference": 0.0, "ci95": [0.0, 0.0], "p_value": 1.0},
            }
        },
    }
    student = results._measured_here(
        "abc1234", table=table, system="MiniLM student", command="toolkit run r.yaml", metric="span F1", value=0.832
    )
    pair = results._measured_here(
        "abc1234",
        table=table,
        system="MiniLM student − MiniLM alone",
        command="toolkit compare",
        **results.compare_fields(compare, "ncbi_distill", "ncbi_minilm", "span_f1"),
    )
    assert pair.metric == "span F1: difference" and pair.value == 0.031 and pair.ci95 == (0.011, 0.052)
    assert pair.others == {"p": 0.002, "P": 0.04, "R": 0.02}
    folder = tmp_path / "records"
    folder.mkdir()
    for i, r in enumerate((student, pair)):
        (folder / f"{i}.json").write_text(r.model_dump_json(indent=1))
    loaded = results.load_records(folder)
    assert loaded == [student, pair]

    page = results.render_page(loaded)
    assert "| 1. MiniLM student | span F1 0.832 |" in page
    assert "| MiniLM student − MiniLM alone | +0.031 (0.011-0.052) | 0.002 | +0.040 (0.010) / +0.020 (0.060) |" in page
    assert "both ends ±3 words" not in page  # no boundary table for entity pairs
    svg = results.render_charts(loaded)[results.chart_name(table)]
    assert "MiniLM student" in svg and "difference" not in svg
    with pytest.raises(SystemExit, match="--metric 'f1'"):
        results.compare_fields(compare, "ncbi_distill", "ncbi_minilm", "f1")


def test_verify_passes_the_records_and_fails_on_a_sentence_that_disagrees_with_its_figures(tmp_path):
    """CI runs `scripts/results.py verify`: every kept record passes; a planted one whose generated sentence, or
    the inputs it was made from, or its CI, disagree with its own figures fails, as does a commit not in history."""
    from scripts.record_notes import field_problems

    assert results.verify() == []
    source = json.loads((REPO / "bench" / "results" / "confirm_ip_35_cross_fitted.json").read_text())
    assert field_problems(source) == []
    said = {**source, "generated_note": source["generated_note"].replace("(p 0.035)", "(p 0.036)")}
    assert field_problems(said) == [f"generated_note is not what its note_inputs give: {source['generated_note']!r}"]
    inputs = [{**source["note_inputs"][0], "kept": {"Rofr/Rofo/Rofn": 0.036}}]
    made = {**source, "note_inputs": inputs, "generated_note": source["generated_note"].replace("0.035", "0.036")}
    assert field_problems(made) == ["the sentence gives Rofr/Rofo/Rofn p 0.036, encoder_p_values 0.0355"]
    outside = f"value {source['value']} lies outside its ci95 [0.2, 0.3]"
    assert field_problems({**source, "ci95": [0.2, 0.3]}) == [outside]
    restated = {**source, "note": "as the stack said, the fitted combination kept the encoder for 1 of 4 labels"}
    assert field_problems(restated)[0].startswith("note restates the generated combination sentence")
    for name, record in (("said", said), ("unknown_commit", {**source, "commit": "0000000"})):
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
    lines = results.verify(tmp_path)
    assert any(
        line.endswith("said.json: generated_note is not what its note_inputs give: " + repr(source["generated_note"]))
        for line in lines
    )
    assert any(line.endswith("unknown_commit.json: commit 0000000: not a commit of this repository") for line in lines)


def test_an_estimate_record_says_how_far_the_dry_runs_expected_figure_was_from_the_whole_run():
    """`results.py record --estimate PLAN`: the dry run's expected seconds and range beside the run's wall time,
    with a generated sentence that verify checks against those figures."""
    from scripts.record_notes import field_problems

    source = results.Record(**json.loads((REPO / "bench" / "results" / "cuad4_default.json").read_text()))
    seconds = {"low": 1500.0, "expected": 2300.0, "high": 3000.0}
    plan = {"cost_estimate": {"seconds": seconds, "epochs": {"expected": 7}}}
    r = results.with_estimate(source, plan)
    wall = source.others["wall seconds"]
    assert r.others["expected s"] == 2300.0 and r.others["wall seconds"] == wall
    off = 2300.0 / wall - 1
    assert f"the run took {wall:.0f} s, so the expected figure is {abs(off):.0%} " in r.generated_note
    assert r.generated_note.startswith(source.generated_note)  # the run's own sentence kept, this one after it
    record = json.loads(r.model_dump_json())
    assert field_problems(record) == []
    edited = {**record, "others": {**record["others"], "expected s": 2000.0}}
    assert field_problems(edited) == ["the sentence gives expected 2300.0, others['expected s'] 2000.0"]


# Slow tier (issue 76): trains a segment run to write a record again from it; verify's checks of records alone stay
# fast.
@pytest.mark.slow
def test_verify_writes_a_record_again_from_its_run_and_fails_on_an_edited_commit(tiny_segment_run, tmp_path):
    run = tiny_segment_run.run_dir
    commit = json.loads((run / "metrics.json").read_text())["run"]["commit"]
    assert commit, "a run in a git checkout writes the commit it ran at"
    r = results.record_from_run(run, "Set (dev)", "tiny", "toolkit run demo_segments_mlm.yaml")
    assert r.commit == commit and r.source
    assert r.precision == "fp32" and r.others["wall seconds"] > 0  # what the training ran in, and the whole run
    (tmp_path / "tiny.json").write_text(r.model_dump_json(indent=1))
    assert results.verify(tmp_path) == []
    earlier = results._git("rev-parse", "--short=7", "HEAD~1")  # a real commit: only the run tells it apart
    (tmp_path / "tiny.json").write_text(r.model_copy(update={"commit": earlier}).model_dump_json(indent=1))
    assert results.verify(tmp_path) == [f"{tmp_path}/tiny.json: commit is {earlier!r}; {r.source} gives {commit!r}"]
