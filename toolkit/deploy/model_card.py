"""The artifact's README.md: a model card in the Hugging Face layout (YAML metadata, then sections).

Everything in it comes from files the run wrote (config.yaml, data_report.json, metrics.json,
toolkit.json) and from the export's parity figures, so the card says only what was measured.
`render_model_card` is pure: `write_model_card` gathers the inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from toolkit.models.pretrained import load_tokenizer, lowercases
from toolkit.models.runtimes import runtime_named
from toolkit.registry import Task, task_named
from toolkit.registry.saved import ModelMeta
from toolkit.rundir import Run, read_metrics

WEAK_F1 = 0.5  # labels under this dev F1 are named in the limitations


def base_model_of(name: str, spec: Task) -> str:
    """The recipe's model.name, with a short name ('default', 'mpnet') resolved to the hub id it stands for."""
    from toolkit.models.pretrained import hub_id_of

    return hub_id_of(name, spec.decoder)


def _figure(summary: dict, ci: dict, key: str) -> str:
    if key not in summary:
        return "n/a"
    interval = f" ({ci[key][0]:.3f} to {ci[key][1]:.3f})" if ci.get(key) else ""
    return f"{summary[key]:.3f}{interval}"


def render_model_card(
    name: str,
    meta: ModelMeta,
    recipe: dict | None,
    data_report: dict | None,
    metrics: dict | None,
    export: dict,
    uncased: bool = False,
) -> str:
    """Markdown with YAML front matter. `export` holds the manifest's task, path, precision, parity and hardware;
    `uncased`: the model's tokenizer folds case."""
    task, spec = meta.task, task_named(meta.task, meta.classifier)
    model = (recipe or {}).get("model", {})
    data = (recipe or {}).get("data", {})
    base = base_model_of(model.get("name", "default"), spec)
    labels = meta.labels
    front = {
        "library_name": "clause-entity-toolkit",
        "pipeline_tag": spec.pipeline_tag,
        "base_model": base,
        "tags": [runtime_named(export["runtime"]).hub_tag, task, "span-extraction"],
        "language": ["en"],
    }
    lines = ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "", f"# {name}", ""]
    lines += [
        f"Extracts {len(labels)} span label{'s' if len(labels) != 1 else ''} from text by {spec.summary}.",
        f"Fine-tuned from `{base}` with clause-entity-toolkit; exported as `{export['path']}` ({export['precision']}).",
        "",
        "## Model details",
        "",
        f"- Task: `{task}`",
        f"- Base model: `{base}`",
        f"- Labels: {', '.join(f'`{label}`' for label in labels)}",
        f"- Windows: {meta.max_length} tokens, stride {meta.stride}"
        + (f"; decoding `{meta.decoding}`" if not spec.generates else ""),
    ]
    lines += meta.card_lines()
    lines += ["", "## Training data", ""]
    if data_report:
        train, dev = data_report.get("train", {}), data_report.get("dev", {})
        lines += [
            f"- Train: `{data.get('train', '?')}`: {train.get('documents', '?')} documents, {train.get('spans', '?')} "
            f"spans of these labels.",
            f"- Dev: `{data.get('dev', '?')}`: {dev.get('documents', '?')} documents, {dev.get('spans', '?')} spans.",
        ]
        for corpus in data_report.get("train_corpora", [])[1:]:
            lines.append(
                f"- Extra training corpus: `{corpus.get('path')}` ({corpus.get('documents', '?')} documents per epoch)."
            )
        if data.get("train") and data.get("train") == data.get("dev"):
            lines.append("- **Dev is the training file**: the evaluation below is not on held-out documents.")
        if data.get("label_map"):
            lines.append(f"- Label map applied on load: {json.dumps(data['label_map'])}")
    else:
        lines.append("The run's data report was not found; the training data is not described.")
    lines += ["", "## Evaluation (dev)", ""]
    if metrics:
        s, ci = metrics["summary"], metrics["ci95"]
        boots, jaccard = metrics["settings"]["bootstrap"], metrics["settings"]["jaccard_threshold"]
        lines += [
            f"On {metrics['counts']['documents']} dev documents ({metrics['counts']['gold_spans']} gold spans). "
            + (
                f"95% CIs from {boots} bootstrap resamples over documents."
                if boots
                else "No bootstrap CIs were computed (eval.bootstrap = 0)."
            ),
            "",
            "| metric | value (95% CI) |",
            "|---|---|",
        ]
        for key, title in (
            ("span_precision", "span precision (exact)"),
            ("span_recall", "span recall (exact)"),
            ("span_f1", "span F1 (exact)"),
            ("jaccard_precision", f"precision, overlap (Jaccard >= {jaccard})"),
            ("jaccard_recall", f"recall, overlap (Jaccard >= {jaccard})"),
            ("boundary_both_within_3_recall", "recall, both boundaries within 3 words"),
            ("hallucination_rate", "hallucination rate"),
        ):
            # A tagger's spans are always in the text: its hallucination rate is 0 by construction.
            if key in s and (key != "hallucination_rate" or spec.generates):
                lines.append(f"| {title} | {_figure(s, ci, key)} |")
        lines += ["", "| label | support | precision | recall | F1 |", "|---|---|---|---|---|"]
        for label, v in metrics["per_label"].items():
            lines.append(f"| {label} | {v['support']} | {v['precision']:.3f} | {v['recall']:.3f} | {v['f1']:.3f} |")
    else:
        lines.append("The run's metrics.json was not found: this model has no recorded evaluation.")
    parity = export["parity"]
    figures = parity[export["path"]]
    lines += [
        "",
        "## Export parity",
        "",
        f"Checked on the first {parity['documents']} documents of `{parity['source']}` against the run's PyTorch fp32 "
        f"model "
        f"(span F1 {parity['pytorch_span_f1']:.4f}): this artifact's span F1 {figures['span_f1']:.4f}"
        + (f", largest logit difference {figures['max_logit_diff']:.2e}" if "max_logit_diff" in figures else "")
        + (f", argmax agreement {figures['argmax_agreement']:.4f}" if "argmax_agreement" in figures else "")
        + f". Measured on {export['hardware'].get('cpu', 'this CPU')}.",
        "",
        "## Intended use",
        "",
        f"Pre-annotation and triage: finding candidate "
        f"{', '.join(labels[:6])}{' and others' if len(labels) > 6 else ''} spans in English text like "
        "the training data, for a person to review. It is not a substitute for legal or medical judgement.",
        "",
        "```bash",
        "toolkit predict THIS_DIR contracts/ -o spans.jsonl            # txt, pdf, docx, span JSONL",
        "toolkit predict THIS_DIR notes/ -o tasks.json --format labelstudio",
        "toolkit serve THIS_DIR                                         # POST /extract",
        "```",
        "",
        "## Limitations",
        "",
    ]
    lines += _limitations(spec, base, labels, meta, metrics, data_report, uncased)
    return "\n".join(lines) + "\n"


def _limitations(
    spec: Task,
    base: str,
    labels: list[str],
    meta: ModelMeta,
    metrics: dict | None,
    data_report: dict | None,
    uncased: bool,
) -> list[str]:
    out = []
    if metrics:
        weak = [
            f"{lb} (F1 {v['f1']:.2f}, precision {v['precision']:.2f})"
            for lb, v in metrics["per_label"].items()
            if v["f1"] < WEAK_F1
        ]
        if weak:
            out.append(f"- Labels under dev F1 {WEAK_F1}: {', '.join(weak)}. Review every span of these.")
        s = metrics["summary"]
        out.append(
            f"- At the saved {'thresholds' if meta.decides_by_thresholds else 'decision rule'}, dev precision is "
            f"{s['span_precision']:.2f}: "
            f"about {round((1 - s['span_precision']) * 100)} of 100 predicted spans are not exact gold spans."
        )
        if metrics["counts"]["documents"] < 100:
            out.append(
                f"- The dev set has {metrics['counts']['documents']} documents: the figures above are uncertain for "
                f"that reason."
            )
    if data_report and "train" in data_report:
        other = data_report["train"].get("spans_other_labels") or {}
        if other:
            out.append(
                f"- Only these {len(labels)} labels are extracted; the training data had {len(other)} other labels, "
                f"not learned."
            )
    if uncased:
        out.append(f"- `{base}` is uncased: capitalisation (defined terms, gene symbols) is invisible to the model.")
    if spec.generates:
        out.append(
            "- Generated spans that cannot be found in the text are dropped and counted; generation is slow on CPU."
        )
    out.append(
        f"- Documents are read in windows of {meta.max_length} tokens; spans longer than a window are cut or missed."
        " PDF pages without a text layer are not read (OCR them first)."
    )
    return out


def write_model_card(run: Run, directory: Path, export: dict) -> Path:
    """README.md in `directory` from the run's own files and the export's figures."""
    metrics = read_metrics(run.path)
    run_dir = run.path if metrics is not None else run.model_dir.parent
    metrics = metrics if metrics is not None else read_metrics(run_dir)

    def read(name: str) -> dict | None:
        path = run_dir / name
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    recipe = run.recipe.model_dump(mode="json") if run.recipe else None
    uncased = lowercases(load_tokenizer(str(run.model_dir)))  # asked of the tokenizer, not guessed from the name
    text = render_model_card(
        run_dir.name,
        run.meta,
        recipe,
        read("data_report.json"),
        metrics.model_dump(exclude_unset=True) if metrics else None,
        export,
        uncased,
    )
    path = Path(directory) / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
