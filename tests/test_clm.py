"""The CLM track on tiny models: prompt format, offset recovery, constrained decoding, training, compare."""

import json
from pathlib import Path

import pytest
from conftest import CLM, OVERFIT_FIVE, REPO

from toolkit.data.sample import SAMPLE_DIR
from toolkit.data.schema import Span, SpanRecord
from toolkit.evaluate.compare import System, summarize, table_rows
from toolkit.evaluate.scorer import score
from toolkit.infer.completions import CompletionSpec
from toolkit.infer.constrained import LineGrammar
from toolkit.infer.prompts import GeneratedLine as G
from toolkit.infer.prompts import build_prompt, build_target, parse_output
from toolkit.infer.recovery import recover_offsets
from toolkit.models.pretrained import load_tokenizer
from toolkit.registry.recipe_loader import load_recipe
from toolkit.registry.span_generation import GenerationConfig
from toolkit.rundir import model_meta, open_run
from toolkit.spans.decoding import PredictedSpan
from toolkit.tasks import plan_recipe, run_recipe
from toolkit.tasks.features import generation_examples, generation_windows

TEXT = CompletionSpec("text")

WINDOW = "Aspirin helps. We stopped aspirin and  started warfarin;\naspirin again."


def test_target_and_parse_round_trip():
    spans = [Span(start=15 + 11, end=15 + 18, label="Chemical"), Span(start=0, end=7, label="Chemical")]
    target = build_target(WINDOW, spans)
    assert target == "Chemical: Aspirin\nChemical: aspirin\n"
    assert build_target(WINDOW, []) == "none\n"
    parsed = parse_output(target + "Dosage: 5 mg\nno colon here\nnone\n", ["Chemical", "Disease"])
    assert parsed.spans == [G("Chemical", "Aspirin"), G("Chemical", "aspirin")]
    assert parsed.unknown_labels == ["Dosage: 5 mg"] and parsed.malformed == ["no colon here"]
    assert "Chemical, Disease" in build_prompt(WINDOW, ["Chemical", "Disease"])


def test_recovery_repeats_whitespace_near_misses_and_inventions():
    gen = [
        G("C", "aspirin"),
        G("C", "aspirin"),
        G("C", "stopped aspirin and started"),
        G("C", "warfarin; aspirin"),
        G("C", "warfarine"),
        G("C", "ibuprofen"),
        G("C", "Aspirin"),
    ]
    r = recover_offsets(WINDOW, gen, min_similarity=85)
    got = [(WINDOW[s.start : s.end], s.method) for s in r.spans]
    assert got[0] == ("aspirin", "exact") and r.spans[0].start == 26  # first occurrence after the cursor
    assert got[1] == ("aspirin", "exact") and r.spans[1].start == WINDOW.rindex(
        "aspirin"
    )  # the repeat takes the next one
    assert got[2] == ("stopped aspirin and  started", "whitespace")  # whitespace drift
    assert got[3] == ("warfarin;\naspirin", "whitespace")  # newline in the source
    assert got[4][1] == "fuzzy" and got[4][0] == "warfarin"  # near miss
    assert got[5] == ("Aspirin", "exact") and r.spans[5].start == 0
    assert r.hallucinated == [G("C", "ibuprofen")]  # invented: a false positive


def test_grammar_only_accepts_substrings_of_the_window():
    g = LineGrammar(WINDOW, ["Chemical", "Disease"])
    assert g.valid_prefix("Chemical: warfarin; aspirin")  # the window's newline written as a space
    assert g.valid_prefix("Chem") and g.valid_prefix("none\nDisease: ")
    assert not g.valid_prefix("Chemical: ibu") and not g.valid_prefix("Drug: ") and not g.valid_prefix("Chemical: \n")


def test_constrained_decoding_never_emits_text_absent_from_the_window(tiny_llama, tmp_path):
    """An untrained model generates junk; under the copy constraint every span is still in its window."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toolkit.infer.generator import SpanGenerator

    tok = load_tokenizer(str(tiny_llama))
    torch.manual_seed(0)  # an initialisation that emits spans rather than only "none"
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny_llama))
    generation = GenerationConfig(max_new_tokens=40, batch_size=4, min_similarity=100)
    meta = model_meta(
        task="span_generation", labels=["Chemical", "Disease"], max_length=64, stride=16, generation=generation
    )
    texts = [json.loads(line)["text"] for line in (SAMPLE_DIR / "clinical_dev.jsonl").open()][:3]
    gen = SpanGenerator(model, tok, meta)
    gen.predict(texts, constrained=True)
    report = gen.last_report
    assert report["hallucinated_spans"] == 0 and report["unknown_label_lines"] == 0 and report["malformed_lines"] == 0
    assert set(report["recovered_by"]) <= {"exact", "whitespace"} and sum(report["recovered_by"].values()) > 0


def test_copy_processor_masks_tokens_that_leave_the_window(tiny_llama):
    import torch

    from toolkit.infer.constrained import make_copy_processor

    tok = load_tokenizer(str(tiny_llama))
    prompt = tok("Spans:\n", add_special_tokens=False, return_tensors="pt")["input_ids"]
    done = tok("Chemical: war", add_special_tokens=False, return_tensors="pt")["input_ids"]
    ids = torch.cat([prompt, done], dim=1)
    processor = make_copy_processor(tok, [LineGrammar("We stopped warfarin.", ["Chemical"])], prompt.shape[1])
    scores = torch.zeros((1, len(tok)))
    out = processor(ids, scores)
    allowed = [i for i in range(len(tok)) if out[0, i] > float("-inf")]
    texts = [tok.decode([i]) for i in allowed]
    assert allowed and all(
        ("Chemical: war" + t).split("\n")[0][len("Chemical: ") :] in "We stopped warfarin." for t in texts
    )
    assert tok.eos_token_id not in allowed  # no end in the middle of a line


def test_loss_covers_only_the_completion(tiny_llama):
    tok = load_tokenizer(str(tiny_llama))
    rec = SpanRecord(id="a", text="We stopped warfarin.", spans=[Span(start=11, end=19, label="Chemical")])
    windows, report = generation_windows(tok, [rec], TEXT, 64, 16)
    (ex,), _ = generation_examples(tok, [rec], ["Chemical"], TEXT, windows, [0], chat_template=False)
    prompt_len = sum(1 for x in ex["labels"] if x == -100)
    assert ex["labels"][:prompt_len] == [-100] * prompt_len and -100 not in ex["labels"][prompt_len:]
    assert tok.decode(ex["input_ids"][:prompt_len]) == build_prompt(rec.text, ["Chemical"])
    assert tok.decode(ex["labels"][prompt_len:]) == "Chemical: warfarin\n<|im_end|>"
    assert report.spans_not_representable == 0


def test_spans_longer_than_a_window_are_reported(tiny_llama):
    tok = load_tokenizer(str(tiny_llama))
    text = " ".join(["the patient was given metformin"] * 20)
    rec = SpanRecord(id="a", text=text, spans=[Span(start=0, end=len(text), label="Chemical")])
    _, report = generation_windows(tok, [rec], TEXT, 32, 8)
    assert report.windows > 1 and report.spans_not_representable == 1


def test_tiny_decoder_overfits_two_documents(tiny_clm_run):
    metrics = json.loads((tiny_clm_run / "metrics.json").read_text())
    assert metrics["summary"]["span_f1"] == 1.0 and metrics["run"]["hallucinated_spans"] == 0
    assert (tiny_clm_run / "model" / "toolkit.json").is_file()
    assert (tiny_clm_run / "hallucinations.jsonl").is_file()


def test_clm_artifact_generates_through_onnx_runtime(tiny_clm_run, tmp_path):
    """The trained decoder exported (beside its training tests, so the run is trained once per worker)."""
    from toolkit.deploy.export import ParityBudgets, export_run
    from toolkit.infer import load_predictor

    manifest = export_run(tiny_clm_run, tmp_path / "clm_art", precision="fp32", parity_docs=2)
    assert manifest["task"] == "span_generation"
    assert manifest["parity"]["onnx_fp32"]["max_logit_diff"] < 1e-3
    f1 = manifest["parity"]["pytorch_span_f1"]
    assert manifest["parity"]["onnx_fp32"]["span_f1"] == f1 and f1 >= 0.9
    generator = load_predictor(tmp_path / "clm_art")
    from toolkit.data.records import load_records

    texts = [r.text for r in load_records("sample:clinical_train", 2)]
    # Constrained copy decoding runs on the ONNX decoder too: nothing unlocatable is generated.
    spans = generator.predict(texts, constrained=True)
    assert generator.last_report["hallucinated_spans"] == 0 and any(spans)
    # int8 decoders export too (budget relaxed: a tiny overfit model is not a quality test).
    int8 = export_run(
        tiny_clm_run,
        tmp_path / "clm_int8",
        precision="int8",
        parity_docs=2,
        budgets=ParityBudgets(max_f1_drop=1.0),
    )
    assert int8["precision"] == "int8" and "blocks" in int8["parity"]["onnx_int8"]["scheme"]
    assert int8["files"]["model.onnx"]["bytes"] < manifest["files"]["model.onnx"]["bytes"]
    # int8 activations are scaled per row: a document's generated spans are the same alone and batched.
    quantized = load_predictor(tmp_path / "clm_int8")
    alone = quantized.predict(texts[:1], batch_size=8)
    assert quantized.predict([texts[1], texts[0]], batch_size=8)[1] == alone[0]


def test_lora_clm_trains_adapters_only(tiny_llama, tmp_path):
    recipe = load_recipe(
        REPO / "recipes" / "demo_clm.yaml",
        [f"model.name={tiny_llama}", f"output_dir={tmp_path}", *CLM, "model.lora.enabled=true"],
    )
    plan = plan_recipe(recipe)
    assert plan["trainable_parameters"] < plan["parameters"] / 5


def test_lora_top_layers_adapts_only_the_last_layers(tiny_llama, tmp_path):
    from toolkit.models.building import build_causal_model

    def adapted_layers(top_layers: str) -> set[str]:
        overrides = [
            f"model.name={tiny_llama}",
            f"output_dir={tmp_path}",
            *CLM,
            "model.lora.enabled=true",
            f"model.lora.top_layers={top_layers}",
        ]
        model, _ = build_causal_model(load_recipe(REPO / "recipes" / "demo_clm.yaml", overrides).model)
        return {
            name.split(".layers.")[1].split(".")[0]
            for name, p in model.named_parameters()
            if "lora_" in name and p.requires_grad
        }

    # The tiny decoder has two layers: top_layers=1 adapts layer 1 only; null, or more than it has, every layer.
    assert adapted_layers("1") == {"1"}
    assert adapted_layers("null") == adapted_layers("5") == {"0", "1"}


def test_decoder_as_tagger_runs_through_the_mlm_code(tiny_llama, tmp_path):
    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_llama}",
            f"output_dir={tmp_path}",
            *OVERFIT_FIVE,
            "model.multi_label=false",
            "eval.bootstrap=10",
        ],
    )
    result = run_recipe(recipe, tmp_path / "demo_mlm")
    assert result.summary["span_f1"] == 1.0
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tmp_path / "demo_mlm" / "model").architectures == ["LlamaForTokenClassification"]


def test_compare_table_equals_the_scorer_on_fixed_predictions():
    text = "Either party may terminate on thirty days notice. This Agreement is governed by Ohio law."
    gold = [[Span(start=0, end=49, label="Termination"), Span(start=50, end=len(text), label="Governing Law")]]
    a = [[PredictedSpan(0, 49, "Termination", 0.9), PredictedSpan(55, len(text), "Governing Law", 0.6)]]
    b = [[PredictedSpan(0, 49, "Termination", 1.0)]]
    systems = [
        System("mlm", Path("runs/mlm"), "token_classification", a, [[]], 1.0, 100.0, "input tokens/s"),
        System("clm", Path("runs/clm"), "span_generation", b, [["Governing Law"]], 4.0, 10.0, "generated tokens/s"),
    ]
    summary = summarize(systems, [text], gold, [1, 3], bootstrap=50)
    header, rows = table_rows(summary, [1, 3])
    for row, preds, unl in zip(rows, (a, b), ([[]], [["Governing Law"]])):
        expected = score([text], gold, preds, [1, 3], 0.5, 50, 0, unl)
        for col in (
            "span_recall",
            "boundary_start_recall",
            "boundary_both_recall",
            "span_precision",
            "hallucination_rate",
        ):
            assert row[header.index(col)].startswith(f"{expected['summary'][col]:.4f}")
    assert summary["systems"]["clm"]["summary"]["hallucination_rate"] == 0.5
    # The terminal table fits 80 columns with full names and nothing cut (it was `syst…`, `0.99…`).
    from rich.console import Console

    from toolkit.evaluate.compare import terminal_table

    summary["systems"] = {
        "cuad_clauses_segments_mlm": summary["systems"]["mlm"],
        "cuad_clauses_clm_text": summary["systems"]["clm"],
    }
    console = Console(width=80, record=True, force_terminal=False)
    console.print(terminal_table(summary, [1, 3]))
    shown = console.export_text()
    assert "…" not in shown and max(len(line) for line in shown.splitlines()) <= 80
    # Every row keeps its right border: nothing was cropped at the terminal's edge.
    assert all(line.rstrip()[-1] in "┓┃┩│┤┘" for line in shown.splitlines()[1:] if line.strip())
    for name in ("cuad_clauses_segments_mlm", "cuad_clauses_clm_text", "hallucination rate", "task"):
        assert name in shown
    expected = score([text], gold, b, [1, 3], 0.5, 50, 0, [["Governing Law"]])["summary"]["hallucination_rate"]
    assert f"{expected:.3f}" in next(line for line in shown.splitlines() if "hallucination" in line)
    diff = summary["paired_bootstrap"]["mlm - clm"]["boundary_end_recall"]["difference"]
    assert diff == pytest.approx(1.0 - 0.5)


def flat_clinical_recipe(model, out, *overrides):
    """demo_mlm as a flat tagger of the clinical sample (five training documents, the whole dev split)."""
    base = [
        f"model.name={model}",
        f"output_dir={out}",
        "data.train=sample:clinical_train",
        "data.dev=sample:clinical_dev",
        "data.max_train_docs=5",
        "data.max_dev_docs=null",
        "eval.bootstrap=10",
        "model.multi_label=false",
    ]
    return load_recipe(REPO / "recipes" / "demo_mlm.yaml", [*base, *overrides])


def test_compare_reuses_saved_predictions(tiny_bert, tmp_path):
    from toolkit.evaluate.compare import compare

    recipe = flat_clinical_recipe(tiny_bert, tmp_path, "train.epochs=2")
    result = run_recipe(recipe, tmp_path / "demo_mlm")
    fresh = compare([str(tmp_path / "demo_mlm")], "sample:clinical_dev", tmp_path / "c1", bootstrap=10)
    reused = compare([str(tmp_path / "demo_mlm")], "sample:clinical_dev", tmp_path / "c2", bootstrap=10, reuse=True)
    assert fresh["systems"]["demo_mlm"]["summary"] == reused["systems"]["demo_mlm"]["summary"]
    assert reused["systems"]["demo_mlm"]["summary"]["span_f1"] == result.summary["span_f1"]


def test_eval_and_compare_apply_the_runs_label_map(tiny_bert, tmp_path):
    from toolkit.evaluate.compare import compare
    from toolkit.evaluate.evaluation import evaluate_run

    recipe = flat_clinical_recipe(
        tiny_bert, tmp_path, "train.epochs=1", "data.label_map={Chemical: Entity, Disease: Entity}"
    )
    run_recipe(recipe, tmp_path / "demo_mlm")
    metrics, _ = evaluate_run(tmp_path / "demo_mlm", "sample:clinical_dev", tmp_path / "e", bootstrap=0)
    assert metrics["counts"]["gold_spans"] > 0  # raw Chemical/Disease spans are mapped to the run's Entity label
    summary = compare([str(tmp_path / "demo_mlm")], "sample:clinical_dev", tmp_path / "c", bootstrap=10, reuse=True)
    assert summary["systems"]["demo_mlm"]["counts"]["gold_spans"] == metrics["counts"]["gold_spans"]


# anchors runs in the slow tier: the fast tier keeps one compact format end to end.
@pytest.mark.parametrize("target", ["segments", pytest.param("anchors", marks=pytest.mark.slow)])
def test_tiny_decoder_overfits_in_the_compact_formats_with_a_selector(tiny_llama, tmp_path, target):
    """segments and anchors with constrained decoding and the window selector, end to end: training, the
    saved model (its selector beside it), scoring, and the figures the run reports about them."""
    overrides = [
        f"model.name={tiny_llama}",
        f"output_dir={tmp_path}",
        *CLM,
        f"generation.target={target}",
        "generation.constrained=true",
    ]
    overrides += ["generation.selector.kind=linear", "generation.selector.recall=1.0", "eval.curve_docs=2"]
    # Segments add up across windows; anchors need a clause whole in one window.
    # Segments' 12 short windows in two steps an epoch: 160 steps learn them (seeds 0-3), where batches of two
    # took 900.
    overrides += (
        ["model.max_length=48", "model.stride=8", "train.batch_size=6", "train.epochs=80", "train.eval_every=80"]
        if target == "segments"
        else ["model.max_length=96", "model.stride=32"]
    )
    # Clause-level labels of the contract sample: whole sentences, which segments can hold.
    overrides += [
        "data.train=sample:contracts_train",
        "data.dev=sample:contracts_train",
        "data.labels=[Confidentiality,Governing Law,Termination]",
    ]
    recipe = load_recipe(REPO / "recipes" / "demo_clm.yaml", overrides)
    result = run_recipe(recipe, tmp_path / target)
    run = result.run
    assert result.summary["span_f1"] == 1.0 and run["hallucinated_spans"] == 0 and run["malformed_lines"] == 0
    assert run["target"] == target and run["windows_read"] <= run["windows"]
    selector = result.metrics["selector"]
    assert (
        selector["kind"] == "linear"
        and selector["dev_spans"] > 0
        and selector["dev_spans_reachable"] <= selector["dev_spans"]
    )
    meta = open_run(tmp_path / target).meta
    assert meta.generation.target == target and (
        meta.selector["fitted"] == (tmp_path / target / "model" / "selector.joblib").is_file()
    )
    from toolkit.rundir import read_curve

    curve = read_curve(tmp_path / target)
    assert curve and curve[-1]["metrics"]["span_recall"] == result.summary["span_recall"]


def test_completion_only_logits_give_the_models_own_loss(tiny_llama, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, TrainingArguments

    from toolkit.tasks.training import completion_trainer_class, pad_collator

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama).eval()
    vocab = model.config.vocab_size
    features = []
    for prompt, completion in ((12, 4), (20, 6), (7, 3)):  # prompts of different lengths, right-padded
        ids = torch.randint(5, vocab, (prompt + completion,)).tolist()
        features.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    batch = pad_collator(0)(features)
    trainer = completion_trainer_class()(model=model, args=TrainingArguments(tmp_path, report_to=[]))
    with torch.no_grad():
        expected = model(**batch).loss
        loss, outputs = trainer.compute_loss(model, batch, return_outputs=True)
        summed = trainer.compute_loss(model, batch, num_items_in_batch=torch.tensor(26))
    assert torch.allclose(loss, expected, atol=1e-5)
    assert torch.allclose(summed, expected * 13 / 26, atol=1e-5)  # 13 completion tokens, counted over 26
    # Logits only where some row predicts a completion token: 13 positions of 26 (6-8, 11-14, 19-24).
    assert outputs.logits.shape == (3, 13, vocab)
