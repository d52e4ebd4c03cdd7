#!/usr/bin/env bash
# Issue 58: what each lever of segment-input training costs per epoch on one selection set's training
# documents (the plain loop of bench/train_throughput.py over the recipe's own dataloader, --steps batches,
# seconds per step times the epoch's steps). Levers, each against the defaults:
#   sampled negatives (segments.negatives_per_positive=3) vs every segment each epoch (=null);
#   length buckets vs random order; bf16 autocast vs fp32 (only where the CPU has bf16 units);
#   model.train_layers=3 (embeddings and the lower 3 layers frozen) vs every weight, without the frozen-layer cache,
#   and with it: the pass that fills it (an input's first epoch) and the pass that replays it (later epochs).
# Needs bench/out/unseen_sets/data (bench/unseen_clause_sets.py). Run alone: about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=${SET:-select_license_80}
R=bench/out/unseen_sets/data/$SET/recipe.yaml
OUT=${OUT:-bench/out/segment_levers_$SET.jsonl}
STEPS=${STEPS:-30}
# Segment inputs at the issue-58 defaults; the linear prior is not fitted (it does not change the inputs).
BASE="segments.encoder_input=segments windows.negative_ratio=null segments.loss_weights=none segments.linear_prior=false
segments.clause_starts=false segments.combination=sum segments.thresholds=tuned train.batch_size=16 ${EXTRA:-}"
: > "$OUT"
run() {  # name, then extra arguments
  local name=$1; shift
  # shellcheck disable=SC2086
  .venv/bin/python bench/train_throughput.py "$R" $BASE "$@" --steps "$STEPS" --plain-only \
    | tail -1 | .venv/bin/python -c "import json,sys; r=json.load(sys.stdin); r['lever']='$name'; print(json.dumps(r))" >> "$OUT"
}
run defaults
run every_segment segments.negatives_per_positive=null
run random_order --no-length-buckets
run fp32 train.precision=fp32
run top3_layers model.train_layers=3 segments.cache_frozen_layers=false
run top3_cached_fill model.train_layers=3
run top3_cached_replay model.train_layers=3 --second-pass
cat "$OUT"
