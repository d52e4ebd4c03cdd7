#!/usr/bin/env bash
# The README's two Quick start commands timed in a fresh clone of HEAD, the install excluded, and recorded for
# the results page (bench/results/quickstart_*.json). Budgets: `make demo` at most 300 s, the fast tier at
# most 120 s, on every CPU kind. Run alone (nothing else on the cores); commit first: the clone is of HEAD.
#   bash bench/quickstart.sh [CLONE_DIR]      # then: python scripts/results.py page
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLONE=${1:-/tmp/quickstart_clone}
rm -rf "$CLONE"
git clone -q "$ROOT" "$CLONE"
cd "$CLONE"
make install > install.log 2>&1
lscpu | grep -E "Model name|Flags"
uptime
# The wall seconds of a command, its output to a log (shown, and the script stopped, when it fails).
timed() {
  local log=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" > "$log" 2>&1 || { tail -30 "$log" >&2; return 1; }
  t1=$(date +%s.%N)
  python3 -c "print(round($t1 - $t0, 1))"
}
DEMO=$(timed demo.log make demo)
TEST=$(timed test.log make test PYTEST_ARGS=--durations=15)
tail -25 test.log
cd "$ROOT"
COMMIT=$(git -C "$CLONE" rev-parse --short HEAD)
.venv/bin/python scripts/results.py timing --table "Quick start on 2 CPU cores" --id quickstart_demo \
  --system "make demo (install excluded)" --seconds "$DEMO" --command "bash bench/quickstart.sh (clone of $COMMIT)" \
  --note "budget: 300 s; stage times in the clone's demo.log"
.venv/bin/python scripts/results.py timing --table "Quick start on 2 CPU cores" --id quickstart_test \
  --system "make test, the fast tier (install excluded)" --seconds "$TEST" \
  --command "bash bench/quickstart.sh (clone of $COMMIT)" --note "budget: 120 s"
echo "make demo: $DEMO s, make test: $TEST s (clone: $CLONE)"
