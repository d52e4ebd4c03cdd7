#!/usr/bin/env bash
# The README's two Quick start commands timed in a fresh clone of HEAD, the install excluded, and recorded for
# the results page (bench/results/quickstart_<demo|test>_<cpu kind>.json). Budgets: `make demo` at most 300 s
# on every CPU kind; the fast tier at most 120 s on AVX2-only, 85 s on the AVX-512 kinds (issue 76).
# Run alone (nothing else on the cores); commit first: the clone is of HEAD.
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
# Each CPU kind keeps its own records (quickstart_test_avx2, _avx512, _amx): one kind's figure never replaces another's.
KIND=$(.venv/bin/python -c "from pathlib import Path
from toolkit.hardware import cpu_flags, cpu_kind
print(cpu_kind(cpu_flags(Path('/proc/cpuinfo').read_text())[1]))")
.venv/bin/python scripts/results.py timing --table "Quick start on 2 CPU cores" --id quickstart_demo_$KIND \
  --system "make demo (install excluded)" --seconds "$DEMO" --command "bash bench/quickstart.sh (clone of $COMMIT)" \
  --note "budget: 300 s on every CPU kind ($KIND here); stage times in the clone's demo.log"
.venv/bin/python scripts/results.py timing --table "Quick start on 2 CPU cores" --id quickstart_test_$KIND \
  --system "make test, the fast tier (install excluded)" --seconds "$TEST" \
  --command "bash bench/quickstart.sh (clone of $COMMIT)" \
  --note "budget: 120 s on AVX2-only CPUs, 85 s on the AVX-512 kinds ($KIND here)"
echo "make demo: $DEMO s, make test: $TEST s (clone: $CLONE)"
