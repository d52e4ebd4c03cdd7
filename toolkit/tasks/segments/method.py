"""task: segment_classification. An encoder reads windows of whole documents and decides, per segment
(sentence, line, enumerated item: `spans/segments.py`) and per label, whether the segment belongs to a
clause of that label; consecutive positive segments become one span.

Reads top to bottom: `SegmentClassification` prepares windows with segment targets and a token
classifier with one logit per label; trains it (`segment_trainer.py`); saves; then scores the saved model on
the dev documents with the same `SegmentClassifier` that `toolkit eval` and the service use, chooses per-label
thresholds on dev (saved with the model), and reports the dev figures at thresholds cross-fitted over two
halves of dev, so the figures are not scored on the documents that chose them. With `segments.thresholds:
held_out`, thresholds are chosen on training documents kept out of training instead (`segment_held_out.py`),
so dev only reports. With `segments.hard_negatives`, training has a second stage on the clause-free training
windows where the trained model fires (`train`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.evaluate.scorer import score
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.segment_baseline import LINEAR_FILE, STARTS_FILE, LinearSegmentClassifier
from toolkit.infer.segmenter import SegmentClassifier
from toolkit.models.building import build_segment_model
from toolkit.models.runtimes import preferred_autocast
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.rundir import MODEL_DIR, ModelMeta, model_meta, save_model_dir
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.segment_decoding import sigmoid
from toolkit.spans.segments import segment_text
from toolkit.tasks.bag_of_words import fit_linear_prior
from toolkit.tasks.features import (
    FeatureReport,
    SegmentWindows,
    labels_to_learn,
    segment_features,
    segment_input_features,
)
from toolkit.tasks.flow import Flow, Prepared, Trained
from toolkit.tasks.segment_cross_fit import OutOfFold, cross_fit, uses_cross_fitting
from toolkit.tasks.segment_held_out import choose_on_training_documents, hold_out
from toolkit.tasks.segment_scoring import (
    best_thresholds,
    cross_fitted_summary,
    headline_figures,
    model_figures,
    score_segment_model,
    sweep_and_cross_fit,
    tuning_note,
)
from toolkit.tasks.segment_trainer import (
    ENCODER_SELECTION,
    encoder_metrics,
    encoder_training,
    epoch_sampler,
    evaluation_sample,
    examples_per_epoch,
    frozen_cache,
    mine_hard_negatives,
    planned_epochs,
    positive_weights,
    segment_collator,
    segment_dataset,
    segment_trainer_class,
)
from toolkit.tasks.training import parameter_counts, steps_per_epoch, train_resuming, training_arguments


@dataclass
class SegmentPrepared(Prepared):
    labels: list[str]
    dev_records: list[SpanRecord]
    train: SegmentWindows
    dev: SegmentWindows
    train_report: FeatureReport
    dev_report: FeatureReport
    left_out: SegmentWindows  # clause-free training windows negative_ratio left out: the hard-negative pool
    prior: LinearSegmentClassifier | None = None  # segments.linear_prior: the linear model fitted on train
    # thresholds=held_out: the training documents kept out of training, and the prior's out-of-fold scores of them
    threshold_records: list[SpanRecord] = dataclasses.field(default_factory=list)
    threshold_priors: SegmentScores | None = None
    # combination=fitted: the held-out documents' windows (training's evaluation set), and the linear prior's
    # out-of-fold thresholds over every training document (the fallback's)
    evidence: SegmentWindows | None = None
    linear_thresholds: list[float] | None = None
    # thresholds=cross_fitted: every training document is a threshold document; the folds' scores of them, and
    # the served encoder's refit epochs, once `train` has cross-fitted
    cross_fitting: bool = False
    out_of_fold: OutOfFold | None = None


class SegmentClassification(Flow):
    # The curve's spans are at thresholds cross-fitted over two halves of its documents, so its Jaccard F1 is
    # the Trainer's tuned_jaccard_f1.
    curve_selection_key = "jaccard_f1"

    def curve_selects(self, recipe: SegmentClassificationRecipe, prepared: SegmentPrepared) -> bool:
        # combination=fitted: the held-out training documents choose the checkpoint; a dev curve only reports.
        # Segment inputs: the encoder's own segment AUPR chooses it, which the curve does not score.
        return (
            prepared.evidence is None
            and recipe.segments.encoder_input == "windows"
            and super().curve_selects(recipe, prepared)
        )

    def plan(self, recipe: SegmentClassificationRecipe) -> dict:
        """--dry-run: validates and plans in seconds; the linear prior is not fitted (the run fits it)."""
        from transformers import set_seed

        set_seed(recipe.seed)
        return self.prepare(recipe, fit_prior=False).plan

    def prepare(self, recipe: SegmentClassificationRecipe, fit_prior: bool = True) -> SegmentPrepared:
        """Data, labels, model and segment features: everything before training. `fit_prior=False` (the dry
        run) plans the linear prior without fitting it."""
        train_records, dev_records = load_splits(recipe.data, recipe.seed)
        labels = labels_to_learn(recipe, train_records)
        dev_records = filter_labels(dev_records, labels)
        m, s = recipe.model, recipe.segments
        # thresholds=held_out (or cross_fitted on a large set): these training documents are kept out of training;
        # thresholds are chosen on them. cross_fitted: every training document, scored by the folds (`train`).
        n = len(train_records)
        crossing = uses_cross_fitting(recipe, n)
        holding = s.thresholds == "held_out" or (s.thresholds == "cross_fitted" and not crossing)
        kept, held = hold_out(n, s.held_out_share, recipe.seed) if holding else (list(range(n)), [])
        scored_by_folds = held or (list(range(n)) if crossing else [])
        threshold_records = filter_labels([train_records[i] for i in scored_by_folds], labels)
        all_train_records, train_records = train_records, [train_records[i] for i in kept]
        model, tokenizer = build_segment_model(m, labels)
        segment_inputs = s.encoder_input == "segments"
        if segment_inputs:
            # The encoder reads each segment with a little context and trains alone: no windows, no prior logits.
            features = lambda records: segment_input_features(  # noqa: E731
                tokenizer, records, labels, s.segment_tokens, s.context_tokens, s.min_overlap
            )
            train, train_report = features(train_records)
            dev, dev_report = features(dev_records)
            left_out = train.subset([])
        else:
            train, train_report, left_out = segment_features(
                tokenizer,
                train_records,
                labels,
                m.max_length,
                m.stride,
                s.min_overlap,
                recipe.windows.negative_ratio,
                recipe.seed,
            )
            dev, dev_report, _ = segment_features(tokenizer, dev_records, labels, m.max_length, m.stride, s.min_overlap)
        prior, prior_plan, threshold_priors, evidence, linear_thresholds = None, {}, None, None, None
        if s.linear_prior and not fit_prior:
            prior_plan = {"linear_prior": {"folds": min(s.folds, n), "fitted": "when the run starts, not by --dry-run"}}
        elif s.linear_prior:
            # Fitted on every training document, held-out ones included: each document's training logits, and
            # a held-out document's scores for choosing thresholds, come from folds that did not see it.
            prior_records = filter_labels(all_train_records, labels)
            fitted = fit_linear_prior(
                prior_records,
                labels,
                s.min_overlap,
                s.folds,
                recipe.seed,
                recipe.task,
                s.clause_starts,
                fold_starts=bool(scored_by_folds),
            )
            prior = fitted.classifier
            dev_texts = [r.text for r in dev_records]
            logits = fitted.train_logits
            threshold_priors = fitted.train_scores.subset(scored_by_folds)
            if not segment_inputs:
                train = train.with_priors([logits[i] for i in kept])
                left_out = left_out.with_priors([logits[i] for i in kept])
                dev = dev.with_priors(prior.logits(dev_texts, [segment_text(t) for t in dev_texts]))
            prior_plan = {"linear_prior": {"folds": fitted.folds, "seconds": round(fitted.seconds, 1)}}
            if s.combination == "fitted" and not crossing:  # cross-fitting builds each fold's evaluation inputs
                if segment_inputs:
                    evidence = features(threshold_records)[0]  # the encoder alone is evaluated on them
                else:
                    evidence, _, _ = segment_features(
                        tokenizer, threshold_records, labels, m.max_length, m.stride, s.min_overlap
                    )
                    evidence = evidence.with_priors(fitted.train_logits_of(held))
            if s.combination == "fitted":
                # What a label falls back to: the linear baseline's thresholds (thresholds=out_of_fold).
                linear_thresholds = best_thresholds(
                    fitted.train_scores, prior_records, labels, recipe.eval.jaccard_threshold
                )
        if segment_inputs and held and evidence is None:
            evidence = features(threshold_records)[0]  # the encoder trains to its plateau on the held-out documents
        per_epoch = examples_per_epoch(recipe, train)
        plan = {
            "labels": labels,
            "train": train_report.to_dict(),
            "dev": dev_report.to_dict(),
            "steps_per_epoch": steps_per_epoch(per_epoch, recipe),
            "epochs": planned_epochs(recipe, per_epoch),
            **({"encoder_input": "segments", "inputs_per_epoch": per_epoch} if segment_inputs else {}),
            **({"evaluated_during_training_on": "held-out training documents"} if evidence is not None else {}),
            **({"threshold_documents": len(scored_by_folds)} if scored_by_folds else {}),
            **(
                {"cross_fitted": {"folds": min(s.encoder_folds, n), "then": "refit on every training document"}}
                if crossing
                else {}
            ),
            **parameter_counts(model),
            **prior_plan,
            **tuning_note(recipe, threshold_records if scored_by_folds else dev_records, labels, crossing),
        }
        return SegmentPrepared(
            model,
            tokenizer,
            plan,
            train_report.tokens,
            labels,
            dev_records,
            train,
            dev,
            train_report,
            dev_report,
            left_out,
            prior,
            threshold_records,
            threshold_priors,
            evidence,
            linear_thresholds,
            crossing,
        )

    def train(self, recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared) -> Trained:
        """Train; with thresholds=cross_fitted, first one encoder per fold (`segment_cross_fit.py`), and the served
        one refit on every document; with segments.hard_negatives, then mine hard negatives and train on."""
        if p.cross_fitting:
            s, tokenizer = recipe.segments, p.tokenizer
            features = lambda records: segment_input_features(  # noqa: E731
                tokenizer, records, p.labels, s.segment_tokens, s.context_tokens, s.min_overlap
            )[0]
            p.out_of_fold = cross_fit(self, recipe, run_dir, p, p.threshold_records, features)
            refit = super().train(recipe, run_dir, p)
            return dataclasses.replace(refit, notes={**refit.notes, "cross_fitting": p.out_of_fold.report})
        first = super().train(recipe, run_dir, p)
        hard = recipe.segments.hard_negatives
        if hard is None:
            return first
        started = time.perf_counter()
        mined, mining = mine_hard_negatives(first.trainer, p, hard, recipe.seed)
        mining_seconds = time.perf_counter() - started
        mining.update(
            seconds=round(mining_seconds, 1), first_stage_best_dev_tuned_jaccard_f1=first.trainer.state.best_metric
        )
        notes = {**first.notes, "hard_negatives": mining}
        if not mined.windows:
            return dataclasses.replace(first, notes=notes)  # nothing fired: another stage would only repeat the first
        more = p.train + mined
        trainer = self.trainer(recipe, run_dir, p, train=more, stage="hard_negatives")
        self.instrument(trainer, recipe, run_dir, p, first.clock, stage="hard_negatives")
        later = train_resuming(trainer, sum(len(w.input_ids) for w in more.windows))
        # Scoring the pool is not training steps: it counts like an evaluation (in seconds, out of tokens/s).
        later = dataclasses.replace(
            later, seconds=later.seconds + mining_seconds, evaluation_seconds=later.evaluation_seconds + mining_seconds
        )
        return Trained(trainer, first.span.then(later, "hard_negatives"), first.clock, notes)

    def trainer(
        self,
        recipe: SegmentClassificationRecipe,
        run_dir: Path,
        p: SegmentPrepared,
        train: SegmentWindows | None = None,
        stage: str | None = None,
    ):
        """The Trainer on p.train; a later `stage` trains `train` for segments.hard_negatives.epochs, with
        its own checkpoints (run_dir/checkpoints_<stage>), from the model as the first stage left it."""
        from transformers import EarlyStoppingCallback

        # combination=fitted: evaluations (and the best checkpoint, and early stopping) read the held-out
        # training documents with their out-of-fold priors, so dev only reports.
        records, evaluated, evaluated_priors = (
            (p.threshold_records, p.evidence, p.threshold_priors)
            if p.evidence is not None
            else (p.dev_records, p.dev, None)
        )
        texts, golds = [r.text for r in records], [r.spans for r in records]
        # Decoding only: the Trainer runs the model.
        scorer = SegmentClassifier(None, p.tokenizer, self._meta(recipe, p), prior=p.prior)
        jaccard = recipe.eval.jaccard_threshold

        def compute_metrics(pred) -> dict:
            """The evaluation documents at 0.5, and what thresholds do not decide: macro AUPR over the threshold
            sweep and Jaccard at thresholds cross-fitted over two halves of them (as the final scoring), so a
            learning curve shows how soon the model ranks clauses, whatever its calibration."""
            logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
            windows = evaluated.windows
            scores = scorer.segment_scores(
                texts, windows, [logits[i, : len(w.input_ids)] for i, w in enumerate(windows)], evaluated_priors
            )
            summary = score(texts, golds, scorer.spans_at(scores), jaccard_threshold=jaccard, bootstrap=0)["summary"]
            return {
                **{
                    k: summary[k]
                    for k in ("jaccard_f1", "jaccard_precision", "jaccard_recall", "span_f1", "boundary_both_recall")
                },
                **cross_fitted_summary(scorer, scores, texts, golds, p.labels, jaccard),
            }

        patience, s = recipe.train.early_stopping_patience, recipe.segments
        sampler = epoch_sampler(recipe, train or p.train)
        refit = p.out_of_fold is not None  # cross-fitted: the served encoder trains for the folds' epochs, unscored
        if sampler is not None and not refit:
            evaluated, weights = evaluation_sample(evaluated, s.evaluation_negatives, recipe.seed)
            compute_metrics = encoder_metrics(recipe, p.labels, scorer, records, evaluated, weights)
        # segment_ids and segment_labels are not model inputs: keep them for compute_loss.
        args = training_arguments(
            recipe,
            run_dir,
            metric="tuned_jaccard_f1" if sampler is None else ENCODER_SELECTION,
            remove_unused_columns=False,
            checkpoints=f"checkpoints_{stage}" if stage else "checkpoints",
        )
        if stage:
            args.num_train_epochs, args.max_steps = s.hard_negatives.epochs, -1
        elif refit:
            from transformers.trainer_utils import IntervalStrategy

            args.num_train_epochs, args.eval_strategy, args.load_best_model_at_end = (
                p.out_of_fold.refit_epochs,
                IntervalStrategy.NO,
                False,
            )
        else:
            args.num_train_epochs = planned_epochs(recipe, examples_per_epoch(recipe, p.train))
        return segment_trainer_class()(
            model=p.model,
            args=args,
            train_dataset=segment_dataset(train or p.train),
            eval_dataset=None if refit else segment_dataset(evaluated),
            data_collator=segment_collator(p.tokenizer),
            compute_metrics=compute_metrics,
            callbacks=[] if refit or not patience else [EarlyStoppingCallback(patience)],
            pos_weight=positive_weights(s.loss_weights, p.labels, p.train.segment_labels),
            focal_gamma=s.focal_gamma,
            epoch_sampler=sampler,
            frozen_cache=frozen_cache(recipe, p.model) if sampler is not None else None,
        )

    def _meta(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared) -> ModelMeta:
        return model_meta(
            task=recipe.task,
            # multi_label: labels are decided independently and their spans may overlap.
            **LabelSpace(tuple(p.labels), multi_label=True).to_meta(),
            max_length=recipe.model.max_length,
            stride=recipe.model.stride,
            min_overlap=recipe.segments.min_overlap,
            linear_prior=LINEAR_FILE if p.prior is not None else None,
            combination=None,  # combination=fitted: written by `evaluate`, fitted on the held-out documents
            **(
                {"segment_tokens": recipe.segments.segment_tokens, "context_tokens": recipe.segments.context_tokens}
                if recipe.segments.encoder_input == "segments"
                else {}
            ),
            clause_starts=STARTS_FILE if p.prior is not None and p.prior.starts is not None else None,
        )

    def predictor(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared, model) -> SegmentClassifier:
        device = str(next(model.parameters()).device)
        classifier = SegmentClassifier(model, p.tokenizer, self._meta(recipe, p), device, prior=p.prior)
        classifier.autocast = preferred_autocast(recipe.eval.precision, device)
        return classifier

    def curve_predictions(
        self, recipe: SegmentClassificationRecipe, p: SegmentPrepared, model, records
    ) -> tuple[list, list[list[str]], dict]:
        """Spans at thresholds cross-fitted over two halves of the curve documents, as the final scoring does."""
        classifier = self.predictor(recipe, p, model)
        texts = [r.text for r in records]
        scores = classifier.score(texts, recipe.train.eval_batch_size)
        _, crossed = sweep_and_cross_fit(
            classifier, scores, texts, [r.spans for r in records], p.labels, recipe.eval.jaccard_threshold
        )
        return crossed, [[] for _ in records], classifier.last_report

    def save(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared, model, directory: Path) -> None:
        """A model directory loadable by `SegmentClassifier.load` and exportable; thresholds are added by `evaluate`."""
        save_model_dir(model, p.tokenizer, directory, self._meta(recipe, p))
        if p.prior is not None:
            p.prior.save_files(directory, LINEAR_FILE)

    def evaluate(
        self, recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared, trained: Trained
    ) -> tuple[dict, dict]:
        classifier = SegmentClassifier.load(run_dir)  # score exactly what was saved
        classifier.autocast = preferred_autocast(recipe.eval.precision, classifier.device)
        chosen, combined, encoder_thresholds = choose_on_training_documents(recipe, classifier, p, run_dir / MODEL_DIR)
        # The dev documents are read by the encoder once: the final model's scores and the encoder alone's.
        texts = [r.text for r in p.dev_records]
        segments, encoder = classifier.score_encoder(texts, recipe.train.eval_batch_size)
        final = classifier.scores_from_encoder(texts, segments, encoder)
        metrics, info = score_segment_model(
            recipe, run_dir, classifier, p.dev_records, p.labels, recipe.train.eval_batch_size, chosen, final
        )
        info.update(combined)
        if chosen is not None:
            info.update(tuning_note(recipe, p.threshold_records, p.labels, p.out_of_fold is not None))
        linear = p.prior.score(texts) if p.prior is not None else None
        if p.prior is not None:
            # What the encoder adds: the linear prior alone on the same dev documents, scored the same way.
            alone = cross_fitted_summary(
                p.prior,
                linear,
                texts,
                [r.spans for r in p.dev_records],
                p.labels,
                recipe.eval.jaccard_threshold,
            )
            info["linear_prior_alone_dev"] = {k: round(v, 4) for k, v in alone.items()}
        if p.prior is not None and encoder_thresholds is not None:
            # Three models on dev, each at thresholds chosen on training documents: the linear model alone (out of
            # fold), the encoder alone (held out) and the final model (metrics' headline).
            metrics["models"] = {
                "linear": model_figures(p.prior, linear, p.linear_thresholds, p.dev_records, recipe),
                "encoder": model_figures(
                    classifier,
                    SegmentScores(segments, [sigmoid(x) for x in encoder]),
                    encoder_thresholds,
                    p.dev_records,
                    recipe,
                ),
                "final": headline_figures(metrics),
            }
        if recipe.segments.encoder_input == "segments":
            info["encoder_training"] = encoder_training(recipe, trained, trained.notes.get("cross_fitting"))
            cache = trained.trainer.frozen_cache
            if cache is not None:
                info["encoder_training"]["frozen_layer_cache"] = cache.report()
        return metrics, {
            **info,
            "eval_autocast": classifier.autocast,
            "best_checkpoint_dev_tuned_jaccard_f1": trained.trainer.state.best_metric,
            "spans_not_representable_train": p.train_report.spans_not_representable,
            "spans_not_representable_dev": p.dev_report.spans_not_representable,
            **trained.notes,  # hard_negatives
        }
