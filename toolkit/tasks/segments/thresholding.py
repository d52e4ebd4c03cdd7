"""The last step of every segment model (the encoder flow's and the linear baseline's): score dev once,
choose per-label thresholds and save them with the model, and score with thresholds cross-fitted over
two halves of dev and CUAD's ranking metrics over the threshold sweep. `choose_thresholds_again` does it again
later (`toolkit choose-thresholds`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.data.schema import SpanRecord
from toolkit.errors import ToolkitError
from toolkit.evaluate.ranking import sweep_metrics
from toolkit.evaluate.reporting import write_predictions
from toolkit.evaluate.scorer import score
from toolkit.evaluate.thresholds import choose_from_counts, cross_fitted_from_counts, threshold_counts
from toolkit.infer.decisions import SegmentDecisions, SegmentScores
from toolkit.registry.extraction import ExtractionRecipe
from toolkit.rundir import MODEL_DIR, PREDICTIONS_FILE, load_meta, open_run, read_metrics, records_for, write_meta
from toolkit.scoring_defaults import SCORING
from toolkit.spans.decoding import PredictedSpan
from toolkit.tasks.flow import RunResult


def sweep_counts(
    scores: SegmentScores, texts: list[str], golds: list, labels: list[str], jaccard_threshold: float
) -> np.ndarray:
    """The documents' counts over the threshold grid: what ranking metrics and every threshold choice read."""
    return threshold_counts(
        texts,
        golds,
        scores.segments,
        scores.probabilities,
        labels,
        jaccard_threshold=jaccard_threshold,
        starts=scores.starts,
    )


def best_thresholds(
    scores: SegmentScores, records: list[SpanRecord], labels: list[str], jaccard_threshold: float
) -> list[float]:
    """Per-label thresholds with the best Jaccard F1 on `records`, scored as `scores`: how thresholds are chosen
    on training documents (the baseline's out-of-fold ones, an encoder's held-out ones)."""
    texts, golds = [r.text for r in records], [r.spans for r in records]
    return choose_from_counts(sweep_counts(scores, texts, golds, labels, jaccard_threshold))


def sweep_and_cross_fit(
    classifier: SegmentDecisions,
    scores: SegmentScores,
    texts: list[str],
    golds: list,
    labels: list[str],
    jaccard_threshold: float,
) -> tuple[np.ndarray, list[list[PredictedSpan]]]:
    """The documents' threshold counts (the sweep the ranking metrics and threshold choice read) and their
    spans at thresholds cross-fitted over two halves of them."""
    counts = sweep_counts(scores, texts, golds, labels, jaccard_threshold)
    return counts, classifier.spans_at(scores, cross_fitted_from_counts(counts, SCORING.decision_threshold))


def cross_fitted_summary(
    classifier: SegmentDecisions,
    scores: SegmentScores,
    texts: list[str],
    golds: list,
    labels: list[str],
    jaccard_threshold: float,
) -> dict[str, float]:
    """What thresholds do not decide: macro AUPR over the threshold sweep, and Jaccard and both-ends recall at
    thresholds cross-fitted over two halves of the documents (keys tuned_*)."""
    counts, crossed_spans = sweep_and_cross_fit(classifier, scores, texts, golds, labels, jaccard_threshold)
    crossed = score(texts, golds, crossed_spans, jaccard_threshold=jaccard_threshold, bootstrap=0)["summary"]
    ranking = sweep_metrics(counts, labels, bootstrap=0, jaccard_threshold=jaccard_threshold)
    return {
        "macro_aupr": ranking["macro"].get("aupr", 0.0),
        **{
            f"tuned_{k}": crossed[k]
            for k in ("jaccard_f1", "jaccard_precision", "jaccard_recall", "boundary_both_recall")
        },
    }


def score_segment_model(
    recipe: ExtractionRecipe,
    run_dir: Path,
    classifier: SegmentDecisions,
    dev_records: list[SpanRecord],
    labels: list[str],
    batch_size: int = 16,
    chosen: tuple[list[float], str] | None = None,
    scores: SegmentScores | None = None,
) -> tuple[dict, dict]:
    """Every segment model's last step (the encoder's and the linear baseline's): score dev, save per-label
    thresholds with the model, and score dev with CUAD's ranking metrics over the threshold sweep.

    The thresholds are `chosen` elsewhere (thresholds, how), so dev only reports; or fixed; or else chosen on
    dev (segments.thresholds: tuned, and `toolkit choose-thresholds`), dev then scored at thresholds cross-fitted
    over its two halves. `scores`: the classifier's scores of dev, already computed (its last_report timed them)."""
    e, how = recipe.eval, recipe.segments.thresholds
    texts, golds = [r.text for r in dev_records], [r.spans for r in dev_records]
    scores = classifier.score(texts, batch_size) if scores is None else scores
    fixed = classifier.spans_at(scores, classifier.default_thresholds())
    counts, crossed = sweep_and_cross_fit(classifier, scores, texts, golds, labels, e.jaccard_threshold)
    if chosen is not None:
        (thresholds, how), reported = chosen, classifier.spans_at(scores, chosen[0])
    elif how == "fixed":
        thresholds, reported, how = classifier.default_thresholds(), fixed, f"fixed at {SCORING.decision_threshold}"
    else:  # tuned; or `toolkit choose-thresholds` of a run whose thresholds were chosen on training documents
        thresholds, reported, how = choose_from_counts(counts), crossed, "cross-fitted over two halves of dev"
    # The thresholds travel with the model: eval, export and the service apply them.
    model_dir = run_dir / MODEL_DIR
    write_meta(model_dir, load_meta(model_dir).model_copy(update={"thresholds": thresholds}))
    metrics = score(texts, golds, reported, e.boundary_tolerance, e.jaccard_threshold, e.bootstrap, recipe.seed)
    metrics["ranking"] = sweep_metrics(counts, labels, e.bootstrap, recipe.seed, e.jaccard_threshold)
    metrics["at_default_threshold"] = score(
        texts, golds, fixed, e.boundary_tolerance, e.jaccard_threshold, 0, recipe.seed
    )["summary"]
    metrics["thresholds"] = dict(zip(labels, thresholds))
    write_predictions(run_dir / PREDICTIONS_FILE, dev_records, reported)
    info = {"eval_seconds": round(classifier.last_report["seconds"], 1), "dev_thresholds": how}
    return metrics, {**info, **(tuning_note(recipe, dev_records, labels) if chosen is None else {})}


def model_figures(
    classifier: SegmentDecisions, scores: SegmentScores, thresholds: list[float], records: list[SpanRecord], recipe
) -> dict:
    """One segment model's dev figures at thresholds chosen elsewhere, with their 95% CIs (as the headline):
    Jaccard F1, precision and recall, and macro AUPR over the threshold sweep."""
    e = recipe.eval
    texts, golds = [r.text for r in records], [r.spans for r in records]
    spans = classifier.spans_at(scores, thresholds)
    scored = score(texts, golds, spans, e.boundary_tolerance, e.jaccard_threshold, e.bootstrap, recipe.seed)
    counts = sweep_counts(scores, texts, golds, classifier.labels, e.jaccard_threshold)
    ranking = sweep_metrics(counts, classifier.labels, e.bootstrap, recipe.seed, e.jaccard_threshold)
    return headline_figures({**scored, "ranking": ranking})


def headline_figures(metrics: dict) -> dict:
    """The clause headline of a segment model's metrics: Jaccard F1 (CI), precision, recall, macro AUPR (CI)."""
    summary, ci, ranking = metrics["summary"], metrics.get("ci95", {}), metrics["ranking"]
    ranking_ci = ranking.get("ci95") or {}
    return {
        "jaccard_f1": summary["jaccard_f1"],
        "jaccard_f1_ci95": ci.get("jaccard_f1"),
        "jaccard_precision": summary["jaccard_precision"],
        "jaccard_recall": summary["jaccard_recall"],
        "macro_aupr": ranking["macro"].get("aupr"),
        "macro_aupr_ci95": ranking_ci.get("macro_aupr") or ranking_ci.get("aupr"),
    }


def tuning_note(
    recipe: ExtractionRecipe, records: list[SpanRecord], labels: list[str], out_of_fold: bool = False
) -> dict[str, str]:
    """For thresholds chosen on a few documents (`records`: dev for tuned, the held-out training documents for
    held_out, every training document for cross_fitted, `out_of_fold` then): the labels with fewer clauses there than
    SCORING.min_clauses_to_tune, whose thresholds would fit those few clauses (in the --dry-run plan and the
    run's record); {} otherwise."""
    how = recipe.segments.thresholds
    if how not in ("tuned", "held_out", "cross_fitted"):
        return {}
    counts = {label: 0 for label in labels}
    for record in records:
        for span in record.spans:
            if span.label in counts:
                counts[span.label] += 1
    few = {label: n for label, n in counts.items() if n < SCORING.min_clauses_to_tune}
    if not few:
        return {}
    if how == "tuned":
        where, fix = (
            "dev",
            "use segments.thresholds=held_out (an encoder), out_of_fold (the linear baseline) or a larger dev set",
        )
    elif out_of_fold:
        where, fix = "out-of-fold training", "add training documents that hold these labels"
    else:
        where, fix = "held-out training", "raise segments.held_out_share or add training documents"
    return {
        "too_few_to_tune": (
            f"fewer than {SCORING.min_clauses_to_tune} {where} clauses for {few}: thresholds chosen on them fit "
            f"those few clauses; {fix}"
        )
    }


def choose_thresholds_again(run_path: Path, data: str | None = None) -> tuple[ExtractionRecipe, RunResult]:
    """`toolkit choose-thresholds`: choose a finished segment run's thresholds again on labeled documents (default: its
    dev file) with the current grid, save them with the model, and rescore the run (its training record kept)."""
    from toolkit.infer import load_predictor
    from toolkit.tasks import flow_for

    run = open_run(run_path)
    predictor = None if run.is_artifact or run.recipe is None else load_predictor(run)
    if not isinstance(predictor, SegmentDecisions):
        raise ToolkitError(
            f"{run_path}: not a segment_classification run directory",
            fix="pass runs/<name> of a segment_classification recipe",
        )
    recipe = run.recipe
    # The run's own dev set, as training read it (data.max_dev_docs), unless other documents are given.
    records = records_for(run, data) if data else records_for(run, recipe.data.dev, recipe.data.max_dev_docs)
    metrics, info = score_segment_model(recipe, run.path, predictor, records, run.labels)
    previous = read_metrics(run.path)
    record = {**((previous.run or {}) if previous else {}), **info, "thresholds_chosen_on": data or recipe.data.dev}
    result = RunResult(run.path, {**metrics, "run": record})
    flow_for(recipe).write(recipe, result)
    return recipe, result
