#!/usr/bin/env bash
# The fast tier timed at two revisions, alternating, three times each, in one run on the same machine (a refactor's
# "no slower" check: issue 73 asks the median within 5% of the median before it). Each revision runs from its own
# worktree with this checkout's .venv (PYTHONPATH puts the worktree's toolkit first). Run alone: nothing else on
# the cores. Writes bench/out/fast_tier_ab.json and records each median (scripts/results.py timing).
#   bash bench/fast_tier_ab.sh BASE HEAD
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=$1
HEAD=${2:-HEAD}
OUT=$ROOT/bench/out/fast_tier_ab
mkdir -p "$OUT"
lscpu | grep -E "Model name|Flags"
uptime
for REV in "$BASE" "$HEAD"; do
  rm -rf "$OUT/$REV"
  git -C "$ROOT" worktree add -f --detach "$OUT/$REV" "$REV" > /dev/null
done
declare -A SECONDS_OF
for ROUND in 1 2 3; do
  for REV in "$BASE" "$HEAD"; do
    cd "$OUT/$REV"
    t0=$(date +%s.%N)
    OMP_NUM_THREADS=1 PYTHONPATH="$OUT/$REV" "$ROOT/.venv/bin/python" -m pytest -q -n 2 --dist loadfile -p no:cacheprovider \
      > "$OUT/$REV.round$ROUND.log" 2>&1 || { tail -20 "$OUT/$REV.round$ROUND.log"; exit 1; }
    t1=$(date +%s.%N)
    SECONDS_OF[$REV]="${SECONDS_OF[$REV]:-} $(python3 -c "print(round($t1 - $t0, 1))")"
    echo "round $ROUND $REV: $(tail -1 "$OUT/$REV.round$ROUND.log") ($(echo "${SECONDS_OF[$REV]}" | awk '{print $NF}') s)"
  done
done
cd "$ROOT"
for REV in "$BASE" "$HEAD"; do git worktree remove --force "$OUT/$REV"; done
python3 - "$BASE" "$HEAD" "${SECONDS_OF[$BASE]}" "${SECONDS_OF[$HEAD]}" <<'PY'
import json, statistics, sys
base, head, a, b = sys.argv[1], sys.argv[2], list(map(float, sys.argv[3].split())), list(map(float, sys.argv[4].split()))
out = {"base": base, "head": head, "base_seconds": a, "head_seconds": b,
       "base_median": statistics.median(a), "head_median": statistics.median(b)}
out["ratio"] = round(out["head_median"] / out["base_median"], 3)
print(json.dumps(out))
open("bench/out/fast_tier_ab.json", "w").write(json.dumps(out, indent=1) + "\n")
PY
for REV in "$BASE" "$HEAD"; do
  MEDIAN=$(python3 -c "import json; r=json.load(open('bench/out/fast_tier_ab.json')); print(r['base_median'] if '$REV' == r['base'] else r['head_median'])")
  .venv/bin/python scripts/results.py timing --table "Fast tier before and after a refactor, 2 CPU cores" \
    --id "fast_tier_$REV" --system "make test's fast tier at $REV (median of 3, alternating with the other)" \
    --seconds "$MEDIAN" --command "bash bench/fast_tier_ab.sh $BASE $HEAD"
done
