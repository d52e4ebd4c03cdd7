#!/usr/bin/env bash
# Issue 75's estimate and budget targets, on the sets the targets name (bench/unseen_clause_sets.py), in fp32 (the
# cost targets' precision). Needs ../shared/data/cuad. Run alone.
#   ROLE=estimate (default): for each set, `toolkit run --dry-run` (the estimate, saved as <set>.plan.json), then the
#     same recipe run without its budget (budget=null), timed by /usr/bin/time; `scripts/results.py record
#     --estimate` makes the record from the two. About 80 minutes on 2 CPU cores for both sets.
#   ROLE=half: the recipe given half the expected seconds of its <set>.plan.json as budget.seconds (run
#     ROLE=estimate first); the record says what the budget gave up, and how the run scored against the linear
#     baseline (bench/unseen_sets.sh writes that one).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/out/estimate_check}
DATA=${DATA:-bench/out/unseen_sets/data}
ROLE=${ROLE:-estimate}
mkdir -p "$OUT"
lscpu | grep -E "Model name|Flags" > "$OUT/cpu.txt"
[ -d "$DATA/select_terms_35" ] || .venv/bin/python bench/unseen_clause_sets.py "$DATA" > "$OUT/sets.txt"
for SET in ${SETS:-select_terms_35 select_license_80}; do
  R=$DATA/$SET/recipe.yaml
  if [ "$ROLE" = half ]; then
    HALF=$(.venv/bin/python -c "import json,sys; print(round(json.load(open(sys.argv[1]))['cost_estimate']['seconds']['expected'] / 2))" "$OUT/$SET.plan.json")
    /usr/bin/time -f "%e s" -o "$OUT/${SET}_half.time" $T run "$R" output_dir="$OUT" --overwrite name="${SET}_half" \
      train.precision=fp32 budget.seconds="$HALF" > "$OUT/${SET}_half.log" 2>&1
    continue
  fi
  $T run "$R" --dry-run --estimate output_dir="$OUT" name="$SET" train.precision=fp32 budget=null \
    > "$OUT/$SET.plan.json" 2> "$OUT/$SET.plan.log"
  /usr/bin/time -f "%e s" -o "$OUT/$SET.time" $T run "$R" output_dir="$OUT" --overwrite name="$SET" \
    train.precision=fp32 budget=null > "$OUT/$SET.log" 2>&1
done
