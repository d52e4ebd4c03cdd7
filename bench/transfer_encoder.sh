#!/usr/bin/env bash
# Issue 61: the transfer start. An encoder trained as a segment classifier on every CUAD training contract with
# the 21 clause types of none of the four unseen sets (bench/unseen_clause_sets.py: transfer_other_types), so a
# set's labels can start from a model that has learned what clauses look like, and never from one that saw
# its types. A share of the training contracts is held out: training stops at their plateau (macro AUPR over
# segments), so no dev document chooses anything. Then: SELECT_VARIANTS=transfer bash bench/unseen_sets.sh.
# Needs ../shared/data/cuad. Run alone: about 35 minutes on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/out/unseen_sets}
mkdir -p "$OUT"
lscpu | grep -E "Model name|Flags" > "$OUT/cpu.txt"
.venv/bin/python bench/unseen_clause_sets.py "$OUT/data" > "$OUT/sets.txt"
# The encoder alone (no linear prior, nothing combined): the segment-input defaults of the clause recipe, at most
# 10 epochs or 25 minutes of training steps (its record says which ended it, and how steep its curve still was).
/usr/bin/time -f "%e s" -o "$OUT/transfer.time" $T run "$OUT/data/transfer_other_types/recipe.yaml" \
  output_dir="$OUT" --overwrite name=transfer segments.linear_prior=false segments.clause_starts=false \
  segments.combination=sum segments.held_out_share=0.2 train.epochs=10 train.max_seconds=1500 > "$OUT/transfer.log" 2>&1
