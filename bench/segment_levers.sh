#!/usr/bin/env bash
# Issue 28's clause levers on CUAD's four quick types (needs ../shared/data/cuad), one run at a time, alone.
# recipes/cuad_clauses_segments_mlm.yaml now holds the best configuration measured (linear prior, clause
# starts, negative_ratio 2, one epoch); the other runs switch levers off. Figures: docs/benchmarks.md
# (Issue 28). About 2 hours on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/toolkit
R=recipes/cuad_clauses_segments_mlm.yaml
OUT=${OUT:-bench/results/segment_levers}
DEV=../shared/data/cuad/dev.jsonl
OLD_MIX="windows.negative_ratio=0.5 train.epochs=2"   # the recipe's mix before issue 28
$T run $R --linear-baseline segments.clause_starts=false name=cuad4_linear output_dir=$OUT --overwrite
$T run $R --linear-baseline name=cuad4_linear_starts output_dir=$OUT --overwrite
$T run $R $OLD_MIX segments.clause_starts=false name=cuad4_prior output_dir=$OUT --overwrite
$T run $R segments.clause_starts=false name=cuad4_prior_neg2 output_dir=$OUT --overwrite
$T run $R name=cuad4_prior_neg2_starts output_dir=$OUT --overwrite
# Thresholds chosen on 10% of the training documents kept out of training (dev only reports), with the loss
# unweighted (whose dev-tuned thresholds overfit) and balanced.
$T run $R segments.thresholds=held_out segments.loss_weights=none name=cuad4_held_out_unweighted output_dir=$OUT --overwrite
$T run $R segments.thresholds=held_out name=cuad4_held_out_balanced output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 --linear-baseline segments.clause_starts=false name=cuad80_linear output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 --linear-baseline name=cuad80_linear_starts output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 $OLD_MIX segments.clause_starts=false name=cuad80_prior output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 $OLD_MIX name=cuad80_prior_starts output_dir=$OUT --overwrite
for run in cuad4_linear_starts cuad4_prior_neg2_starts cuad4_held_out_unweighted cuad4_held_out_balanced; do
  $T compare $OUT/cuad4_linear $OUT/$run --data $DEV --reuse-predictions --out $OUT/compare_$run
done
$T compare $OUT/cuad4_linear_starts $OUT/cuad4_prior_neg2_starts --data $DEV --reuse-predictions --out $OUT/compare_starts_both
