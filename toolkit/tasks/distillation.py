"""token_classification with `distill:`: a student tagger learns from a teacher tagger's soft labels.

Reads top to bottom:
1. `plan_distillation` (before any model loads): open the teacher and check that it tags this recipe's labels;
   read the unlabelled text, sample its share, and stop if a dev document's sentence is in it (a leak).
2. `label_documents` (once training starts): the teacher reads every labelled and unlabelled document through
   its own windows, as `toolkit eval` reads them; each document's per-word logits are cached in the run
   directory (`teacher_outputs.npz`), so a resumed run does not label again.
3. `soft_dataset`: the student's windows with gold targets (labelled documents; none for unlabelled ones) and the
   teacher's logits on each target-carrying token (`spans/soft_targets.py`).
4. `distillation_loss` (the Trainer's loss): gold_weight x cross-entropy on gold + (1 - gold_weight) x T^2 x
   KL(teacher_T || student_T) on the teacher's tokens (Hinton et al. 2015).
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from toolkit.data.corpora import TextReport, read_located_texts
from toolkit.data.leakage import shared_sentences
from toolkit.data.schema import SpanRecord
from toolkit.errors import DataError, Problem, ToolkitError
from toolkit.registry.task import Task
from toolkit.registry.token_classification import DistillConfig, TeacherInfo, TokenClassificationRecipe
from toolkit.spans.alignment import IGNORE
from toolkit.spans.label_space import LabelSpace, flat_tags
from toolkit.spans.soft_targets import TeacherWords, continuation_pairs, soft_targets, teacher_words

TEACHER_OUTPUTS_FILE = "teacher_outputs.npz"


@dataclass
class Distillation:
    """What a distilled run reads, fixed before training: the teacher, its tag order mapped onto the student's,
    the labelled and unlabelled texts, and the report data_report.json and metrics.json carry."""

    config: DistillConfig
    teacher_path: Path
    teacher_model: str | None
    columns: list[int]  # the teacher's output index of each student tag
    labelled: list[str]
    unlabelled: list[str]
    report: dict = field(default_factory=dict)

    def teacher_info(self) -> TeacherInfo:
        return TeacherInfo(
            teacher=self.config.teacher,
            teacher_model=self.teacher_model,
            temperature=self.config.temperature,
            gold_weight=self.config.gold_weight,
            labelled_documents=len(self.labelled),
            unlabelled_documents=len(self.unlabelled),
        )


def plan_distillation(
    recipe: TokenClassificationRecipe, train: list[SpanRecord], dev: list[SpanRecord], space: LabelSpace
) -> Distillation:
    """Check the teacher and the unlabelled text, and read it; nothing runs a model."""
    from toolkit.rundir import open_run

    cfg = recipe.distill
    assert cfg is not None
    try:
        teacher = open_run(cfg.teacher)
    except ToolkitError as exc:
        raise ToolkitError(f"distill.teacher: {exc.message}", fix=exc.fix) from None
    columns = teacher_columns(cfg.teacher, teacher.spec, teacher.meta.multi_label, teacher.labels, space)
    sources, pool = [], []
    for source in cfg.unlabelled:
        report = TextReport()
        located = read_located_texts(source, cfg.max_unlabelled_docs, report)
        pool += located
        sources.append({"source": source, **report.to_dict(), "sha256": _sha256(Path(source))})
    if cfg.unlabelled_share < 1:
        keep = sorted(random.Random(recipe.seed).sample(range(len(pool)), round(cfg.unlabelled_share * len(pool))))
        pool = [pool[i] for i in keep]
    check_no_leak([(r.id, r.text) for r in dev], pool, cfg.leak_sentence_chars)
    report = {
        "teacher": cfg.teacher,
        "teacher_model": teacher.recipe.model.name if teacher.recipe is not None else None,
        "temperature": cfg.temperature,
        "gold_weight": cfg.gold_weight,
        "labelled_documents": len(train),
        "unlabelled_sources": sources,
        "unlabelled_share": cfg.unlabelled_share,
        "unlabelled_documents": len(pool),
        "leak_check": {
            "dev_documents": len(dev),
            "unlabelled_documents": len(pool),
            "min_sentence_chars": cfg.leak_sentence_chars,
            "shared": 0,
        },
    }
    return Distillation(
        cfg,
        teacher.path,
        report["teacher_model"],
        columns,
        [r.text for r in train],
        [text for _, text in pool],
        report,
    )


def teacher_columns(name: str, task: Task, multi_label: bool, labels: list[str], space: LabelSpace) -> list[int]:
    """The teacher's output index of each of the student's tags; a teacher of other labels is an error with the
    fix."""
    if task.outputs != "tags" or multi_label:
        raise ToolkitError(
            f"distill.teacher {name} is a {task.key}{' (multi-label)' if multi_label else ''} model; a teacher must be "
            "a flat token_classification tagger",
            fix="point distill.teacher at a run of a token_classification recipe with model.multi_label=false",
        )
    if set(labels) != set(space.labels):
        raise ToolkitError(
            f"distill.teacher {name} tags {sorted(labels)}; this recipe learns {sorted(space.labels)}",
            fix=f"set data.labels: {sorted(labels)} (data.label_map maps the corpus's labels onto them), or choose a "
            f"teacher trained on {sorted(space.labels)}",
        )
    index = {t: i for i, t in enumerate(flat_tags(labels))}
    return [index[t] for t in space.tags]


def check_no_leak(dev: list[tuple[str, str]], pool: list[tuple[str, str]], min_chars: int) -> None:
    """A DataError naming every unlabelled document that shares a sentence with a dev document."""
    leaks = shared_sentences(dev, pool, min_chars)
    if leaks:
        problems = [
            Problem(
                "dev_text_in_unlabelled",
                f"shares a sentence with dev document {leak.dev_id!r}: {leak.sentence[:80]!r}",
                "remove this document from the unlabelled text: the teacher would label dev text for the student",
                leak.source,
            )
            for leak in leaks
        ]
        raise DataError(problems, f"{len(leaks)} dev document(s) found in distill.unlabelled")


def _sha256(path: Path) -> str | None:
    if not path.is_file():
        return None  # a folder of .txt files: its files are counted in the source's report
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the teacher labels every document once ------------------------------------------------------


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _fingerprint(teacher_dir: Path) -> str:
    """The teacher's identity in the cache: its saved files' names, sizes and modification times."""
    from toolkit.rundir import model_dir_of

    files = sorted(p for p in model_dir_of(teacher_dir).iterdir() if p.is_file())
    return _key("|".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files))


def _read_cache(path: Path, fingerprint: str) -> dict[str, TeacherWords]:
    if not path.is_file():
        return {}
    with np.load(path) as z:
        if str(z["fingerprint"]) != fingerprint:
            return {}  # another teacher (or the teacher retrained): label again
        # Each z[name] reads the whole array again, and a slice keeps its array alive: read each once.
        keys, counts, starts, ends, logits = (z[n] for n in ("keys", "counts", "starts", "ends", "logits"))
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return {str(k): TeacherWords(starts[a:b], ends[a:b], logits[a:b]) for k, a, b in zip(keys, bounds[:-1], bounds[1:])}


def _write_cache(path: Path, fingerprint: str, cache: dict[str, TeacherWords]) -> None:
    keys = list(cache)
    words = [cache[k] for k in keys]
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        fingerprint=np.array(fingerprint),
        keys=np.array(keys),
        counts=np.array([len(w.starts) for w in words], dtype=np.int64),
        starts=np.concatenate([w.starts for w in words]) if words else np.zeros(0, np.int64),
        ends=np.concatenate([w.ends for w in words]) if words else np.zeros(0, np.int64),
        logits=np.concatenate([w.logits for w in words]) if words else np.zeros((0, 0), np.float32),
    )
    tmp.replace(path)  # a crash mid-write leaves the previous cache whole


def label_documents(
    distillation: Distillation, texts: list[str], cache_file: Path, precision: str, chunk: int = 128
) -> tuple[list[TeacherWords], dict]:
    """The teacher's per-word logits of each text (student tag order), read from the cache or computed and added
    to it; returns them with what labelling cost."""
    from toolkit.infer.tagger import Tagger
    from toolkit.models.runtimes import preferred_autocast
    from toolkit.spans.decoding import WindowScores, stitch_windows

    fingerprint = _fingerprint(distillation.teacher_path)
    cache = _read_cache(cache_file, fingerprint)
    missing = list(dict.fromkeys(k for k in map(_key, texts) if k not in cache))
    by_key = {_key(t): t for t in texts}
    start = time.perf_counter()
    if missing:
        tagger = Tagger.load(distillation.teacher_path)
        tagger.autocast = preferred_autocast(precision, tagger.device)
        for lo in range(0, len(missing), chunk):
            keys = missing[lo : lo + chunk]
            windows = tagger.windows([by_key[k] for k in keys])
            logits = tagger.logits(windows, distillation.config.teacher_batch_size)
            per_doc: list[list[WindowScores]] = [[] for _ in keys]
            for w, scores in zip(windows, logits):
                per_doc[w.doc].append(WindowScores(w.offsets, w.word_ids, scores))
            for k, scored in zip(keys, per_doc):
                cache[k] = teacher_words(*stitch_windows(scored))
            _write_cache(cache_file, fingerprint, cache)
    columns = distillation.columns
    words = [_in_student_order(cache[_key(t)], columns) for t in texts]
    return words, {
        "teacher_seconds": round(time.perf_counter() - start, 1),
        "documents_labelled": len(missing),
        "documents_from_cache": len(set(map(_key, texts))) - len(missing),
    }


def _in_student_order(words: TeacherWords, columns: list[int]) -> TeacherWords:
    return TeacherWords(words.starts, words.ends, words.logits[:, columns] if len(words.starts) else words.logits)


# --- the student's training set ------------------------------------------------------------------


def soft_dataset(
    distillation: Distillation,
    tokenizer,
    space: LabelSpace,
    labelled_windows: list,
    labelled_targets: list[list],
    max_length: int,
    stride: int,
    teacher: list[TeacherWords],
):
    """A datasets.Dataset of the labelled windows (gold targets) and the unlabelled documents' windows (no gold
    target), each with the teacher's logits and a mask of the tokens that carry them; and its counts."""
    from datasets import Dataset

    from toolkit.spans.windows import make_windows

    n_labelled = len(distillation.labelled)
    unlabelled_windows = make_windows(tokenizer, distillation.unlabelled, max_length, stride)
    rows: dict[str, list] = {k: [] for k in ("input_ids", "attention_mask", "labels", "teacher_logits", "teacher_mask")}
    pairs = continuation_pairs(space.tags)
    without_teacher = 0
    for windows, offset, targets in (
        (labelled_windows, 0, labelled_targets),
        (unlabelled_windows, n_labelled, None),
    ):
        for i, w in enumerate(windows):
            logits, mask, missing = soft_targets(
                w.offsets, w.word_ids, teacher[offset + w.doc], pairs, space.label_all_subtokens
            )
            without_teacher += missing
            rows["input_ids"].append(w.input_ids)
            rows["attention_mask"].append([1] * len(w.input_ids))
            rows["labels"].append(targets[i] if targets is not None else [IGNORE] * len(w.input_ids))
            rows["teacher_logits"].append(logits)
            rows["teacher_mask"].append(mask.tolist())
    counts = {
        "labelled_windows": len(labelled_windows),
        "unlabelled_windows": len(unlabelled_windows),
        "tokens_without_teacher_word": without_teacher,
    }
    return Dataset.from_dict(rows), counts, sum(len(w.input_ids) for w in unlabelled_windows)


def soft_collator(base):
    """`base` (the tagger's collator) plus the teacher's logits and mask padded to the batch's width."""
    import torch

    def collate(features):
        teacher = [f.pop("teacher_logits", None) for f in features]
        masks = [f.pop("teacher_mask", None) for f in features]
        batch = base(features)
        if teacher[0] is None:  # dev windows
            return batch
        width, tags = batch["input_ids"].shape[1], len(teacher[0][0])
        logits = torch.zeros((len(features), width, tags), dtype=torch.float)
        mask = torch.zeros((len(features), width), dtype=torch.bool)
        for i, (rows, m) in enumerate(zip(teacher, masks)):
            logits[i, : len(rows)] = torch.as_tensor(np.asarray(rows, dtype=np.float32))
            mask[i, : len(m)] = torch.as_tensor(m, dtype=torch.bool)
        batch["teacher_logits"], batch["teacher_mask"] = logits, mask
        return batch

    return collate


def distillation_loss(logits, labels, teacher, mask, temperature: float, gold_weight: float, weight=None):
    """gold_weight x cross-entropy on the gold tags + (1 - gold_weight) x T^2 x KL(teacher_T || student_T) on the
    tokens the teacher labelled. A batch of unlabelled windows alone has no gold term."""
    import torch.nn.functional as F

    flat_labels = labels.reshape(-1)
    gold = (
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat_labels, weight=weight, ignore_index=IGNORE)
        if bool((flat_labels != IGNORE).any())
        else logits.sum() * 0.0
    )
    if not bool(mask.any()):
        return gold
    student = F.log_softmax(logits[mask] / temperature, dim=-1)
    target = F.log_softmax(teacher[mask].to(logits.dtype) / temperature, dim=-1)
    soft = F.kl_div(student, target, log_target=True, reduction="batchmean") * temperature**2
    return gold_weight * gold + (1 - gold_weight) * soft
