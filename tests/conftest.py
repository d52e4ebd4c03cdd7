from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The public data lives in ../shared/data beside the checkout (never committed); TOOLKIT_SHARED_DATA overrides.
SHARED_DATA = Path(os.environ.get("TOOLKIT_SHARED_DATA", REPO.parent / "shared" / "data"))


# demo_mlm overrides with which a tiny tagger learns five clinical sample documents by heart (F1 1.0, seconds).
OVERFIT_FIVE = [
    "data.train=sample:clinical_train",
    "data.dev=sample:clinical_train",
    "data.max_train_docs=5",
    "data.max_dev_docs=5",
    "train.epochs=40",
    "train.learning_rate=3e-3",
    "train.batch_size=5",
    "train.warmup_ratio=0",
    "train.early_stopping_patience=null",
    "model.dropout.embedding=0",
]


@pytest.fixture(autouse=True)
def _torch_threads_as_the_session_began():
    """An export or a service started in-process sets torch's threads to the free cores it measured
    (`hardware.fit_threads`): put them back after each test, so a later test in the same worker trains with the
    threads the session began with (OMP_NUM_THREADS=1 under `make test`), not with what the load allowed then."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        wanted = before or int(os.environ.get("OMP_NUM_THREADS") or 0) or None
        if wanted and torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)


class _ToolkitMain:
    """`toolkit` as its console script runs it (`toolkit.cli.main`: user errors printed, exit 1), in the
    shape click's CliRunner invokes."""

    name = "toolkit"

    def main(self, args=(), prog_name=None, **extra):
        import sys

        from toolkit import cli

        sys.argv = ["toolkit", *args]
        cli.main()


def invoke(args: list, columns: int = 80):
    """The CLI run in this process (no interpreter start-up) as its console script runs it, on a console
    `columns` wide as a terminal of that width shows it; returns click's Result (stdout and stderr apart)."""
    import sys

    from click.testing import CliRunner

    from toolkit.cli import common

    widths, argv = (common.console.width, common.err_console.width), sys.argv
    common.console.width = common.err_console.width = columns
    try:
        return CliRunner().invoke(_ToolkitMain(), [str(a) for a in args])
    finally:
        (common.console.width, common.err_console.width), sys.argv = widths, argv


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "README.md").is_file():
        pytest.skip(f"public data not found at {SHARED_DATA} (set TOOLKIT_SHARED_DATA to its location)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> Path:
    """A BERT-style fast tokenizer (whitespace words, [CLS]/[SEP]), trained once (`tiny.trained_once`)."""
    from tiny import trained_once
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    def train() -> Tokenizer:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        corpus = [
            "aa bb cc dd ee ff",
            "Either party may terminate on thirty days notice.",
            "Aspirin relieved the migraine.",
        ]
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
        return tok

    tok = trained_once("wordpiece_words", train)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    out = tmp_path_factory.mktemp("tiny_tokenizer")
    fast.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    from tiny import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    from tiny import make_tiny_llama

    return make_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def tiny_mlm_run(tiny_bert, tmp_path_factory) -> Path:
    """A tiny multi-label tagger trained to F1 1.0 on five clinical sample documents (a few seconds)."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    out = tmp_path_factory.mktemp("tiny_mlm_run")
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [f"model.name={tiny_bert}", f"output_dir={out}", *OVERFIT_FIVE, "eval.bootstrap=0"],
    )
    run_recipe(recipe, out / "demo_mlm")
    return out / "demo_mlm"


# span_generation overrides with which the tiny decoder learns two clinical sample documents by heart.
CLM = [
    "data.train=sample:clinical_train",
    "data.dev=sample:clinical_train",
    "data.max_train_docs=2",
    "data.max_dev_docs=2",
    "train.epochs=150",
    "train.learning_rate=5e-3",
    "train.batch_size=2",
    "model.lora.enabled=false",
    "train.warmup_ratio=0",
    "train.eval_every=150",
    "eval.bootstrap=10",
    "generation.max_new_tokens=96",
]


@pytest.fixture(scope="session")
def tiny_clm_run(tiny_llama, tmp_path_factory) -> Path:
    """The tiny decoder trained on two clinical sample documents (CLM): trained once, read by the tests of its
    results and of its export."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    out = tmp_path_factory.mktemp("tiny_clm_run")
    recipe = load_recipe(REPO / "recipes" / "demo_clm.yaml", [f"model.name={tiny_llama}", f"output_dir={out}", *CLM])
    run_recipe(recipe, out / "demo_clm")
    return out / "demo_clm"


@pytest.fixture(scope="session")
def tiny_mlm_artifact(tiny_mlm_run, tmp_path_factory) -> Path:
    from toolkit.deploy.export import export_run

    out = tmp_path_factory.mktemp("tiny_mlm_artifact") / "fp32"
    export_run(tiny_mlm_run, out, precision="fp32", parity_docs=5, windows="trained")
    return out


@pytest.fixture(scope="session")
def tiny_segment_run(tiny_bert, tmp_path_factory):
    """A tiny segment model fitted to six contract sample documents (scored on them: a few seconds)."""
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    out = tmp_path_factory.mktemp("segments")
    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={out}",
        "data.max_train_docs=6",
        "data.dev=sample:contracts_train",
        "data.max_dev_docs=6",
        "train.epochs=30",
        "train.learning_rate=3e-3",
        "train.batch_size=6",
        "train.warmup_ratio=0",
        "eval.bootstrap=0",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_segments_mlm.yaml", overrides)
    result = run_recipe(recipe, out / "demo_segments_mlm")
    return result


@pytest.fixture
def browser_page():
    """A page in headless Debian Chromium, driven by playwright, and the list its console errors and
    uncaught exceptions go to. Skipped with a reason where either is missing."""
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra has it)")
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip(
            "Chromium is not installed (make install adds Debian's chromium package where apt-get is available)"
        )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        page = browser.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        yield page, problems
        browser.close()
