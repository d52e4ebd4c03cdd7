#!/usr/bin/env bash
# Issue 75's estimate target: the dry-run's expected wall time for the unbudgeted plan against the wall time of
# that run, on the sets the target names (select_terms_35 and select_license_80, bench/unseen_clause_sets.py).
# For each set: `toolkit run --dry-run` (the estimate, saved as <set>.plan.json), then the same recipe run
# without its budget (budget=null), timed by /usr/bin/time. Both in fp32, the cost targets' precision.
# `scripts/results.py estimate` makes the record from the two. Needs ../shared/data/cuad. Run alone: about
# 80 minutes on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/out/estimate_check}
DATA=${DATA:-bench/out/unseen_sets/data}
mkdir -p "$OUT"
lscpu | grep -E "Model name|Flags" > "$OUT/cpu.txt"
[ -d "$DATA/select_terms_35" ] || .venv/bin/python bench/unseen_clause_sets.py "$DATA" > "$OUT/sets.txt"
for SET in ${SETS:-select_terms_35 select_license_80}; do
  R=$DATA/$SET/recipe.yaml
  $T run "$R" --dry-run --estimate output_dir="$OUT" name="$SET" train.precision=fp32 budget=null \
    > "$OUT/$SET.plan.json" 2> "$OUT/$SET.plan.log"
  /usr/bin/time -f "%e s" -o "$OUT/$SET.time" $T run "$R" output_dir="$OUT" --overwrite name="$SET" \
    train.precision=fp32 budget=null > "$OUT/$SET.log" 2>&1
done
