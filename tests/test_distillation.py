"""Distillation (recipe `distill:`): soft targets across tokenizers, the leak check, the teacher's label space, and
a tiny student that learns a tiny teacher's tags from the teacher alone."""

import json

import numpy as np
import pytest
from conftest import OVERFIT_FIVE, REPO, invoke

from toolkit.data.leakage import sentences, shared_sentences
from toolkit.errors import DataError, ToolkitError
from toolkit.registry import TASKS
from toolkit.registry.recipe_loader import load_recipe
from toolkit.spans.label_space import LabelSpace, flat_tags
from toolkit.spans.soft_targets import (
    TeacherWords,
    as_continuation,
    continuation_pairs,
    soft_targets,
    teacher_words,
)
from toolkit.tasks.distillation import teacher_columns

TAGS = flat_tags(["Disease"])  # O, B-Disease, I-Disease


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_teacher_words_keep_each_words_first_token_and_its_whole_range():
    # "heart failure": the teacher splits "failure" into "fail" + "ure" (word 1).
    keys = [(0, 5), (6, 10), (10, 13)]
    scores = np.array([[0, 5, 0], [0, 0, 5], [9, 9, 9]], dtype=np.float32)
    words = teacher_words(keys, [0, 1, 1], scores)
    assert words.starts.tolist() == [0, 6] and words.ends.tolist() == [5, 13]
    assert words.logits.tolist() == [[0, 5, 0], [0, 0, 5]]  # the sub-token's scores are not read


def test_a_student_token_inside_a_teacher_word_is_a_continuation():
    # The teacher read "heart-failure" as one word tagged B-Disease; the student reads "heart", "-", "failure".
    keys, word_ids = [(0, 13)], [0]
    teacher = teacher_words(keys, word_ids, np.array([[0.0, 4.0, 1.0]], dtype=np.float32))
    offsets = [(0, 0), (0, 5), (5, 6), (6, 13), (0, 0)]
    logits, mask, missing = soft_targets(offsets, [None, 0, 1, 2, None], teacher, continuation_pairs(TAGS))
    assert mask.tolist() == [False, True, True, True, False] and missing == 0
    assert logits[1].tolist() == [0.0, 4.0, 1.0]  # starts where the teacher's word starts: as the teacher said
    p_teacher, p_inner = _softmax(np.array([0.0, 4.0, 1.0])), _softmax(logits[3])
    assert p_inner[1] < 1e-6  # no B- inside a word
    assert p_inner[2] == pytest.approx(p_teacher[1] + p_teacher[2], abs=1e-6)  # B- mass moved to I-
    assert p_inner[0] == pytest.approx(p_teacher[0], abs=1e-6)  # O unchanged


def test_a_student_word_no_teacher_word_covers_is_counted_not_guessed():
    teacher = teacher_words([(0, 5)], [0], np.array([[3.0, 0.0, 0.0]], dtype=np.float32))
    _, mask, missing = soft_targets([(0, 5), (6, 9)], [0, 1], teacher, continuation_pairs(TAGS))
    assert mask.tolist() == [True, False] and missing == 1


def test_continuation_keeps_every_labels_share():
    tags = flat_tags(["Chemical", "Disease"])
    logits = np.array([1.0, 2.0, 0.5, 3.0, -1.0], dtype=np.float32)
    p, q = _softmax(logits), _softmax(as_continuation(logits, continuation_pairs(tags)))
    assert q[2] == pytest.approx(p[1] + p[2], abs=1e-6) and q[4] == pytest.approx(p[3] + p[4], abs=1e-6)


def test_the_leak_check_finds_a_dev_sentence_in_any_layout_and_ignores_short_ones():
    dev = [("d1", "Heart failure was the cause of death in most patients.\nResults. Other text follows here.")]
    copied = ("u.jsonl:3", "A longer record.   HEART FAILURE was the cause\nof death in most patients. More.")
    assert [(x.dev_id, x.source) for x in shared_sentences(dev, [("u.jsonl:1", "Results. Nothing else."), copied])] == [
        ("d1", "u.jsonl:3")
    ]
    assert shared_sentences(dev, [("u.jsonl:1", "Results. Nothing else here at all.")]) == []
    assert sentences("Short. " + "x" * 45, 40) == ["x" * 45]


def test_the_teachers_labels_must_be_the_students_and_may_come_in_another_order():
    space = LabelSpace(("Chemical", "Disease"))
    tagger, segments = TASKS["token_classification"], TASKS["segment_classification"]
    columns = teacher_columns("runs/t", tagger, False, ["Disease", "Chemical"], space)
    teacher_tags = flat_tags(["Disease", "Chemical"])
    assert [teacher_tags[c] for c in columns] == space.tags
    with pytest.raises(ToolkitError) as err:
        teacher_columns("runs/t", tagger, False, ["Disease"], space)
    assert "data.labels" in err.value.fix and "Disease" in str(err.value)
    with pytest.raises(ToolkitError, match="flat token_classification"):
        teacher_columns("runs/t", segments, False, ["Disease", "Chemical"], space)


def test_distill_config_errors_name_their_key_and_fix(tmp_path):
    from toolkit.errors import ConfigError

    base = REPO / "recipes" / "demo_mlm.yaml"
    with pytest.raises(ConfigError) as err:
        load_recipe(base, ["distill.teacher=runs/t", "distill.gold_weight=1", "distill.temperature=0"])
    text = err.value.render()
    assert "distill.gold_weight" in text and "distill.temperature" in text
    with pytest.raises(ConfigError, match="model.multi_label=false"):
        load_recipe(base, ["distill.teacher=runs/t"])  # demo_mlm is multi-label


FLAT = [*OVERFIT_FIVE, "model.multi_label=false", "eval.bootstrap=0", "data.labels=[Disease,Chemical]"]


@pytest.fixture(scope="module")
def tiny_teacher(tmp_path_factory):
    """A tiny flat tagger with a cased tokenizer (the student's is uncased: they split words differently),
    trained to F1 1.0 on five sample documents."""
    from tiny import make_tiny_bert

    from toolkit.tasks import run_recipe

    out = tmp_path_factory.mktemp("teacher")
    encoder = make_tiny_bert(out / "cased_bert", cased=True)
    recipe = load_recipe(REPO / "recipes" / "demo_mlm.yaml", [f"model.name={encoder}", f"output_dir={out}", *FLAT])
    result = run_recipe(recipe, out / "teacher")
    assert result.summary["span_f1"] == 1.0
    return out / "teacher"


def _results_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("results", REPO / "scripts" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unlabelled(tmp_path, n=6):
    path = tmp_path / "unlabelled.jsonl"
    path.write_text("".join(json.dumps({"text": f"Unlabelled note {i}: fever and cough."}) + "\n" for i in range(n)))
    return path


# Slow tier (issue 76): distillation end to end (the student trained); its word alignment, leak check and refusals
# stay fast.
@pytest.mark.slow
def test_a_student_learns_the_teachers_tags_from_the_teacher_alone(tiny_teacher, tiny_bert, tmp_path):
    from toolkit.rundir import open_run
    from toolkit.tasks import run_recipe

    unlabelled = _unlabelled(tmp_path)
    overrides = [
        f"model.name={tiny_bert}",
        f"output_dir={tmp_path}",
        *FLAT,
        f"distill.teacher={tiny_teacher}",
        "distill.gold_weight=0",  # no gold term: what the student knows comes from the teacher
        "distill.temperature=1",
        f"distill.unlabelled=[{unlabelled}]",
        "distill.leak_sentence_chars=200",  # the sample's documents share template sentences
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_mlm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / "student")
    assert result.summary["span_f1"] >= 0.9
    d = result.run["distillation"]
    assert (d["labelled_documents"], d["unlabelled_documents"]) == (5, 6)
    assert d["documents_labelled"] == 11 and d["documents_from_cache"] == 0
    assert d["unlabelled_windows"] == 6 and d["tokens_without_teacher_word"] == 0
    assert d["unlabelled_sources"][0]["sha256"] and d["leak_check"]["shared"] == 0
    assert (tmp_path / "student" / "teacher_outputs.npz").is_file()
    run = open_run(tmp_path / "student")
    assert run.meta.distilled_from.teacher == str(tiny_teacher)
    assert run.meta.distilled_from.unlabelled_documents == 6
    card = "\n".join(run.meta.card_lines())  # the model card's lines on how the model decides
    assert "Distilled from the tagger" in card and str(tiny_teacher) in card

    # Its results record says what it learned from (scripts/results.py record).
    record = _results_module().record_from_run(tmp_path / "student", "Set (dev)", "student", "toolkit run")
    assert record.others["unlabelled docs"] == 6 and record.others["teacher labelling s"] >= 0
    assert f"distilled from {tiny_teacher}" in record.generated_note

    # The teacher's outputs are cached with the run: labelling them again reads the cache.
    from toolkit.tasks.distillation import label_documents
    from toolkit.tasks.token_classification import TokenClassification

    prepared = TokenClassification().prepare(recipe)
    _, again = label_documents(
        prepared.distill,
        prepared.distill.labelled + prepared.distill.unlabelled,
        tmp_path / "student" / "teacher_outputs.npz",
        "fp32",
    )
    assert (again["documents_labelled"], again["documents_from_cache"]) == (0, 11)


def test_dev_text_in_the_unlabelled_pool_stops_the_run_naming_both(tiny_teacher, tiny_bert, tmp_path):
    from toolkit.tasks.token_classification import TokenClassification

    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            *FLAT,
            f"distill.teacher={tiny_teacher}",
            "distill.unlabelled=[sample:clinical_train]",  # dev is its first five documents
        ],
    )
    with pytest.raises(DataError) as err:
        TokenClassification().prepare(recipe)
    text = err.value.render()
    assert "clinical_train.jsonl:1" in text and "clinical-train-000" in text and "remove this document" in text


def test_a_student_of_other_labels_is_refused_before_training(tiny_teacher, tiny_bert, tmp_path):
    result = invoke(
        [
            "run",
            REPO / "recipes" / "demo_mlm.yaml",
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            *FLAT[:-1],
            "data.labels=[Disease]",
            f"distill.teacher={tiny_teacher}",
        ]
    )
    assert result.exit_code == 1 and "data.labels" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "demo_mlm").exists()
    missing = invoke(["run", REPO / "recipes" / "demo_mlm.yaml", *FLAT, f"distill.teacher={tmp_path / 'nowhere'}"])
    assert missing.exit_code == 1 and "distill.teacher" in missing.stderr and "no trained model" in missing.stderr


def test_keep_layers_builds_a_shallower_tagger(tiny_bert, tmp_path):
    from transformers import AutoConfig

    from toolkit.tasks import run_recipe

    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [f"model.name={tiny_bert}", f"output_dir={tmp_path}", *FLAT, "model.keep_layers=1", "train.epochs=1"],
    )
    run_recipe(recipe, tmp_path / "small")
    assert AutoConfig.from_pretrained(tmp_path / "small" / "model").num_hidden_layers == 1
    too_deep = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml", [f"model.name={tiny_bert}", f"output_dir={tmp_path}", "model.keep_layers=3"]
    )
    with pytest.raises(ToolkitError, match="has 2 layers"):
        run_recipe(too_deep, tmp_path / "deep")


def test_the_teacher_cache_reads_back_whole_and_holds_one_copy_of_each_array(tmp_path):
    from toolkit.tasks.distillation import _read_cache, _write_cache

    rng = np.random.default_rng(0)
    cache = {
        f"doc{i}": TeacherWords(
            np.arange(n, dtype=np.int64) * 5,
            np.arange(n, dtype=np.int64) * 5 + 4,
            rng.normal(size=(n, 3)).astype(np.float32),
        )
        for i, n in enumerate((4, 0, 7))
    }
    path = tmp_path / "teacher_outputs.npz"
    _write_cache(path, "teacher-a", cache)
    read = _read_cache(path, "teacher-a")
    assert list(read) == list(cache)
    for k, words in cache.items():
        np.testing.assert_array_equal(read[k].starts, words.starts)
        np.testing.assert_array_equal(read[k].ends, words.ends)
        np.testing.assert_array_equal(read[k].logits, words.logits)
    # Every document's logits are a view of one array, not of a fresh copy per document (which held the whole
    # array once per document in memory: 16 GB for 1592 abstracts).
    assert read["doc0"].logits.base is not None and read["doc0"].logits.base is read["doc2"].logits.base
    assert _read_cache(path, "teacher-b") == {}  # another teacher's outputs are not reused
