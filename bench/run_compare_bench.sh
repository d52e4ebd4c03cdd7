#!/usr/bin/env bash
# MLM vs CLM with `toolkit compare` (needs ../shared/data and the MLM bench runs of
# bench/run_mlm_bench.sh). CLM runs are sized for 2 CPU cores; record the compared runs with scripts/results.py record.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/toolkit
OUT=bench/out
$T run recipes/ncbi_disease_clm.yaml output_dir=$OUT --overwrite
$T compare $OUT/ncbi_disease_mlm_bench $OUT/ncbi_disease_clm --data ../shared/data/ncbi_disease/dev.jsonl --out $OUT/compare_ncbi --reuse-predictions
$T run recipes/cuad_clauses_clm.yaml output_dir=$OUT --overwrite
$T compare $OUT/cuad_clauses_mlm_bench $OUT/cuad_clauses_clm --data ../shared/data/cuad/dev.jsonl --max-docs 10 --out $OUT/compare_cuad --tolerance 1 --tolerance 3 --tolerance 10
