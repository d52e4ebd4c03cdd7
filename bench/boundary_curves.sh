#!/usr/bin/env bash
# MLM vs CLM on clause boundaries, each system read at its plateau (issue 62).
#
# The set (fixed before any run; every system trains and is scored on it):
#   - CUAD's four quick clause types (Governing Law, Anti-Assignment, Cap On Liability, Termination For
#     Convenience), as recipes/cuad_clauses_*.yaml;
#   - training: the first 40 contracts of ../shared/data/cuad/train.jsonl (data.max_train_docs=40; 160 clauses
#     of these types), so that every system, a decoder included, can train for several epochs on 2 cores;
#   - learning-curve points: the first 10 dev contracts (eval.curve_docs=10), the same for every system;
#   - the answer: all 51 dev contracts (218 clauses of these types, pooled over labels), scored once per
#     system, by the model at its plateau.
# The curve is read at doubling budgets (train.eval_every=doubling: after epochs 1, 2, 4, 8, ...) under a
# constant learning rate after a short warmup (train.lr_schedule=constant), so the model after N epochs is what
# an N-epoch run gives. The plateau rule (train.plateau): stop once the last doubling added less to both-ends
# boundary recall within +/-3 words than half the width of its 95% CI, never before 4 epochs. A system that
# reaches its cap (train.epochs) or its seconds (train.max_seconds) first says so in its run (metrics.json
# run.stopped_at_plateau, stopped_by_time_budget) and its record gives the last doubling's slope.
# The segment classifier stops at its own held-out plateau (every epoch; early_stopping_patience 3) and its
# dev curve is read at its doubling epochs by scripts/results.py curve.
#
#   bash bench/boundary_curves.sh                                   # every system, in this order
#   SYSTEMS="minilm_tagger smollm2_segments" bash bench/boundary_curves.sh
#
# Run alone (a busy core changes step times, so seconds to plateau). Then record each run and the comparison:
#   python scripts/results.py curve bench/out/boundaries/<system> --table "$TABLE" ...
#   python scripts/results.py compare bench/out/boundaries/compare --table "$TABLE" ...
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/out/boundaries}
ALL="minilm_tagger smollm2_segments minilm_segments linear_prior smollm2_tagger smollm2_anchors gemma_tagger throughput"
SYSTEMS=${SYSTEMS:-$ALL}

SET=(data.max_train_docs=40 data.max_dev_docs=null eval.curve_docs=10 "output_dir=$OUT")
DOUBLING=(train.eval_every=doubling train.lr_schedule=constant train.warmup_steps=20 train.max_steps=-1
  train.early_stopping_patience=null "train.plateau.metric=boundary_both_within_3_recall" train.plateau.min_epochs=4
  train.precision=prefer_bf16)
CLS=(eval.precision=prefer_bf16)
GEN=(generation.precision=prefer_bf16)
# A decoder as a tagger: LoRA on every attention and MLP projection with a fresh head (LS-LLaMA's setting).
LORA=(model.lora.enabled=true model.lora.r=16 model.lora.alpha=32 model.lora.dropout=0.05
  "model.lora.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]" train.learning_rate=5e-4)

run() {  # run NAME RECIPE OVERRIDES...
  local name=$1 recipe=$2
  shift 2
  echo "== $name ($(date -u +%H:%M:%S))"
  # One system failing (e.g. out of memory) leaves the others standing; the log says which.
  $T run "$recipe" "name=$name" "${SET[@]}" "$@" --overwrite || echo "FAILED: $name"
  echo "== $name done ($(date -u +%H:%M:%S))"
}

for s in $SYSTEMS; do
  case $s in
    minilm_tagger) run $s recipes/cuad_clauses_mlm.yaml "${DOUBLING[@]}" "${CLS[@]}" train.epochs=64 train.max_seconds=3000 ;;
    smollm2_segments)
      run $s recipes/cuad_clauses_clm.yaml "${DOUBLING[@]}" "${GEN[@]}" train.epochs=16 train.max_seconds=1800 ;;
    smollm2_anchors)
      run $s recipes/cuad_clauses_clm.yaml "${DOUBLING[@]}" "${GEN[@]}" generation.target=anchors \
        generation.max_new_tokens=160 train.epochs=16 train.max_seconds=1800 ;;
    minilm_segments)  # the segment classifier alone: no linear prior; thresholds cross-fitted, as the recipe's
      run $s recipes/cuad_clauses_segments_mlm.yaml "${CLS[@]}" segments.linear_prior=false \
        segments.clause_starts=false segments.combination=sum ;;
    linear_prior)  # the prior alone, the same segment decisions
      echo "== $s ($(date -u +%H:%M:%S))"
      $T run recipes/cuad_clauses_segments_mlm.yaml --linear-baseline "name=$s" "${SET[@]}" --overwrite \
        || echo "FAILED: $s" ;;
    smollm2_tagger)
      run $s recipes/cuad_clauses_mlm.yaml model.name=smollm2 "${LORA[@]}" "${DOUBLING[@]}" "${CLS[@]}" \
        train.epochs=16 train.max_seconds=1800 ;;
    gemma_tagger)
      run $s recipes/cuad_clauses_mlm.yaml model.name=gemma3-270m "${LORA[@]}" "${DOUBLING[@]}" "${CLS[@]}" \
        train.epochs=16 train.max_seconds=1800 ;;
    throughput)  # a decoder epoch's cost: the generator's Trainer against a plain loop, bf16 and fp32, and
      # without length buckets (train_throughput.py: the same batches; records with results.py throughput)
      echo "== $s ($(date -u +%H:%M:%S))"
      for variant in "train.precision=prefer_bf16" "train.precision=fp32" "train.precision=prefer_bf16 train.group_by_length=false"; do
        # shellcheck disable=SC2086
        .venv/bin/python bench/train_throughput.py recipes/cuad_clauses_clm.yaml data.max_train_docs=40 $variant \
          --steps 20 | tail -1 >> "$OUT/throughput.jsonl" || echo "FAILED: throughput $variant"
      done ;;
    *) echo "unknown system $s; known: $ALL" >&2; exit 1 ;;
  esac
done
