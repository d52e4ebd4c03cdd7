#!/usr/bin/env bash
# Issue 28's clause levers on CUAD's four quick types (needs ../shared/data/cuad), one run at a time, alone.
# recipes/cuad_clauses_segments_mlm.yaml holds the configuration chosen (linear prior, clause starts,
# negative_ratio 2, one epoch, unweighted loss, thresholds on held-out training documents); the other runs
# switch levers off. Figures: docs/benchmarks.md (Issue 28). About 3 hours on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/toolkit
R=recipes/cuad_clauses_segments_mlm.yaml
OUT=${OUT:-bench/results/segment_levers}
DEV=../shared/data/cuad/dev.jsonl
OLD_MIX="windows.negative_ratio=0.5 train.epochs=2"   # the recipe's mix before issue 28
DEV_TUNED="segments.loss_weights=balanced segments.thresholds=tuned"   # the recipe before its third session
# The linear baseline with thresholds chosen on dev (as in the issue) and out of fold (the recipe's baseline now).
$T run $R --linear-baseline segments.clause_starts=false segments.thresholds=tuned name=cuad4_linear output_dir=$OUT --overwrite
$T run $R --linear-baseline segments.thresholds=tuned name=cuad4_linear_starts output_dir=$OUT --overwrite
$T run $R --linear-baseline segments.clause_starts=false name=cuad4_linear_oof output_dir=$OUT --overwrite
$T run $R --linear-baseline name=cuad4_linear_starts_oof output_dir=$OUT --overwrite
$T run $R $DEV_TUNED $OLD_MIX segments.clause_starts=false name=cuad4_prior output_dir=$OUT --overwrite
$T run $R $DEV_TUNED segments.clause_starts=false name=cuad4_prior_neg2 output_dir=$OUT --overwrite
$T run $R $DEV_TUNED name=cuad4_prior_neg2_starts output_dir=$OUT --overwrite
$T run $R segments.thresholds=tuned name=cuad4_prior_neg2_starts_unweighted output_dir=$OUT --overwrite
$T run $R name=cuad4_held_out_unweighted output_dir=$OUT --overwrite   # the recipe as it stands
$T run $R data.max_train_docs=80 --linear-baseline segments.clause_starts=false segments.thresholds=tuned name=cuad80_linear output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 --linear-baseline segments.thresholds=tuned name=cuad80_linear_starts output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 $DEV_TUNED $OLD_MIX segments.clause_starts=false name=cuad80_prior output_dir=$OUT --overwrite
$T run $R data.max_train_docs=80 $DEV_TUNED $OLD_MIX name=cuad80_prior_starts output_dir=$OUT --overwrite
for run in cuad4_linear_starts cuad4_prior_neg2_starts cuad4_held_out_unweighted; do
  $T compare $OUT/cuad4_linear $OUT/$run --data $DEV --reuse-predictions --out $OUT/compare_$run
done
$T compare $OUT/cuad4_linear_starts $OUT/cuad4_prior_neg2_starts --data $DEV --reuse-predictions --out $OUT/compare_starts_both
$T compare $OUT/cuad4_linear_starts_oof $OUT/cuad4_held_out_unweighted --data $DEV --reuse-predictions --out $OUT/compare_held_out
