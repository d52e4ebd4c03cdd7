#!/usr/bin/env bash
# Runs the MLM-track benchmarks one after another (about 75 minutes on 2 CPU cores).
# Needs ../shared/data. Results: bench/out/*.json; summary lines in bench/out/mlm_bench.log.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
for recipe in recipes/ncbi_disease_mlm.yaml recipes/cuad_clauses_mlm.yaml; do
  for variant in toolkit baseline; do
    $PY bench/mlm_bench.py "$variant" "$recipe" 2>>bench/out/mlm_bench.stderr | tee -a bench/out/mlm_bench.log
  done
done
