#!/usr/bin/env bash
# Distillation on the entity sets (issue 63): a MiniLM student of an mpnet teacher, against MiniLM alone.
#
# The set (fixed before any run):
#   - NCBI-disease: teacher mpnet (ncbi_disease_mlm, 3 epochs), unlabelled text BC5CDR's 1000 training and dev
#     abstracts; BC5CDR: teacher mpnet (bc5cdr_entities_mlm, 3 epochs), unlabelled text NCBI's 692 abstracts.
#     The two corpora share no id and, by the run's own check, no sentence of 40 characters or more with the other's
#     dev set.
#   - Students: MiniLM-L6 with the whole pool, half of it (distill.unlabelled_share=0.5) and none (the training
#     abstracts alone); MiniLM's first 3 layers (model.keep_layers=3) with the whole pool.
#   - Every run trains and scores under prefer_bf16 (bf16 autocast where the CPU has bf16 units, else fp32), the
#     teachers and MiniLM alone included, so that a student and MiniLM alone differ only in what they learn from.
#   - Temperature 2 and gold weight 0.5 (the recipes' defaults), fixed before any run and never tuned here.
#   - Scored on dev (test splits are held back; nothing is chosen on these figures): span F1 with its CI; each
#     student against MiniLM alone by `toolkit compare` (paired bootstrap, 1000 resamples).
#   - Served: each model exported with `--precision auto` and served one abstract a request (serve_bench.py
#     service, 100 dev abstracts, 1 and 32 clients); the L3 student against its HF pipeline (serve_bench.py
#     headline); the two students on the same paths (ncbi_same_path: auto chose openvino_int8_bf16 for one
#     and openvino_int8 for the other on Zen 4).
#
#   bash bench/distill.sh                         # every step, in this order
#   STEPS="ncbi_teacher ncbi_minilm" bash bench/distill.sh
#
# Run alone: training and serving seconds are part of the record.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-bench/out/distill}
BF16="train.precision=prefer_bf16 eval.precision=prefer_bf16"
ALL="ncbi_teacher ncbi_minilm ncbi_student ncbi_student_half ncbi_student_none ncbi_student_l3 ncbi_compare ncbi_served
ncbi_same_path ncbi_student_6ep ncbi_minilm_10ep bc5cdr_teacher bc5cdr_minilm bc5cdr_student bc5cdr_compare bc5cdr_served"
STEPS=${STEPS:-$ALL}
mkdir -p "$OUT"
NCBI_DEV=../shared/data/ncbi_disease/dev.jsonl
BC5CDR_DEV=../shared/data/bc5cdr/dev.jsonl

run() {  # run NAME RECIPE OVERRIDES...
  local name=$1 recipe=$2
  shift 2
  echo "== $name ($(date -u +%H:%M:%S))"
  $T run "$recipe" "name=$name" "output_dir=$OUT" "$@" --overwrite || echo "FAILED: $name"
  echo "== $name done ($(date -u +%H:%M:%S))"
}

seed() {  # seed RUN FROM: a student of FROM's teacher starts with its labels (teacher_outputs.npz: the cache is
  # keyed by text and teacher, so only documents FROM did not read are labelled); the record notes the seconds saved
  if [ -f "$OUT/$2/teacher_outputs.npz" ] && [ ! -f "$OUT/$1/metrics.json" ]; then
    mkdir -p "$OUT/$1" && cp "$OUT/$2/teacher_outputs.npz" "$OUT/$1/"
  fi
}

served() {  # served RUN: the exported run served one abstract a request, and the record's JSON
  local run=$1 dev=$2
  head -100 "$dev" > "$OUT/dev100_$(basename "$(dirname "$dev")").jsonl"
  $PY bench/serve_bench.py service "$OUT/$run" --data "$OUT/dev100_$(basename "$(dirname "$dev")").jsonl" \
    --precision auto --clients 1 32 --requests-per-client 20 && cp bench/out/serve_service.json "$OUT/${run}_served.json"
}

for s in $STEPS; do
  case $s in
    ncbi_teacher) run ncbi_disease_mpnet recipes/ncbi_disease_mlm.yaml model.name=mpnet train.epochs=3 $BF16 ;;
    ncbi_minilm) run ncbi_disease_minilm recipes/ncbi_disease_mlm.yaml $BF16 ;;
    ncbi_student) run ncbi_distill recipes/ncbi_disease_distill_mlm.yaml "distill.teacher=$OUT/ncbi_disease_mpnet" ;;
    ncbi_student_half) seed ncbi_distill_half ncbi_distill; run ncbi_distill_half recipes/ncbi_disease_distill_mlm.yaml \
      "distill.teacher=$OUT/ncbi_disease_mpnet" distill.unlabelled_share=0.5 ;;
    ncbi_student_none) seed ncbi_distill_none ncbi_distill; run ncbi_distill_none recipes/ncbi_disease_distill_mlm.yaml \
      "distill.teacher=$OUT/ncbi_disease_mpnet" "distill.unlabelled=[]" ;;
    ncbi_student_l3) seed ncbi_distill_l3 ncbi_distill; run ncbi_distill_l3 recipes/ncbi_disease_distill_mlm.yaml \
      "distill.teacher=$OUT/ncbi_disease_mpnet" model.keep_layers=3 ;;
    ncbi_compare) $T compare "$OUT"/{ncbi_disease_minilm,ncbi_distill,ncbi_distill_half,ncbi_distill_none,ncbi_distill_l3} \
      --data "$NCBI_DEV" --reuse-predictions --out "$OUT/ncbi_compare" || echo "FAILED: $s" ;;
    ncbi_served)
      for r in ncbi_disease_minilm ncbi_distill ncbi_distill_l3; do served $r "$NCBI_DEV" || echo "FAILED: served $r"; done
      $PY bench/serve_bench.py headline "$OUT/ncbi_distill_l3" --data "$OUT/dev100_ncbi_disease.jsonl" --rounds 3 \
        && cp bench/out/serve_headline.json "$OUT/ncbi_distill_l3_headline.json" || echo "FAILED: headline" ;;
    ncbi_same_path)  # `auto` may choose another path per model: the students compared on each path auto chose
      for p in openvino_int8_bf16 openvino_int8; do
        for r in ncbi_distill ncbi_distill_l3; do
          $PY bench/serve_bench.py service "$OUT/$r" --data "$OUT/dev100_ncbi_disease.jsonl" --precision $p \
            --clients 1 32 --requests-per-client 100 && cp bench/out/serve_service.json "$OUT/${r}_served100_$p.json" \
            || echo "FAILED: $r on $p"
        done
      done ;;
    ncbi_student_6ep)  # added after the 4-epoch student was still rising: 6 epochs, the most the 60-min budget holds
      seed ncbi_distill_6ep ncbi_distill; run ncbi_distill_6ep recipes/ncbi_disease_distill_mlm.yaml \
        "distill.teacher=$OUT/ncbi_disease_mpnet" train.epochs=6
      $T compare "$OUT"/{ncbi_distill_6ep,ncbi_disease_minilm,ncbi_distill} --data "$NCBI_DEV" --reuse-predictions \
        --out "$OUT/ncbi_compare_6ep" || echo "FAILED: $s" ;;
    ncbi_minilm_10ep)  # MiniLM alone was still rising at epoch 6: does the baseline catch the 6-epoch student?
      run ncbi_disease_minilm_10ep recipes/ncbi_disease_mlm.yaml train.epochs=10 $BF16
      $T compare "$OUT"/{ncbi_distill_6ep,ncbi_disease_minilm_10ep,ncbi_distill} --data "$NCBI_DEV" --reuse-predictions \
        --out "$OUT/ncbi_compare_10ep" || echo "FAILED: $s" ;;
    bc5cdr_teacher) run bc5cdr_mpnet recipes/bc5cdr_entities_mlm.yaml model.name=mpnet train.epochs=3 $BF16 ;;
    bc5cdr_minilm) run bc5cdr_minilm recipes/bc5cdr_entities_mlm.yaml $BF16 ;;
    bc5cdr_student) run bc5cdr_distill recipes/bc5cdr_entities_distill_mlm.yaml "distill.teacher=$OUT/bc5cdr_mpnet" ;;
    bc5cdr_compare) $T compare "$OUT"/{bc5cdr_minilm,bc5cdr_distill} --data "$BC5CDR_DEV" --reuse-predictions \
      --out "$OUT/bc5cdr_compare" || echo "FAILED: $s" ;;
    bc5cdr_served)
      for r in bc5cdr_minilm bc5cdr_distill; do served $r "$BC5CDR_DEV" || echo "FAILED: served $r"; done ;;
    *) echo "unknown step $s; known: $ALL" >&2; exit 1 ;;
  esac
done
