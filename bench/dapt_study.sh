#!/usr/bin/env bash
# Domain-adaptive pre-training studies (issue 6), one run after another; needs ../shared/data.
#   bench/dapt_study.sh base      # (a) NCBI-disease fine-tuned from the MiniLM adapted on BC5CDR abstracts
#   bench/dapt_study.sh masking   # (b) masking rate 10/15/20/25%: adapt, then fine-tune on NCBI-disease
#   bench/dapt_study.sh cuad      # (a) CUAD subset fine-tuned from the MiniLM adapted on contracts
# The base-model figures come from bench/run_mlm_bench.sh (same fine-tuning recipes).
# (c), embedding dropout x learning rate, is recipes/ncbi_disease_dropout_lr_mlm.yaml.
# Results: bench/results/dapt/*; summary lines in bench/results/dapt/study.log.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/toolkit
OUT=bench/results/dapt
mkdir -p $OUT
summary() {  # run dir -> one line of downstream dev figures
  .venv/bin/python - "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/metrics.json"))
s = m["summary"]
print(sys.argv[1], json.dumps({k: s[k] for k in ("span_f1", "span_recall", "boundary_both_recall", "jaccard_recall")}),
      "train_seconds", m["run"]["train_seconds"])
PY
}
case "${1:-base}" in
  base)
    $T run recipes/bc5cdr_domain_pretrain_mlm.yaml output_dir=$OUT --overwrite
    $T run recipes/ncbi_disease_mlm.yaml output_dir=$OUT name=ncbi_from_bc5cdr_domain model.name=$OUT/bc5cdr_domain_pretrain_mlm/model --overwrite
    summary $OUT/ncbi_from_bc5cdr_domain | tee -a $OUT/study.log
    ;;
  masking)
    $T run recipes/bc5cdr_masking_pretrain_mlm.yaml output_dir=$OUT --overwrite
    for trial in $OUT/bc5cdr_masking_pretrain_mlm/trials/*/; do
      name=ncbi_from_$(basename "$trial")
      $T run recipes/ncbi_disease_mlm.yaml output_dir=$OUT name=$name model.name=${trial}model --overwrite
      summary $OUT/$name | tee -a $OUT/study.log
    done
    ;;
  cuad)
    $T run recipes/cuad_domain_pretrain_mlm.yaml output_dir=$OUT --overwrite
    $T run recipes/cuad_clauses_mlm.yaml output_dir=$OUT name=cuad_from_cuad_domain model.name=$OUT/cuad_domain_pretrain_mlm/model --overwrite
    summary $OUT/cuad_from_cuad_domain | tee -a $OUT/study.log
    ;;
esac
