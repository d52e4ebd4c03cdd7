#!/usr/bin/env bash
# Issue 28's held-out clause set: the 4-type CUAD segment recipe copied as a new user would copy it, with
# only its labels and name changed, pointed at four CUAD clause types that no recipe decision looked at
# (Audit Rights, Insurance, Non-Compete, Exclusivity: sentence- and paragraph-level clauses, chosen before
# any run). The recipe's defaults against the linear baseline with the same segment decisions (its
# thresholds out of fold on the training documents), then a paired comparison on dev. LABELS picks another
# set (the second: Minimum Commitment, Revenue/Profit Sharing, Post-Termination Services, Change Of
# Control, chosen before its first run to check the recipe's defaults after they were set on the first).
# Needs ../shared/data/cuad. About 40 minutes on 2 CPU cores, run alone. Figures: docs/benchmarks.md
# (Issue 28).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
OUT=${OUT:-bench/results/heldout_clause_set}
DEV=../shared/data/cuad/dev.jsonl
LABELS=${LABELS:-Audit Rights, Insurance, Non-Compete, Exclusivity}
mkdir -p "$OUT"
R=$OUT/cuad_heldout_segments_mlm.yaml
sed -e "s|^  labels: .*|  labels: [$LABELS]|" \
    -e 's/^name: .*/name: cuad_heldout_segments_mlm/' recipes/cuad_clauses_segments_mlm.yaml > "$R"
grep -qF "labels: [$LABELS]" "$R"
LINEAR=(--linear-baseline segments.thresholds=out_of_fold output_dir="$OUT" --overwrite)
$T run "$R" "${LINEAR[@]}" segments.clause_starts=false name=heldout_linear_plain
$T run "$R" "${LINEAR[@]}" name=heldout_linear
$T run "$R" name=heldout_recipe output_dir="$OUT" --overwrite
$T compare "$OUT/heldout_linear" "$OUT/heldout_recipe" --data $DEV --reuse-predictions --out "$OUT/compare"
