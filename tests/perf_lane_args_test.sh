#!/usr/bin/env bash
# tools/perf_lane.sh's bench names (no GPU needed): an unknown one is refused with exit 2 and
# the families it knows, before anything runs; a family it names, that family's torch script
# and jit are taken.
#   tests/perf_lane_args_test.sh PERF_LANE BUILD_DIR
set -uo pipefail
lane=$1
export CAKE_BUILD_DIR=$2 OUT=$(mktemp -d) PERF_BUDGET=0
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out=$("$lane" no_such_bench 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "an unknown bench: rc $rc, want 2: $out"
families=$(sed -n "s/.*unknown bench 'no_such_bench' (families: \([a-z0-9_ ]*\)).*/\1/p" <<<"$out")
[ -n "$families" ] || fail "the refusal does not name the families: $out"
family=""  # the first with a torch script beside it
for f in $families; do [ -z "$family" ] && [ -f "$(dirname "$lane")/$f/bench_torch.py" ] && family=$f; done
[ -n "$family" ] || fail "no family of '$families' has tools/<family>/bench_torch.py"
[ -z "$(ls "$OUT")" ] || fail "a refused lane wrote logs"
out=$("$lane" "$family" "${family}_torch" jit 2>&1)  # a budget of 0: each is skipped, none refused
[ $? = 0 ] || fail "known benches refused: $out"
[ "$(grep -c ': skipped (budget spent)' <<<"$out")" = 3 ] || fail "expected three skipped benches: $out"
echo "PASS"
