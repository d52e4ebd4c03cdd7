"""A document's spans and scores never depend on the documents batched with it, at every precision."""

import pytest

from toolkit.data.sample import SAMPLE_FILES
from toolkit.deploy.export import PATHS, ParityBudgets, export_run
from toolkit.infer import load_predictor


def _texts():
    import json

    train, dev = SAMPLE_FILES["clinical"]
    return [json.loads(line)["text"] for line in dev.open(encoding="utf-8")]


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


@pytest.mark.parametrize("path", list(PATHS))
def test_exported_tagger_answers_do_not_depend_on_the_batch(path, tiny_mlm_run, tiny_mlm_artifact, tmp_path):
    """Every path an export can package: bit-identical spans and scores alone and in any batch (onnx_int8
    scales activations per row block, openvino_int8 with calibrated static scales; PyTorch and OpenVINO paths
    run a window per forward pass)."""
    from toolkit.hardware import describe

    if path.endswith("bf16") and not describe()["bf16"]:
        pytest.skip("this machine has no bf16 units: the bf16 path is not exported here")
    artifact = tiny_mlm_artifact
    if path != "onnx_fp32":
        artifact = tmp_path / path
        export_run(tiny_mlm_run, artifact, precision=path, parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
    predictor = load_predictor(artifact)
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


@pytest.mark.parametrize("path", ["openvino_fp32", "openvino_int8"])
def test_openvino_windows_on_parallel_streams_equal_each_window_alone(path, tiny_mlm_run, tmp_path):
    """Many windows run on one stream per thread (one thread each); every window's logits equal those of its
    own call on the single two-thread stream, bit for bit."""
    import numpy as np
    import torch

    from toolkit.infer.openvino_model import PAD_MULTIPLE, OpenVINOTokenClassifier
    from toolkit.rundir import ExportInfo

    export_run(tiny_mlm_run, tmp_path / path, precision=path, parity_docs=5, budgets=ParityBudgets(max_f1_drop=1.0))
    predictor = load_predictor(tmp_path / path)
    model = predictor.model
    assert isinstance(model, OpenVINOTokenClassifier)
    # The artifact runs at the padding its export measured; one saved before the key existed, at 64.
    assert predictor.meta.export.pad_multiple == model.pad_multiple == PAD_MULTIPLE
    assert ExportInfo(path=path, runtime="openvino", precision="fp32").pad_multiple == 64
    model.threads = 2  # streams even where fewer cores are free (a CI worker's share)
    windows = [list(w.input_ids) for w in predictor.windows(_texts())]
    assert len(windows) > 4
    each = model.logits_each(windows)
    assert model._streams is not None
    for w, logits in zip(windows, each):
        alone = model(input_ids=torch.tensor([w]), attention_mask=torch.ones((1, len(w)), dtype=torch.long)).logits[0]
        assert np.array_equal(logits, alone.numpy())
