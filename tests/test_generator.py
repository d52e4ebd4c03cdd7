"""SpanGenerator's speed levers keep its answers: the prompts' shared prefix read once, and bf16 weights."""

import json

import pytest

from toolkit.data.sample import SAMPLE_DIR
from toolkit.models.pretrained import load_tokenizer
from toolkit.registry.span_generation import GenerationConfig
from toolkit.rundir import model_meta, save_model_dir

TEXTS = [json.loads(line)["text"] for line in (SAMPLE_DIR / "contracts_dev.jsonl").open()][:3]


def _generator(tiny_llama, target: str = "text"):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toolkit.infer.generator import SpanGenerator

    torch.manual_seed(0)  # an initialisation that writes spans rather than only "none"
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny_llama))
    generation = GenerationConfig(max_new_tokens=24, batch_size=3, target=target)
    labels = ["Confidentiality", "Governing Law"]
    meta = model_meta(task="span_generation", labels=labels, max_length=48, stride=8, generation=generation)
    return SpanGenerator(model, load_tokenizer(str(tiny_llama)), meta)


@pytest.mark.parametrize("target", ["text", "segments"])
@pytest.mark.parametrize("constrained", [False, True])
def test_the_shared_prompt_prefix_read_once_gives_the_completions_of_whole_prompts(tiny_llama, target, constrained):
    """Each batch's prompts are the cached instruction, padding, then their own tokens; the completions equal
    those of every prompt read whole, and the instruction is read once for all batches."""
    from toolkit.infer.constrained import grammar_for
    from toolkit.infer.generator import MIN_CACHED_PREFIX

    gen = _generator(tiny_llama, target)
    views = gen.views(TEXTS)[0][:9]
    prompts = [gen.prompt(TEXTS, v) for v in views]
    grammars = [grammar_for(gen.spec, v, gen.labels) for v in views] if constrained else [None] * len(views)

    def completions() -> list:
        out = []
        for lo in range(0, len(prompts), 3):
            out += gen.generate(prompts[lo : lo + 3], grammars[lo : lo + 3] if constrained else None)[0]
        return out

    gen.reuse_prefix = False
    whole = completions()
    gen.reuse_prefix = True
    widths = []
    forward = gen.model.forward

    def counting(*args, **kwargs):
        widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    gen.model.forward = counting
    cached = completions()
    prefix = gen._prefix[0]
    assert len(prefix) >= MIN_CACHED_PREFIX and widths.count((1, len(prefix))) == 1  # read once, three batches
    assert cached == whole and sum(len(text) for text, _ in whole) > len(whole)  # they wrote something


def test_bf16_generation_runs_bf16_weights_and_leaves_a_lent_model_in_fp32(tiny_llama, tmp_path):
    """A model lent by training (a curve point) is copied to bf16 for the prediction; a saved model loads its
    weights in the precision it generates in, and in fp32 where asked (export's reference)."""
    import torch

    from toolkit.hardware import bf16_supported
    from toolkit.infer.generator import SpanGenerator

    gen = _generator(tiny_llama)
    before = {k: v.clone() for k, v in gen.model.state_dict().items()}
    gen.autocast = "bfloat16"
    runner = gen.runner()
    assert runner is not gen.model and next(runner.parameters()).dtype == torch.bfloat16
    assert gen.predict(TEXTS[:1]) is not None and gen.last_report["autocast"] == "bfloat16"
    assert gen._prefix is None  # the copy and its cache are released after the prediction
    after = gen.model.state_dict()
    assert all(v.dtype == torch.float32 and torch.equal(v, after[k]) for k, v in before.items())

    bf16_generation = gen.meta.generation.model_copy(update={"precision": "prefer_bf16"})
    meta = gen.meta.model_copy(update={"generation": bf16_generation})
    save_model_dir(gen.model, gen.tokenizer, tmp_path / "model", meta)
    loaded = SpanGenerator.load(tmp_path / "model")
    bf16 = bf16_supported("cpu")
    assert next(loaded.model.parameters()).dtype == (torch.bfloat16 if bf16 else torch.float32)
    assert loaded.autocast == ("bfloat16" if bf16 else None) and loaded.runner() is loaded.model
    reference = SpanGenerator.load(tmp_path / "model", precision="fp32")
    assert next(reference.model.parameters()).dtype == torch.float32 and reference.autocast is None
