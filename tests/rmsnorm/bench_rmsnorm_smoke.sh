#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench rmsnorm` on small rows: each row has its times,
# its shares of the copy bandwidth and of a copy of the same bytes, and names its programs.
# Skips (exit 77) where the bench says it needs a GPU.
#   tests/rmsnorm/bench_rmsnorm_smoke.sh CAKEC
set -uo pipefail
source "$(dirname "$0")/../bench_smoke_lib.sh"
bench_or_skip "$1" rmsnorm --h 1024 3072 --t 512 4096
grep -q "OF_SAME" <<<"$out" || fail "no OF_SAME column"
# Rows: H T FWD_US FWD_TB/S OF_COPY OF_SAME BWD_US BWD_TB/S OF_COPY OF_SAME FINALIZE FWD_ROUTE (prog) BWD_ROUTE (prog)
rows=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 > 0 && $7 > 0 && $5 ~ /%$/ && $6 ~ /%$/ && $10 ~ /%$/ && $11 ~ /%$/' <<<"$out" | wc -l)
[ "$rows" = 4 ] || fail "expected 4 rows with times and shares, got $rows"
for h in 1024 3072; do
  grep -q "rms_fwd.h$h" <<<"$out" || fail "H $h does not name its fwd instance"
  grep -q "rms_bwd.h$h" <<<"$out" || fail "H $h does not name its bwd instance"
done
