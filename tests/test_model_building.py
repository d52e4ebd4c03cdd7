import pytest
import torch

from toolkit.errors import ConfigError, ToolkitError
from toolkit.models.building import apply_dropout, build_token_model
from toolkit.registry.recipe_sections import ClassifierModelConfig, DropoutConfig
from toolkit.spans.label_space import LabelSpace
from toolkit.tasks.token_classification import class_weights


def test_dropout_knobs_reach_the_config():
    from transformers import BertConfig, LlamaConfig

    cfg = BertConfig()
    applied = apply_dropout(cfg, DropoutConfig(hidden=0.2, attention=0.05, classifier=0.3))
    assert (cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob, cfg.classifier_dropout) == (0.2, 0.05, 0.3)
    assert applied == {"hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.05, "classifier_dropout": 0.3}
    llama = LlamaConfig()
    apply_dropout(llama, DropoutConfig(attention=0.1))
    assert llama.attention_dropout == 0.1
    with pytest.raises(ConfigError, match="hidden"):
        apply_dropout(llama, DropoutConfig(hidden=0.1))  # Llama has no residual dropout setting


def test_embedding_dropout_is_active_in_training_only(tiny_bert):
    space = LabelSpace(("A",), False)
    model, tok = build_token_model(
        ClassifierModelConfig(
            name=str(tiny_bert), dropout=DropoutConfig(embedding=0.5, hidden=0.0, attention=0.0, classifier=0.0)
        ),
        space,
    )
    batch = tok(["the patient was given metformin"], return_tensors="pt")
    model.train()
    a, b = model(**batch).logits, model(**batch).logits
    assert not torch.allclose(a, b)
    model.eval()
    a, b = model(**batch).logits, model(**batch).logits
    assert torch.allclose(a, b)
    model0, _ = build_token_model(
        ClassifierModelConfig(name=str(tiny_bert), dropout=DropoutConfig(hidden=0.0, attention=0.0, classifier=0.0)),
        space,
    )
    model0.train()
    assert torch.allclose(model0(**batch).logits, model0(**batch).logits)


def test_class_weights():
    space = LabelSpace(["A", "B"], False)  # tags O, B-A, I-A, B-B, I-B
    targets = [[0, 0, 0, 1, 2, -100], [0, 0, 3, 4, 0, 0]]
    w = class_weights("balanced", space, targets)
    assert w[0] == pytest.approx(11 / (5 * 7)) and w[1] == pytest.approx(11 / 5)
    assert class_weights({"A": 3.0}, space, targets) == [1.0, 3.0, 3.0, 1.0, 1.0]
    assert class_weights("none", space, targets) is None
    with pytest.raises(ToolkitError):
        class_weights({"C": 2.0}, space, targets)


def test_class_weights_multi_label():
    space = LabelSpace(["A", "B"], True)  # outputs O-A, B-A, I-A, O-B, B-B, I-B
    targets = [[[0, 0], [1, 0], [2, 1], [0, 2]], [[0, 0], [-100, -100]]]
    w = class_weights("balanced", space, targets)
    # layer A: O x3, B x1, I x1 (5 tokens); layer B: O x3, B x1, I x1
    assert w == pytest.approx([5 / 9, 5 / 3, 5 / 3, 5 / 9, 5 / 3, 5 / 3])
    assert class_weights({"B": 4.0, "O": 0.5}, space, targets) == [0.5, 1.0, 1.0, 0.5, 4.0, 4.0]


def test_weighted_multi_label_loss_matches_torch_weighted_cross_entropy():
    from toolkit.tasks.token_classification import _trainer_class

    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6)  # batch 2, 4 tokens, 2 labels x O/B/I
    labels = torch.tensor([[[0, 1], [2, 0], [-100, -100], [1, 2]], [[0, 0], [0, 2], [1, 0], [-100, -100]]])
    weights = [1.0, 3.0, 2.0, 0.5, 4.0, 5.0]
    trainer = _trainer_class().__new__(_trainer_class())
    trainer.loss_weights = torch.tensor(weights)
    got = trainer._multi_label_loss(logits, labels)
    # Reference: each layer's own weighted CE terms, pooled over both layers.
    num = den = 0.0
    for layer in range(2):
        lg, lb = logits[..., layer * 3 : (layer + 1) * 3].reshape(-1, 3), labels[..., layer].reshape(-1)
        keep = lb >= 0
        ce = torch.nn.functional.cross_entropy(lg[keep], lb[keep], reduction="none")
        w = torch.tensor(weights[layer * 3 : (layer + 1) * 3])[lb[keep]]
        num, den = num + (w * ce).sum(), den + w.sum()
    assert torch.allclose(got, num / den)
    trainer.loss_weights = None
    plain = torch.nn.functional.cross_entropy(logits.reshape(-1, 3), labels.reshape(-1), ignore_index=-100)
    assert torch.allclose(trainer._multi_label_loss(logits, labels), plain)


def test_a_run_directory_is_a_start_and_a_head_of_other_labels_is_drawn_anew(tiny_bert, tmp_path):
    from transformers import AutoModelForTokenClassification

    from toolkit.models.building import build_segment_model

    # A run trained on labels A and B (a saved token classifier in run/model, as rundir saves it).
    trained = AutoModelForTokenClassification.from_pretrained(
        str(tiny_bert), num_labels=2, id2label={0: "A", 1: "B"}, label2id={"A": 0, "B": 1}
    )
    with torch.no_grad():
        trained.classifier.weight.fill_(0.5)
        trained.bert.embeddings.word_embeddings.weight.add_(1.0)  # what the run learned below the head
    trained.save_pretrained(tmp_path / "run" / "model")
    for f in tiny_bert.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "special_tokens")):
            (tmp_path / "run" / "model" / f.name).write_bytes(f.read_bytes())

    other, _ = build_segment_model(ClassifierModelConfig(name=str(tmp_path / "run")), ["C", "D"])
    same, _ = build_segment_model(ClassifierModelConfig(name=str(tmp_path / "run")), ["A", "B"])
    learned = trained.bert.embeddings.word_embeddings.weight
    assert torch.equal(other.bert.embeddings.word_embeddings.weight, learned)  # the encoder is the run's
    assert not torch.allclose(other.classifier.weight, torch.full_like(other.classifier.weight, 0.5))  # renewed
    assert other.config.id2label == {0: "C", 1: "D"}
    assert torch.equal(same.classifier.weight, trained.classifier.weight)  # the same labels keep their head
    more, _ = build_segment_model(ClassifierModelConfig(name=str(tmp_path / "run")), ["C", "D", "E"])
    assert more.classifier.weight.shape[0] == 3  # another count of labels loads too, with a new head
