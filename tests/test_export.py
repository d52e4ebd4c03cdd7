"""`toolkit export` on tiny models: parity gates, int8, manifests, atomic writes, and eval on the artifact."""

import json

import pytest
from conftest import REPO, invoke

from toolkit.deploy.export import ParityBudgets, export_run
from toolkit.errors import ToolkitError
from toolkit.evaluate.evaluation import evaluate_run
from toolkit.evaluate.scorer import score
from toolkit.infer import load_predictor
from toolkit.models.runtimes import runtime_of
from toolkit.rundir import open_run, records_for, sha256_of, verify_artifact


def _spans(path):
    """Spans without their scores: ONNX and PyTorch logits differ in the last float bits, which can move a
    4-decimal score by one unit (seen in CI: 0.5414 vs 0.5415). Scores are compared with `_scores`."""
    docs = [json.loads(line)["spans"] for line in path.read_text().splitlines()]
    return [[{k: v for k, v in span.items() if k != "score"} for span in doc] for doc in docs]


def _scores(path):
    return [span["score"] for line in path.read_text().splitlines() for span in json.loads(line)["spans"]]


def test_fp32_artifact_is_self_contained_and_matches_pytorch(tiny_mlm_run, tiny_mlm_artifact):
    manifest = verify_artifact(tiny_mlm_artifact)
    assert {"model.onnx", "toolkit.json", "config.yaml", "tokenizer.json", "config.json"} <= set(manifest["files"])
    assert manifest["files"]["model.onnx"]["sha256"] == sha256_of(tiny_mlm_artifact / "model.onnx")
    assert (
        manifest["task"] == "token_classification"
        and manifest["precision"] == "fp32"
        and manifest["path"] == "onnx_fp32"
    )
    assert manifest["windowing"] == {"max_length": 128, "stride": 32}  # --windows trained: nothing measured
    parity = manifest["parity"]
    assert parity["documents"] == 5 and parity["onnx_fp32"]["max_logit_diff"] < 1e-3
    # Parity, not training luck: the fixture overfits five documents, but the last epoch's F1 depends on the
    # CPU's kernels (CI once ended at 0.9796 on a machine where this one ends at 1.0).
    f1 = parity["pytorch_span_f1"]
    assert parity["onnx_fp32"]["span_f1"] == f1 and f1 >= 0.9
    assert parity["onnx_fp32"]["argmax_agreement"] == 1.0
    # The model card: Hugging Face layout, with the run's data, dev metrics and the parity figures.
    card = (tiny_mlm_artifact / "README.md").read_text()
    assert "README.md" in manifest["files"] and card.startswith(
        "---\nlibrary_name: clause-entity-toolkit\npipeline_tag: token-classification"
    )
    labels = json.loads((tiny_mlm_artifact / "toolkit.json").read_text())["labels"]
    assert all(f"`{label}`" in card for label in labels)
    for section in (
        "## Model details",
        "## Training data",
        "## Evaluation (dev)",
        "## Export parity",
        "## Intended use",
        "## Limitations",
    ):
        assert section in card
    assert f"(span F1 {f1:.4f}): this artifact's span F1 {f1:.4f}" in card
    assert "5 documents" in card and "span F1 (exact) | " in card and "argmax agreement 1.0000" in card
    # `toolkit eval` on the artifact gives the same spans as on the run it came from.
    data = "sample:clinical_dev"
    _, run_out = evaluate_run(tiny_mlm_run, data, tiny_mlm_run.parent / "eval_run", bootstrap=0)
    _, art_out = evaluate_run(tiny_mlm_artifact, data, tiny_mlm_run.parent / "eval_artifact", bootstrap=0)
    assert _spans(art_out / "predictions.jsonl") == _spans(run_out / "predictions.jsonl")
    assert _scores(art_out / "predictions.jsonl") == pytest.approx(_scores(run_out / "predictions.jsonl"), abs=2e-4)


def test_int8_artifact_is_smaller_and_reports_its_parity(tiny_mlm_run, tmp_path):
    out = tmp_path / "int8"
    manifest = export_run(tiny_mlm_run, out, precision="int8", parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
    assert manifest["precision"] == "int8" and manifest["budgets"]["max_f1_drop"] == 1.0
    int8 = manifest["parity"]["onnx_int8"]
    # The recorded figures are the int8 graph's own: rescoring the artifact on the parity documents gives its F1,
    # and quantization moves the logits (unlike fp32) while keeping nearly every decision.
    run = open_run(tiny_mlm_run)
    records = records_for(run, run.recipe.data.dev, 5)
    predictions = load_predictor(out).predict([r.text for r in records])
    assert score([r.text for r in records], [r.spans for r in records], predictions, bootstrap=0)["summary"][
        "span_f1"
    ] == pytest.approx(int8["span_f1"])
    assert int8["max_logit_diff"] > manifest["parity"]["onnx_fp32"]["max_logit_diff"] and int8["argmax_agreement"] > 0.9
    # The gated drop comes with its paired-bootstrap interval over the parity documents.
    drop = int8["span_f1_drop"]
    assert drop["points"] == pytest.approx(100 * (manifest["parity"]["pytorch_span_f1"] - int8["span_f1"]), abs=0.01)
    assert drop["ci95_points"][0] <= drop["points"] <= drop["ci95_points"][1]
    fp32_bytes = (tiny_mlm_run / "model" / "model.safetensors").stat().st_size
    assert manifest["files"]["model.onnx"]["bytes"] < fp32_bytes
    verify_artifact(out)


def test_int8_is_gated_on_its_own_f1(tiny_mlm_run, tmp_path):
    with pytest.raises(ToolkitError, match="int8 span F1 drop"):
        export_run(
            tiny_mlm_run, tmp_path / "int8", precision="int8", parity_docs=5, budgets=ParityBudgets(max_f1_drop=-0.5)
        )
    assert not (tmp_path / "int8").exists()


def test_failed_parity_gate_writes_nothing(tiny_mlm_run, tmp_path):
    out = tmp_path / "artifacts" / "strict"
    with pytest.raises(ToolkitError, match="parity gate") as info:
        export_run(
            tiny_mlm_run,
            out,
            precision="fp32",
            parity_docs=2,
            budgets=ParityBudgets(max_logit_diff=0.0, max_f1_drop=0.01),
        )
    assert "nothing was written" in str(info.value)
    assert not out.exists()
    assert list((tmp_path / "artifacts").iterdir()) == []  # no temporary directory left behind


def test_existing_artifact_is_not_replaced_without_overwrite(tiny_mlm_run, tiny_mlm_artifact):
    with pytest.raises(ToolkitError, match="already exists"):
        export_run(tiny_mlm_run, tiny_mlm_artifact)


def test_edited_artifact_fails_verification(tiny_mlm_artifact, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_mlm_artifact, copy)
    (copy / "toolkit.json").write_text((copy / "toolkit.json").read_text().replace('"stride": 32', '"stride": 16'))
    with pytest.raises(ToolkitError, match="sha256"):
        verify_artifact(copy)


def test_cli_export_reports_parity(tiny_mlm_run, tmp_path):
    out = tmp_path / "cli"
    # One path: auto's every-path measurement has its own test below the CLI.
    result = invoke(["export", tiny_mlm_run, "--out", out, "--parity-docs", "2", "--precision", "onnx_int8"])
    assert result.exit_code == 0, result.output
    assert "onnx_int8" in result.stdout and "logit diff" in result.stdout and (out / "manifest.json").is_file()
    bad = invoke(["export", tiny_mlm_run, "--out", tmp_path / "x", "--quantize", "int4"])
    assert bad.exit_code == 1 and "int4" in bad.stderr and "Traceback" not in bad.output


def test_lora_run_exports_merged_with_parity(tiny_bert, tmp_path):
    from toolkit.registry.recipe_loader import load_recipe
    from toolkit.tasks import run_recipe

    recipe = load_recipe(
        REPO / "recipes" / "demo_mlm.yaml",
        [
            f"model.name={tiny_bert}",
            f"output_dir={tmp_path}",
            "data.train=sample:clinical_train",
            "data.dev=sample:clinical_train",
            "data.max_train_docs=5",
            "data.max_dev_docs=5",
            "train.epochs=20",
            "train.learning_rate=3e-3",
            "train.batch_size=5",
            "train.warmup_ratio=0",
            "eval.bootstrap=0",
            "model.lora.enabled=true",
            "model.lora.r=4",
        ],
    )
    run_recipe(recipe, tmp_path / "lora")
    assert (tmp_path / "lora" / "model" / "adapter").is_dir()
    manifest = export_run(tmp_path / "lora", tmp_path / "lora_art", precision="fp32", parity_docs=5)
    assert manifest["parity"]["onnx_fp32"]["max_logit_diff"] < 1e-3
    assert manifest["parity"]["onnx_fp32"]["span_f1"] == manifest["parity"]["pytorch_span_f1"]


def test_serve_refuses_a_directory_that_is_not_an_artifact(tiny_mlm_run):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "serve", str(tiny_mlm_run), "--port", "3999"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert (
        proc.returncode == 1
        and "manifest.json" in proc.stdout + proc.stderr
        and "Traceback" not in proc.stdout + proc.stderr
    )


# Slow tier (issue 76): exports all nine paths (most of this file's time); each path's export is tested alone in the
# fast tier, and the slow tier's demo job exports auto.
@pytest.mark.slow
def test_auto_keeps_the_fastest_path_within_budget_and_records_every_path(tiny_mlm_run, tmp_path):
    manifest = export_run(tiny_mlm_run, tmp_path / "auto", parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
    paths = manifest["paths"]
    assert set(paths) == {
        "onnx_fp32",
        "onnx_fused",
        "onnx_int8",
        "pytorch_fp32",
        "pytorch_bf16",
        "openvino_fp32",
        "openvino_bf16",
        "openvino_int8",
        "openvino_int8_bf16",
    }
    measured = {name: p for name, p in paths.items() if "skipped" not in p}
    assert {"onnx_fp32", "onnx_fused", "onnx_int8", "pytorch_fp32", "openvino_fp32", "openvino_int8"} <= set(measured)
    # Static int8: scales calibrated on training windows, recorded with the path.
    assert "calibrated on" in manifest["parity"]["openvino_int8"]["scheme"]
    for bf16 in ("pytorch_bf16", "openvino_bf16", "openvino_int8_bf16"):
        assert ("skipped" not in paths[bf16]) == manifest["hardware"]["bf16"]
    if "skipped" not in paths["openvino_int8_bf16"]:  # one calibration: the int8 model, compiled with bf16 around it
        assert "compiled with bf16" in manifest["parity"]["openvino_int8_bf16"]["scheme"]
    assert all(
        p["docs_per_second"] > 0 and p["span_f1"] == manifest["parity"][name]["span_f1"] for name, p in measured.items()
    )
    fastest = max(measured, key=lambda n: measured[n]["docs_per_second"])
    assert manifest["path"] == fastest and manifest["requested"] == "auto"
    assert [n for n, p in paths.items() if p.get("chosen")] == [fastest]
    assert manifest["parity"]["onnx_fused"]["fused_operators"]["Attention"] == 2  # the tiny model's two layers
    assert manifest["parity"]["onnx_fused"]["max_logit_diff"] < 1e-3
    # The throughput the service sizes its queue by: the chosen path over the parity documents.
    run = open_run(tiny_mlm_run)
    throughput, parity_texts = manifest["throughput"], [r.text for r in records_for(run, run.recipe.data.dev, 5)]
    assert throughput["documents"] == 5 and throughput["characters"] == sum(len(t) for t in parity_texts)
    # (seconds are recorded to the millisecond)
    assert throughput["characters"] / throughput["chars_per_second"] == pytest.approx(throughput["seconds"], abs=6e-4)
    assert throughput["documents"] / throughput["docs_per_second"] == pytest.approx(throughput["seconds"], abs=6e-4)
    verify_artifact(tmp_path / "auto")


def test_a_pytorch_artifact_runs_as_exported(tiny_mlm_run, tmp_path):
    """A PyTorch path is packaged with its weights, says its precision in toolkit.json and scores as measured."""
    from toolkit.hardware import describe

    name = "bf16" if describe()["bf16"] else "pytorch"
    manifest = export_run(
        tiny_mlm_run, tmp_path / name, precision=name, parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0)
    )
    assert (
        manifest["runtime"] == "pytorch"
        and "model.safetensors" in manifest["files"]
        and "model.onnx" not in manifest["files"]
    )
    assert set(manifest["paths"]) >= {manifest["path"]} and manifest["paths"][manifest["path"]]["chosen"]
    run = open_run(tmp_path / name)
    assert run.is_artifact and runtime_of(run).name == "pytorch" and run.meta.export.path == manifest["path"]
    tagger = load_predictor(run)
    assert tagger.window_alone and tagger.autocast == ("bfloat16" if name == "bf16" else None)
    records = records_for(run, run.recipe.data.dev, 5)
    predictions = tagger.predict([r.text for r in records])
    f1 = score([r.text for r in records], [r.spans for r in records], predictions, bootstrap=0)["summary"]["span_f1"]
    assert f1 == pytest.approx(manifest["parity"][manifest["path"]]["span_f1"])
    verify_artifact(tmp_path / name)


def test_a_path_this_machine_cannot_run_is_refused(tiny_mlm_run, tmp_path, monkeypatch):
    import toolkit.hardware as hardware

    monkeypatch.setattr(hardware, "describe", lambda: {"cpu": "x", "cpu_flags": ["avx2"], "bf16": False, "cuda": None})
    with pytest.raises(ToolkitError, match="no bf16 units"):
        export_run(tiny_mlm_run, tmp_path / "bf16", precision="bf16", parity_docs=2)
    with pytest.raises(ToolkitError, match="not supported"):
        export_run(tiny_mlm_run, tmp_path / "x", precision="int4", parity_docs=2)
    assert not (tmp_path / "bf16").exists()


def test_paths_that_cannot_apply_say_why():
    from toolkit.deploy.paths import unavailable
    from toolkit.registry import span_generation, token_classification

    cpu, decoder, tagger = {"bf16": True}, span_generation.TASK, token_classification.TASK
    assert unavailable("onnx_int8", decoder, cpu, "llama") is None
    assert "KV cache" in unavailable("pytorch_bf16", decoder, cpu, "llama")
    assert "KV cache" in unavailable("onnx_fused", decoder, cpu, "llama")
    assert "model type 'gpt2'" in unavailable("onnx_fused", tagger, cpu, "gpt2")
    assert unavailable("onnx_fused", tagger, cpu, "bert") is None
    assert "no bf16 units" in unavailable("pytorch_bf16", tagger, {"bf16": False}, "bert")
    assert "no bf16 units" in unavailable("openvino_bf16", tagger, {"bf16": False}, "bert")
    assert unavailable("openvino_fp32", tagger, cpu, "bert") is None
    assert "KV cache" in unavailable("openvino_fp32", decoder, cpu, "llama")
    assert "bidirectional" in unavailable("openvino_fp32", tagger, cpu, "llama", bidirectional=True)
    assert unavailable("openvino_int8", tagger, {"bf16": False}, "bert") is None  # int8 needs no bf16 units
    assert "no bf16 units" in unavailable("openvino_int8_bf16", tagger, {"bf16": False}, "bert")


def test_cpu_flags_are_read_from_cpuinfo():
    from toolkit.hardware import cpu_flags

    text = (
        "processor : 0\nmodel name : Some Xeon\nflags : fpu avx2 avx512f avx512_vnni amx_bf16 amx_tile\nprocessor : "
        "1\nflags : fpu\n"
    )
    assert cpu_flags(text) == ("Some Xeon", ["avx2", "avx512f", "avx512_vnni", "amx_bf16"])
    assert cpu_flags("") == ("unknown", [])


def test_the_cpu_kind_a_record_id_carries_is_the_widest_units_present():
    from toolkit.hardware import cpu_kind

    assert cpu_kind(["avx2", "avx512f", "avx512_vnni", "amx_bf16"]) == "amx"  # Intel Xeon
    assert cpu_kind(["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]) == "avx512"  # Zen 4
    assert cpu_kind(["avx2"]) == "avx2"  # Zen 2 and 3
    assert cpu_kind([]) == "baseline"


def test_window_limits_are_the_positions_and_halfway_there():
    from toolkit.deploy.timing import window_limits

    assert window_limits(256, 512) == [512, 384]
    assert window_limits(128, 131) == [131, 129]
    assert window_limits(128, 129) == [129]
    assert window_limits(512, 512) == [] and window_limits(512, 128) == []


def test_windows_sized_to_each_document_are_measured_and_kept_only_within_budget(tiny_mlm_run, tmp_path, monkeypatch):
    import toolkit.deploy.export as export
    import toolkit.deploy.timing as timing
    from toolkit.deploy.timing import window_limits

    manifest = export_run(tiny_mlm_run, tmp_path / "measured", precision="fp32", parity_docs=5)
    fitted = manifest["windowing"]["fitted"]
    tagger = load_predictor(tmp_path / "measured")
    assert manifest["windowing"]["max_length"] == 128
    assert [m["window_limit"] for m in fitted["measured"]] == window_limits(128, tagger.position_limit())
    path = manifest["paths"]["onnx_fp32"]
    passing = [
        m
        for m in fitted["measured"]
        if path["span_f1"] - m["span_f1"] <= 0.005
        and manifest["parity"]["pytorch_span_f1"] - m["span_f1"] <= 0.01
        and m["docs_per_second"] > fitted["trained_docs_per_second"]
    ]
    assert [not m["problems"] for m in fitted["measured"]] == [m in passing for m in fitted["measured"]]
    best = max(passing, key=lambda m: m["docs_per_second"])["window_limit"] if passing else None
    assert fitted["kept"] == bool(passing) and fitted["window_limit"] == best
    assert tagger.window_limit == best

    # Made faster (each timing beats the last), within a loose budget: kept, and the artifact reads them.
    calls = iter(range(1, 100))
    faster = lambda ps, t: {n: {"docs_per_second": float(next(calls))} for n in ps}  # noqa: E731
    monkeypatch.setattr(export, "single_document_speeds", faster)
    monkeypatch.setattr(timing, "single_document_speeds", faster)
    loose = ParityBudgets(max_f1_drop=1.0, max_window_f1_drop=1.0)
    manifest = export_run(tiny_mlm_run, tmp_path / "kept", precision="fp32", parity_docs=5, budgets=loose)
    fitted = manifest["windowing"]["fitted"]
    # The limits are timed largest first, so the last (the smallest) measured fastest here.
    assert fitted["kept"] and fitted["window_limit"] == fitted["measured"][-1]["window_limit"]
    artifact = load_predictor(tmp_path / "kept")
    assert artifact.window_limit == fitted["window_limit"] > 128
    run = open_run(tiny_mlm_run)
    # Each sample document three times over: longer than the trained 128-token windows.
    texts = [" ".join([r.text] * 3) for r in records_for(run, run.recipe.data.dev, 5)]
    reference = load_predictor(run)
    assert len(artifact.windows(texts)) < len(reference.windows(texts))
    reference.window_limit = artifact.window_limit
    strip = lambda docs: [[(s.start, s.end, s.label) for s in d] for d in docs]  # noqa: E731
    assert strip(artifact.predict(texts)) == strip(reference.predict(texts))
    # --windows trained keeps the run's windows and measures nothing.
    manifest = export_run(tiny_mlm_run, tmp_path / "trained", precision="fp32", parity_docs=5, windows="trained")
    assert "fitted" not in manifest["windowing"] and load_predictor(tmp_path / "trained").window_limit is None


def test_export_help_names_every_registered_path():
    from toolkit.cli.export import PATH_NAMES
    from toolkit.deploy.paths import PATHS

    listed = ", ".join(f"{p.name} ({', '.join(p.aliases)})" if p.aliases else p.name for p in PATHS.values())
    assert PATH_NAMES == listed
