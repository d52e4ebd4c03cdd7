#!/usr/bin/env bash
# Issue 28's held-out clause set: the 4-type CUAD segment recipe copied as a new user would copy it, with
# only its labels and name changed, pointed at four CUAD clause types that no recipe decision looked at
# (Audit Rights, Insurance, Non-Compete, Exclusivity: sentence- and paragraph-level clauses, chosen before
# any run). The recipe's defaults against the linear baseline with the same segment decisions, then a
# paired comparison on dev (thresholds cross-fitted over dev's halves). Needs ../shared/data/cuad. About
# 40 minutes on 2 CPU cores, run alone. Figures: docs/benchmarks.md (Issue 28).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/results/heldout_clause_set}
DEV=../shared/data/cuad/dev.jsonl
mkdir -p "$OUT"
R=$OUT/cuad_heldout_segments_mlm.yaml
sed -e 's/^  labels: .*/  labels: [Audit Rights, Insurance, Non-Compete, Exclusivity]/' \
    -e 's/^name: .*/name: cuad_heldout_segments_mlm/' recipes/cuad_clauses_segments_mlm.yaml > "$R"
grep -q 'labels: \[Audit Rights' "$R"
$T run "$R" --linear-baseline segments.clause_starts=false name=heldout_linear_plain output_dir="$OUT" --overwrite
$T run "$R" --linear-baseline name=heldout_linear output_dir="$OUT" --overwrite
$T run "$R" name=heldout_recipe output_dir="$OUT" --overwrite
$T compare "$OUT/heldout_linear" "$OUT/heldout_recipe" --data $DEV --reuse-predictions --out "$OUT/compare"
