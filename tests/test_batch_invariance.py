"""A document's spans and scores never depend on the documents batched with it, at every precision."""

import pytest

from toolkit.data.sample import SAMPLE_FILES
from toolkit.deploy.export import ParityBudgets, export_run
from toolkit.deploy.paths import PATHS
from toolkit.infer import load_predictor


def _texts():
    import json

    train, dev = SAMPLE_FILES["clinical"]
    return [json.loads(line)["text"] for line in dev.open(encoding="utf-8")]


@pytest.fixture(scope="module")
def exported(tiny_mlm_run, tiny_mlm_artifact, tmp_path_factory):
    """Each export path's artifact of the tiny tagger, made once for the module's tests."""
    made = {"onnx_fp32": tiny_mlm_artifact}

    def artifact(path: str):
        if path not in made:
            made[path] = tmp_path_factory.mktemp("exported") / path
            export_run(tiny_mlm_run, made[path], precision=path, parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
        return made[path]

    return artifact


def _answers(predictor, texts, target: int):
    """The target document's spans, alone and inside three different batches."""
    doc = texts[target]
    neighbours = [t for i, t in enumerate(texts) if i != target]
    batches = [[doc], [neighbours[0], doc, neighbours[1]], [*neighbours[2:9], doc], [doc * 3, doc, neighbours[-1][:40]]]
    out = []
    for batch in batches:
        spans = predictor.predict(batch)[batch.index(doc)]
        out.append([(s.start, s.end, s.label, s.score) for s in spans])
    return out


# The fast tier keeps one path of each runtime and the int8 path that scales activations per row block; the other
# precisions of the same runtimes (each a fresh export, most of this file's time) run in the slow tier.
FAST_PATHS = {"onnx_fp32", "onnx_int8", "pytorch_fp32", "openvino_fp32"}


@pytest.mark.parametrize("path", [p if p in FAST_PATHS else pytest.param(p, marks=pytest.mark.slow) for p in PATHS])
def test_exported_tagger_answers_do_not_depend_on_the_batch(path, exported):
    """Every path an export can package: bit-identical spans and scores alone and in any batch (onnx_int8
    scales activations per row block, openvino_int8 with calibrated static scales; PyTorch and OpenVINO paths
    run a window per forward pass)."""
    from toolkit.hardware import describe

    if path.endswith("bf16") and not describe()["bf16"]:
        pytest.skip("this machine has no bf16 units: the bf16 path is not exported here")
    predictor = load_predictor(exported(path))
    texts = _texts()
    for target in (0, 5):
        alone, *batched = _answers(predictor, texts, target)
        assert alone, "the tiny tagger finds spans in the sample"
        for answer in batched:
            assert answer == alone


def test_pytorch_tagger_answers_differ_by_rounding_only(tiny_mlm_run):
    """PyTorch picks matmul kernels by shape, so padding moves scores in the last bits: spans are the
    same and scores agree to 1e-6 (the service rounds them to 4 decimals)."""
    predictor = load_predictor(tiny_mlm_run)
    texts = _texts()
    for target in (0, 5):
        alone, *batched = _answers(predictor, texts, target)
        for answer in batched:
            assert [s[:3] for s in answer] == [s[:3] for s in alone]
            assert [s[3] for s in answer] == pytest.approx([s[3] for s in alone], abs=1e-6)


@pytest.mark.parametrize("path", ["openvino_fp32", pytest.param("openvino_int8", marks=pytest.mark.slow)])
def test_openvino_windows_on_parallel_streams_equal_each_window_alone(path, exported):
    """Many windows run on one stream per thread (one thread each); every window's logits equal those of its
    own call on the single two-thread stream, bit for bit."""
    import numpy as np
    import torch

    from toolkit.models.openvino import PAD_MULTIPLE, STATIC_MAX_WIDTH, OpenVINOTokenClassifier
    from toolkit.registry.saved import ExportInfo

    predictor = load_predictor(exported(path))
    model = predictor.model
    assert isinstance(model, OpenVINOTokenClassifier)
    # The artifact runs at the padding its export measured; one saved before the key existed, at 64.
    assert predictor.meta.export.pad_multiple == model.pad_multiple == PAD_MULTIPLE
    assert predictor.meta.export.static_max_width == model.static_max_width == STATIC_MAX_WIDTH
    old = ExportInfo(path=path, runtime="openvino", precision="fp32")
    assert (old.pad_multiple, old.static_max_width) == (64, 0)
    if path == "openvino_int8":  # int8 matmul weights; the embedding table stays fp32 (a lookup, shared per shape)
        tables = {
            tuple(op.get_output_shape(0)): op.get_output_element_type(0).get_type_name()
            for op in model.graph.get_ops()
            if op.get_type_name() == "Constant"
        }
        assert tables[(model.config.vocab_size, model.config.hidden_size)] == "f32"
        assert "i8" in tables.values()
    model.streams = 2  # streams even where fewer cores are free (a CI worker's share)
    # Warm-up compiles every padded width a trained window can take, on one stream and on the streams.
    predictor.warm_up()
    widths = set(range(PAD_MULTIPLE, (predictor.window_limit or predictor.meta.max_length) + 1, PAD_MULTIPLE))
    assert set(model._requests) == set(model._queues) == widths
    windows = [list(w.input_ids) for w in predictor.windows(_texts())]
    assert len(windows) > 4
    # All widths on static shapes, then the wider ones on the dynamic model: each shape keeps its model.
    for static_max_width in (STATIC_MAX_WIDTH, PAD_MULTIPLE):
        model.static_max_width = static_max_width
        each = model.logits_each(windows)
        for w, logits in zip(windows, each):
            ids = torch.tensor([w])
            alone = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0]
            assert np.array_equal(logits, alone.numpy())
    assert None in model._queues, "the windows wider than the static limit ran on the dynamic model's streams"
