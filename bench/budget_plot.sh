#!/usr/bin/env bash
# Every system on one budget plot (issue 29): the encoder tagger and segment classifier (MiniLM), and for each
# decoder (SmolLM2-135M, Gemma 3 270M) generation, the tagger with causal and with bidirectional attention,
# and the segment classifier. Each trains BUDGET seconds of training steps (train.max_seconds, learning rate
# scheduled over the seconds), is scored on the same first DOCS dev documents every BUDGET/POINTS seconds
# (eval.curve_docs), and `toolkit compare --curves` puts them side by side with 95% CIs and inference
# seconds per document. Every system infers at bf16 where the CPU has bf16 units (eval.precision,
# generation.precision), as an export would choose there. A decoder's evaluation costs far more than its
# budget (every window of every document, at each point and at the end), so POINTS defaults to 1.
#
#   DATASET=cuad BUDGET=300 DOCS=10 bash bench/budget_plot.sh      # CUAD's 4 clause types
#   DATASET=ncbi BUDGET=300 DOCS=50 bash bench/budget_plot.sh      # NCBI-disease
#   SYSTEMS="minilm_tagger smollm2_tagger_bidirectional" ...        # a subset (names below)
#
# Needs ../shared/data and `make gemma` for the Gemma systems. Run alone: a busy core changes step times
# and so what each budget buys. Record the runs with scripts/results.py record.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-.venv/bin/toolkit}
DATASET=${DATASET:-cuad}
BUDGET=${BUDGET:-300}
DOCS=${DOCS:-10}
POINTS=${POINTS:-1}
OUT=${OUT:-bench/out/budget_$DATASET}
ALL="minilm_tagger minilm_segments smollm2_generate smollm2_tagger smollm2_tagger_bidirectional smollm2_segments \
gemma_generate gemma_tagger gemma_tagger_bidirectional gemma_segments"
SYSTEMS=${SYSTEMS:-$ALL}

case $DATASET in
  cuad)
    TAGGER=recipes/cuad_clauses_mlm.yaml
    SEGMENTS=recipes/cuad_clauses_segments_mlm.yaml
    GENERATE=recipes/cuad_clauses_clm.yaml
    TOLERANCE=(--tolerance 1 --tolerance 3 --tolerance 10)
    ;;
  ncbi)
    TAGGER=recipes/ncbi_disease_mlm.yaml
    SEGMENTS=""  # segment classification is for clauses: entities are a few words, not runs of segments
    GENERATE=recipes/ncbi_disease_clm.yaml
    TOLERANCE=(--tolerance 1 --tolerance 3)
    ;;
  *) echo "DATASET must be cuad or ncbi" >&2; exit 1 ;;
esac

# The same budget, curve and dev documents for every system; the epoch count is only an upper bound.
COMMON=(
  "train.max_seconds=$BUDGET" "train.eval_every_seconds=$((BUDGET / POINTS))" train.schedule_by=seconds
  train.eval_every=epoch train.max_steps=-1 train.epochs=50 train.early_stopping_patience=null train.precision=prefer_bf16
  "eval.curve_docs=$DOCS" "data.max_dev_docs=$DOCS" "output_dir=$OUT"
)
# Inference precision: classifiers' evaluation, and generation (which serves at the precision it is scored at).
CLS=(eval.precision=prefer_bf16)
GEN=(generation.precision=prefer_bf16)
# LoRA on every attention and MLP projection with a fresh head (LS-LLaMA's setting), at the rate the
# generating recipes use.
LORA=(model.lora.enabled=true model.lora.r=16 model.lora.alpha=32 model.lora.dropout=0.05
  "model.lora.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]" train.learning_rate=5e-4
  train.batch_size=8)

run() {  # run NAME RECIPE OVERRIDES...
  local name=$1 recipe=$2
  shift 2
  if [[ -z $recipe ]]; then echo "skip $name: no such system for $DATASET"; return; fi
  echo "== $name ($(date -u +%H:%M:%S))"
  # One system failing (e.g. out of memory) leaves the others' points standing; the log says which.
  $T run "$recipe" "name=$name" "${COMMON[@]}" "$@" --overwrite || echo "FAILED: $name"
}

for s in $SYSTEMS; do
  case $s in
    minilm_tagger) run $s $TAGGER "${CLS[@]}" ;;
    minilm_segments) run $s "$SEGMENTS" "${CLS[@]}" ;;
    smollm2_generate) run $s $GENERATE model.name=smollm2 "${GEN[@]}" ;;
    smollm2_tagger) run $s $TAGGER model.name=smollm2 "${CLS[@]}" "${LORA[@]}" ;;
    smollm2_tagger_bidirectional)
      run $s $TAGGER model.name=smollm2 "${CLS[@]}" "${LORA[@]}" model.attention=bidirectional ;;
    smollm2_segments) run $s "$SEGMENTS" model.name=smollm2 "${CLS[@]}" "${LORA[@]}" ;;
    gemma_generate) run $s $GENERATE model.name=gemma3-270m "${GEN[@]}" ;;
    gemma_tagger) run $s $TAGGER model.name=gemma3-270m "${CLS[@]}" "${LORA[@]}" ;;
    gemma_tagger_bidirectional)
      run $s $TAGGER model.name=gemma3-270m "${CLS[@]}" "${LORA[@]}" model.attention=bidirectional ;;
    gemma_segments) run $s "$SEGMENTS" model.name=gemma3-270m "${CLS[@]}" "${LORA[@]}" ;;
    *) echo "unknown system $s; known: $ALL" >&2; exit 1 ;;
  esac
done

runs=()
for s in $SYSTEMS; do [[ -f $OUT/$s/curve.jsonl ]] && runs+=("$OUT/$s"); done
$T compare "${runs[@]}" --curves --out "$OUT/compare" "${TOLERANCE[@]}"
