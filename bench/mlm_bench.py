"""MLM track benchmark: a recipe run through the toolkit vs a plain Hugging Face baseline.

    .venv/bin/python bench/mlm_bench.py toolkit  recipes/ncbi_disease_mlm.yaml
    .venv/bin/python bench/mlm_bench.py baseline recipes/ncbi_disease_mlm.yaml

Each variant runs in its own process (so peak RSS is its own) and prints one JSON line;
results also go to bench/out/<recipe>_<variant>.json.

- toolkit: `toolkit run` as is (sliding windows with stride, dynamic padding, length grouping,
  best checkpoint by dev span F1).
- baseline: what transformers' run_ner.py does by default: truncation to max_length (no windows,
  the rest of each document is never seen), padding every sequence to max_length, flat BIO on
  first sub-tokens, same model and hyper-parameters, last checkpoint. Scored by the same scorer
  on the same full dev documents, so text cut off by truncation counts as missed.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from toolkit.hardware import benchmark_header  # noqa: E402
from toolkit.registry.recipe_loader import load_recipe  # noqa: E402

KEYS = [
    "span_precision",
    "span_recall",
    "span_f1",
    "seqeval_f1",
    "jaccard_recall",
    "boundary_start_recall",
    "boundary_end_recall",
    "boundary_both_recall",
]


def run_toolkit(recipe, out_dir: Path) -> dict:
    from toolkit.rundir import prepare_run_dir
    from toolkit.tasks import run_recipe

    recipe = recipe.model_copy(update={"output_dir": str(out_dir), "name": recipe.name + "_bench"})
    run_dir = out_dir / recipe.name
    prepare_run_dir(run_dir, overwrite=True)
    m = run_recipe(recipe, run_dir).metrics
    return {"summary": m["summary"], "ci95": m["ci95"], "run": m["run"], "length_buckets": m["length_buckets"]}


def run_baseline(recipe, out_dir: Path) -> dict:
    import numpy as np
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments, set_seed

    from toolkit.data.records import filter_labels, load_splits
    from toolkit.evaluate.scorer import score
    from toolkit.models.building import build_token_model
    from toolkit.spans.alignment import flat_targets, representable
    from toolkit.spans.decoding import decode_documents
    from toolkit.spans.label_space import LabelSpace
    from toolkit.spans.windows import Window
    from toolkit.tasks.features import labels_to_learn

    train_records, dev_records = load_splits(recipe.data, recipe.seed)
    labels = labels_to_learn(recipe, train_records)
    train_records, dev_records = filter_labels(train_records, labels), filter_labels(dev_records, labels)
    space = flat = LabelSpace(tuple(labels), False, False)
    set_seed(recipe.seed)
    model, tok = build_token_model(recipe.model.model_copy(update={"multi_label": False}), flat)
    ml = recipe.model.max_length
    tag_to_id = {t: i for i, t in enumerate(space.tags)}

    def encode(records):
        enc = tok(
            [r.text for r in records], truncation=True, max_length=ml, padding="max_length", return_offsets_mapping=True
        )
        windows, targets = [], []
        for i, r in enumerate(records):
            wids = enc.word_ids(i)
            offs = [(a, b) if w is not None else (0, 0) for (a, b), w in zip(enc["offset_mapping"][i], wids)]
            windows.append(Window(i, enc["input_ids"][i], offs, wids))
            targets.append(flat_targets(offs, wids, representable(r.spans, False)[0], tag_to_id))
        return windows, targets, enc

    train_w, train_t, train_enc = encode(train_records)
    dev_w, _, dev_enc = encode(dev_records)
    t = recipe.train
    args = TrainingArguments(
        output_dir=str(out_dir / "baseline_checkpoints"),
        learning_rate=t.learning_rate,
        num_train_epochs=t.epochs,
        per_device_train_batch_size=t.batch_size,
        per_device_eval_batch_size=t.eval_batch_size,
        warmup_ratio=t.warmup_ratio,
        weight_decay=t.weight_decay,
        seed=recipe.seed,
        report_to=[],
        save_strategy="no",
        logging_steps=50,
        dataloader_pin_memory=False,
    )
    from datasets import Dataset

    ds = Dataset.from_dict(
        {"input_ids": [w.input_ids for w in train_w], "attention_mask": train_enc["attention_mask"], "labels": train_t}
    )
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=DataCollatorForTokenClassification(tok))
    started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - started
    dev_ds = Dataset.from_dict({"input_ids": [w.input_ids for w in dev_w], "attention_mask": dev_enc["attention_mask"]})
    started = time.perf_counter()
    logits = trainer.predict(dev_ds).predictions
    eval_seconds = time.perf_counter() - started
    mask = [np.asarray(m, dtype=bool) for m in dev_enc["attention_mask"]]
    spans = decode_documents(
        [r.text for r in dev_records],
        [w.doc for w in dev_w],
        [[o for o, k in zip(w.offsets, m) if k] for w, m in zip(dev_w, mask)],
        [[x for x, k in zip(w.word_ids, m) if k] for w, m in zip(dev_w, mask)],
        [lg[m] for lg, m in zip(logits, mask)],
        flat,
    )
    metrics = score(
        [r.text for r in dev_records],
        [r.spans for r in dev_records],
        spans,
        recipe.eval.boundary_tolerance,
        recipe.eval.jaccard_threshold,
        recipe.eval.bootstrap,
        recipe.seed,
    )
    epochs = float(trainer.state.epoch or 0)
    tokens = len(train_w) * ml
    real = sum(sum(m) for m in train_enc["attention_mask"])
    return {
        "summary": metrics["summary"],
        "ci95": metrics["ci95"],
        "length_buckets": metrics["length_buckets"],
        "run": {
            "train_seconds": round(train_seconds, 1),
            "eval_seconds": round(eval_seconds, 1),
            "optimizer_steps": trainer.state.global_step,
            "train_tokens_per_second": round(tokens * epochs / train_seconds, 1),
            "train_real_tokens_per_second": round(real * epochs / train_seconds, 1),
            "train_tokens_seen_fraction": round(
                real / sum(len(tok(r.text, add_special_tokens=False)["input_ids"]) for r in train_records), 3
            ),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
    }


def main() -> None:
    variant, recipe_path = sys.argv[1], sys.argv[2]
    overrides = sys.argv[3:]
    recipe = load_recipe(recipe_path, overrides)
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    machine = benchmark_header()
    started = time.perf_counter()
    result = run_toolkit(recipe, out_dir) if variant == "toolkit" else run_baseline(recipe, out_dir)
    result.update(
        {
            "variant": variant,
            "recipe": recipe_path,
            "overrides": overrides,
            "wall_seconds": round(time.perf_counter() - started, 1),
            "machine": machine,
        }
    )
    (out_dir / f"{Path(recipe_path).stem}_{variant}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps({"variant": variant, **{k: result["summary"][k] for k in KEYS}, **result["run"]}))


if __name__ == "__main__":
    main()
