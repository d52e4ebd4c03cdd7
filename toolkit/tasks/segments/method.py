"""task: segment_classification, the encoder's method, top to bottom.

An encoder reads a document (in windows, or one input per segment) and decides, per segment (sentence, line,
enumerated item: `spans/segments.py`) and per label, whether the segment belongs to a clause of that label;
consecutive positive segments become one span. The method runs in five steps:

1. prepare: data and labels; the evidence strategy for `segments.thresholds` (`evidence.py`), which says which
   training documents the encoder does not train on; the encoder's inputs (`features.py`); the linear model on
   every training document with out-of-fold scores of each (`linear_model.py`, with segments.linear_prior);
2. gather evidence: what the strategy needs before the served encoder trains (cross-fitting's fold encoders,
   `cross_fit.py`);
3. train: the served encoder (`trainer.py`), refit for the folds' epochs where they were trained, and with
   segments.hard_negatives a second stage on the clause-free windows where it fires;
4. combine: the strategy chooses thresholds, and with segments.combination=fitted the weights of the encoder and
   the linear model, on the training documents the encoder did not train on (`held_out.py`, `combination.py`);
5. evaluate: the saved model scored on dev with the predictor `toolkit eval` and the service use
   (`thresholding.py`), beside the linear model alone and the encoder alone.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.data.records import filter_labels, load_splits
from toolkit.data.schema import SpanRecord
from toolkit.infer.decisions import SegmentScores
from toolkit.infer.linear_model import LINEAR_FILE, STARTS_FILE
from toolkit.infer.segment_classifier import SegmentClassifier
from toolkit.models.building import build_segment_model
from toolkit.models.runtimes import preferred_autocast
from toolkit.registry.linear_model import linear_baseline_of
from toolkit.registry.saved import ModelMeta
from toolkit.registry.segment_classification import SegmentClassificationRecipe
from toolkit.rundir import MODEL_DIR, model_meta, save_model_dir
from toolkit.spans.label_space import LabelSpace
from toolkit.spans.segment_decoding import sigmoid
from toolkit.spans.segments import segment_text
from toolkit.tasks.features import labels_to_learn
from toolkit.tasks.flow import Flow, Trained
from toolkit.tasks.segments.cost import announce_stage, dry_run_cost, fit_to_budget
from toolkit.tasks.segments.evidence import choose_strategy
from toolkit.tasks.segments.features import SegmentWindows, segment_features, segment_input_features
from toolkit.tasks.segments.linear_model import fit_linear_model
from toolkit.tasks.segments.prepared import EvaluationSet, SegmentPrepared, SegmentTrained
from toolkit.tasks.segments.thresholding import (
    best_thresholds,
    cross_fitted_summary,
    headline_figures,
    model_figures,
    score_segment_model,
    sweep_and_cross_fit,
)
from toolkit.tasks.segments.trainer import (
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
    stop_after_epochs,
    stop_at_deadline,
    window_metrics,
)
from toolkit.tasks.training import parameter_counts, steps_per_epoch, train_resuming, training_arguments


class SegmentClassification(Flow):
    # The curve's spans are at thresholds cross-fitted over two halves of its documents, so its Jaccard F1 is
    # the Trainer's tuned_jaccard_f1.
    curve_selection_key = "jaccard_f1"

    # 0. plan and budget ------------------------------------------------------------------------------------

    estimates_cost = True
    deadline: float | None = None  # budget.seconds: when training stops (time.monotonic()), and what it gave up
    budget_report: dict | None = None
    frozen = None  # the run's one frozen-layer cache, bound to each encoder it trains

    def run(self, recipe: SegmentClassificationRecipe, run_dir: Path):
        """One run; with budget.seconds, first sized to fit it (`cost.fit_to_budget`), and stopped at its deadline."""
        if recipe.budget is None:
            return super().run(recipe, run_dir)
        sizing = time.perf_counter()
        recipe, self.budget_report = fit_to_budget(recipe, self.prepare_to_time)
        self.deadline, self.sizing_seconds = self.budget_report.pop("deadline"), time.perf_counter() - sizing
        if self.budget_report.get("linear_only"):  # not one epoch fits: the linear baseline, saying why
            from toolkit.tasks import flow_for

            baseline = linear_baseline_of(recipe)
            fallback = flow_for(baseline)
            fallback.sizing_seconds, fallback.notes = self.sizing_seconds, {"budget": self.budget_report}
            return fallback.run(baseline, run_dir)
        return super().run(recipe, run_dir)

    def prepare_to_time(self, recipe: SegmentClassificationRecipe) -> tuple[SegmentPrepared, Callable[[Path], Any]]:
        """What `cost.py` times: the prepared run (the linear model not fitted) and how to build its Trainer."""
        from transformers import set_seed

        set_seed(recipe.seed)
        p = self.prepare(recipe, fit_linear=False)
        return p, lambda directory: self.trainer(recipe, directory, p)

    def plan(self, recipe: SegmentClassificationRecipe, estimate_cost: bool = False) -> dict:
        """--dry-run: validates and plans in seconds; the linear model is not fitted (the run fits it). With
        `estimate_cost`, the run's stages are timed for a few steps and its wall time estimated, with the smaller
        plan a budget would take (`cost.py`)."""
        started = time.monotonic()
        p, make_trainer = self.prepare_to_time(recipe)
        if estimate_cost:
            p.plan.update(dry_run_cost(recipe, p, make_trainer, started))
        return p.plan

    # 1. prepare --------------------------------------------------------------------------------------------

    def prepare(self, recipe: SegmentClassificationRecipe, fit_linear: bool = True) -> SegmentPrepared:
        """Data, labels, the evidence strategy, model, inputs and the linear model: everything before training.
        `fit_linear=False` (the dry run) plans the linear model without fitting it."""
        all_train_records, dev_records = load_splits(recipe.data, recipe.seed)
        labels = labels_to_learn(recipe, all_train_records)
        dev_records = filter_labels(dev_records, labels)
        n = len(all_train_records)
        strategy = choose_strategy(recipe, n)
        held = set(strategy.held) | set(strategy.stopping)
        kept = [i for i in range(n) if i not in held]
        train_records = [all_train_records[i] for i in kept]
        threshold_records = filter_labels([all_train_records[i] for i in strategy.scored], labels)
        model, tokenizer = build_segment_model(recipe.model, labels)
        inputs = Inputs(recipe, tokenizer, labels)
        train, train_report, left_out = inputs.training(train_records)
        dev, dev_report = inputs.evaluation(dev_records)
        s, fitted, linear_plan = recipe.segments, None, {}
        if s.linear_prior and not fit_linear:
            linear_plan = {
                "linear_prior": {"folds": min(s.folds, n), "fitted": "when the run starts, not by --dry-run"}
            }
        elif s.linear_prior:
            labelled = filter_labels(all_train_records, labels)
            # Fitted on every training document, held-out ones included: each document's training logits (and
            # scores for choosing thresholds) come from folds that did not see it.
            fitted = fit_linear_model(labelled, labels, s.min_overlap, s.folds, recipe.seed, recipe.task,
                                      s.clause_starts, bool(strategy.scored))  # fmt: skip
            linear_plan = {"linear_prior": {"folds": fitted.folds, "seconds": round(fitted.seconds, 1)}}
            if not inputs.segment_inputs:  # windows read the linear model's logits while they train
                kept_logits = fitted.train_logits_of(kept)
                train, left_out = train.with_priors(kept_logits), left_out.with_priors(kept_logits)
                texts = [r.text for r in dev_records]
                dev = dev.with_priors(fitted.classifier.logits(texts, [segment_text(t) for t in texts]))
        threshold_priors = fitted.train_scores.subset(strategy.scored) if fitted else None

        def stopping_evaluation() -> EvaluationSet:
            records = filter_labels([all_train_records[i] for i in strategy.stopping], labels)
            windows = inputs.evaluation(records)[0]
            if fitted is not None and not inputs.segment_inputs:
                windows = windows.with_priors(fitted.train_logits_of(strategy.stopping))
            priors = fitted.train_scores.subset(strategy.stopping) if fitted else None
            return EvaluationSet(records, windows, priors, on_dev=False)

        evaluation = strategy.evaluation(recipe, EvaluationSet(dev_records, dev), stopping_evaluation)
        linear_thresholds = None
        if fitted is not None and s.combination == "fitted":
            # What a label falls back to: the linear model's out-of-fold thresholds over every training document.
            linear_thresholds = best_thresholds(fitted.train_scores, labelled, labels, recipe.eval.jaccard_threshold)
        per_epoch = examples_per_epoch(recipe, train)
        plan = {
            "evidence_strategy": strategy.describe(),
            "labels": labels,
            "train": train_report.to_dict(),
            "dev": dev_report.to_dict(),
            "steps_per_epoch": steps_per_epoch(per_epoch, recipe),
            "epochs": planned_epochs(recipe, per_epoch),
            **({"encoder_input": "segments", "inputs_per_epoch": per_epoch} if inputs.segment_inputs else {}),
            **strategy.plan(recipe, n),
            **parameter_counts(model),
            **linear_plan,
        }
        p = SegmentPrepared(
            model, tokenizer, plan, train_report.tokens, labels, dev_records, train, dev, train_report, dev_report,
            left_out, strategy, evaluation, fitted.classifier if fitted else None, threshold_records,
            threshold_priors, linear_thresholds, train_records,
        )  # fmt: skip
        plan.update(strategy.tuning_note(recipe, p))
        return p

    # 2. gather evidence, 3. train --------------------------------------------------------------------------

    def train(self, recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared) -> SegmentTrained:
        """The strategy's evidence first (cross_fitted: one encoder per fold), then the served encoder (refit for
        the folds' epochs where there were folds), then with segments.hard_negatives a second stage."""
        out_of_fold = p.strategy.gather(
            recipe,
            run_dir,
            p,
            lambda fold_dir, part: self.train_stage(recipe, fold_dir, part),
            lambda part, model: self.predictor(recipe, part, model),
            self.deadline,
        )
        cut = out_of_fold is not None and out_of_fold.served is not None  # the budget cut the folds short
        if cut:
            self.budget_report["gave_up"].append(f"the refit: {out_of_fold.report['cut_short']['fallback']}")
            first = out_of_fold.served
        else:
            refit = (out_of_fold.refit_epochs, out_of_fold.refit_horizon) if out_of_fold else None
            first = self.train_stage(recipe, run_dir, p, refit=refit)
        notes = {**first.notes, "cross_fitting": out_of_fold.report} if out_of_fold else first.notes
        trained = SegmentTrained(first.trainer, first.span, first.clock, notes, out_of_fold)
        if recipe.segments.hard_negatives is None or cut:
            return trained
        return self.train_on_hard_negatives(recipe, run_dir, p, trained)

    def train_stage(self, recipe: SegmentClassificationRecipe, run_dir: Path, prepared, **trainer_options) -> Trained:
        announce_stage(run_dir, bool(trainer_options.get("refit")), self.deadline)  # the Trainer's bar shows steps
        return super().train_stage(recipe, run_dir, prepared, **trainer_options)

    def train_on_hard_negatives(
        self, recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared, first: SegmentTrained
    ) -> SegmentTrained:
        """Mine the clause-free training windows the trained model fires on, and train on with them."""
        started = time.perf_counter()
        mined, mining = mine_hard_negatives(first.trainer, p, recipe.segments.hard_negatives, recipe.seed)
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
        return SegmentTrained(trainer, first.span.then(later, "hard_negatives"), first.clock, notes)

    def trainer(
        self,
        recipe: SegmentClassificationRecipe,
        run_dir: Path,
        p: SegmentPrepared,
        train: SegmentWindows | None = None,
        stage: str | None = None,
        refit: tuple[float, float | None] | None = None,
    ):
        """The Trainer on p.train, evaluated on `p.evaluation` (what the strategy chose: dev, or held-out training
        documents); a later `stage` trains `train` for segments.hard_negatives.epochs, with its own checkpoints
        (run_dir/checkpoints_<stage>); `refit`: the served encoder after cross-fitting, unevaluated, trained as the
        folds were (the same schedule over their horizon, the second number) and stopped at their epoch (the first)."""
        from transformers import EarlyStoppingCallback

        ev, s = p.evaluation, recipe.segments
        evaluated = ev.windows
        scorer = SegmentClassifier(None, p.tokenizer, self._meta(recipe, p), prior=p.linear)  # decoding only
        compute_metrics = window_metrics(scorer, ev, p.labels, recipe.eval.jaccard_threshold)
        patience = recipe.train.early_stopping_patience
        sampler = epoch_sampler(recipe, train or p.train)
        if sampler is not None and refit is None:
            evaluated, weights = evaluation_sample(evaluated, s.evaluation_negatives, recipe.seed)
            compute_metrics = encoder_metrics(recipe, p.labels, scorer, ev.records, evaluated, weights)
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
        elif refit is not None:
            from transformers.trainer_utils import IntervalStrategy

            args.num_train_epochs = refit[1] or refit[0]
            args.eval_strategy, args.load_best_model_at_end = IntervalStrategy.NO, False
        else:
            args.num_train_epochs = planned_epochs(recipe, examples_per_epoch(recipe, p.train))
        if sampler is not None:  # the run's one frozen-layer cache, bound to this encoder
            self.frozen = frozen_cache(recipe, p.model, self.frozen)
        callbacks = [stop_after_epochs(refit[0])] if refit is not None else []
        callbacks += [EarlyStoppingCallback(patience)] if refit is None and patience else []
        if self.deadline is not None and self.budget_report is not None:
            callbacks.append(stop_at_deadline(self.deadline, self.budget_report["stopped_at_deadline"]))
        return segment_trainer_class()(
            model=p.model,
            args=args,
            train_dataset=segment_dataset(train or p.train),
            eval_dataset=None if refit is not None else segment_dataset(evaluated),
            data_collator=segment_collator(p.tokenizer),
            compute_metrics=compute_metrics,
            callbacks=callbacks,
            pos_weight=positive_weights(s.loss_weights, p.labels, p.train.segment_labels),
            focal_gamma=s.focal_gamma,
            epoch_sampler=sampler,
            frozen_cache=self.frozen if sampler is not None else None,
        )

    def curve_selects(self, recipe: SegmentClassificationRecipe, prepared: SegmentPrepared) -> bool:
        # Evaluated on held-out training documents: they choose the checkpoint; a dev curve only reports.
        # Segment inputs: the encoder's own segment AUPR chooses it, which the curve does not score.
        return (
            prepared.evaluation.on_dev
            and recipe.segments.encoder_input == "windows"
            and super().curve_selects(recipe, prepared)
        )

    def _meta(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared) -> ModelMeta:
        s = recipe.segments
        return model_meta(
            task=recipe.task,
            # multi_label: labels are decided independently and their spans may overlap.
            **LabelSpace(tuple(p.labels), multi_label=True).to_meta(),
            max_length=recipe.model.max_length,
            stride=recipe.model.stride,
            min_overlap=s.min_overlap,
            linear_prior=LINEAR_FILE if p.linear is not None else None,
            combination=None,  # combination=fitted: written by `evaluate`, fitted on the held-out documents
            **(
                {"segment_tokens": s.segment_tokens, "context_tokens": s.context_tokens}
                if s.encoder_input == "segments"
                else {}
            ),
            clause_starts=STARTS_FILE if p.linear is not None and p.linear.starts is not None else None,
        )

    def predictor(self, recipe: SegmentClassificationRecipe, p: SegmentPrepared, model) -> SegmentClassifier:
        device = str(next(model.parameters()).device)
        classifier = SegmentClassifier(model, p.tokenizer, self._meta(recipe, p), device, prior=p.linear)
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
        if p.linear is not None:
            p.linear.save_files(directory, LINEAR_FILE)

    # 4. combine, 5. evaluate -------------------------------------------------------------------------------

    def evaluate(
        self, recipe: SegmentClassificationRecipe, run_dir: Path, p: SegmentPrepared, trained: Trained
    ) -> tuple[dict, dict]:
        classifier = SegmentClassifier.load(run_dir)  # score exactly what was saved
        classifier.autocast = preferred_autocast(recipe.eval.precision, classifier.device)
        out_of_fold = trained.out_of_fold if isinstance(trained, SegmentTrained) else None
        choice = p.strategy.choose(recipe, classifier, p, out_of_fold, run_dir / MODEL_DIR)
        # The dev documents are read by the encoder once: the final model's scores and the encoder alone's.
        texts = [r.text for r in p.dev_records]
        segments, encoder = classifier.score_encoder(texts, recipe.train.eval_batch_size)
        final = classifier.scores_from_encoder(texts, segments, encoder)
        metrics, info = score_segment_model(
            recipe, run_dir, classifier, p.dev_records, p.labels, recipe.train.eval_batch_size, choice.thresholds, final
        )
        info.update(choice.record)
        if choice.thresholds is not None:
            info.update(p.strategy.tuning_note(recipe, p))
        if p.linear is not None:
            linear = p.linear.score(texts)
            info["linear_prior_alone_dev"] = linear_alone(recipe, p, linear)
            if choice.encoder_thresholds is not None:
                # Three models on dev, each at thresholds chosen on training documents: the linear model alone (out
                # of fold), the encoder alone (held out) and the final model (metrics' headline).
                alone = SegmentScores(segments, [sigmoid(x) for x in encoder])
                metrics["models"] = {
                    "linear": model_figures(p.linear, linear, p.linear_thresholds, p.dev_records, recipe),
                    "encoder": model_figures(classifier, alone, choice.encoder_thresholds, p.dev_records, recipe),
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
            **trained.notes,  # hard_negatives, cross_fitting
            **({"budget": self.budget_report} if self.budget_report is not None else {}),
        }


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the encoder reads: windows of model.max_length tokens over each document, or (encoder_input=segments)
    one input per segment with a little context, trained alone (no linear logits added)."""

    recipe: SegmentClassificationRecipe
    tokenizer: object
    labels: list[str]

    @property
    def segment_inputs(self) -> bool:
        return self.recipe.segments.encoder_input == "segments"

    def training(self, records: list[SpanRecord]):
        """(inputs, report, the clause-free windows windows.negative_ratio left out: the hard-negative pool)."""
        if self.segment_inputs:
            inputs, report = self.evaluation(records)
            return inputs, report, inputs.subset([])
        m, s = self.recipe.model, self.recipe.segments
        negatives, seed = self.recipe.windows.negative_ratio, self.recipe.seed
        return segment_features(
            self.tokenizer, records, self.labels, m.max_length, m.stride, s.min_overlap, negatives, seed
        )

    def evaluation(self, records: list[SpanRecord]):
        """(inputs, report) of every window or segment of `records`."""
        m, s = self.recipe.model, self.recipe.segments
        if self.segment_inputs:
            return segment_input_features(
                self.tokenizer, records, self.labels, s.segment_tokens, s.context_tokens, s.min_overlap
            )
        windows, report, _ = segment_features(
            self.tokenizer, records, self.labels, m.max_length, m.stride, s.min_overlap
        )
        return windows, report


def linear_alone(recipe: SegmentClassificationRecipe, p: SegmentPrepared, linear: SegmentScores) -> dict:
    """What the encoder adds: the linear model alone on the same dev documents, scored the same way."""
    texts, golds = [r.text for r in p.dev_records], [r.spans for r in p.dev_records]
    alone = cross_fitted_summary(p.linear, linear, texts, golds, p.labels, recipe.eval.jaccard_threshold)
    return {k: round(v, 4) for k, v in alone.items()}
