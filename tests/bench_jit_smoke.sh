#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench jit` end to end on one program's compile rows, so its
# first-call children, in-memory prepare and the raw launch beside Launch::launch all run (the
# raw launch packs the probe kernel's arguments by hand: a stale packing faults here). Skips
# (exit 77) where the bench says it needs a GPU.
#   tests/bench_jit_smoke.sh CAKEC
set -uo pipefail
out=$("$1" bench jit --runs 2 --filter finalize 2>&1)
rc=$?
echo "$out"
if [ "$rc" != 0 ] && grep -q "needs a GPU" <<<"$out"; then
  echo "SKIP: no GPU"
  exit 77
fi
[ "$rc" = 0 ] || { echo "FAIL: rc $rc"; exit 1; }
for row in "Runtime creation" "first call per program, cubin from aot/" "plan lookup (cached)" \
           "launch overhead over raw"; do
  grep -qF "$row" <<<"$out" || { echo "FAIL: no row '$row'"; exit 1; }
done
grep -q "WARNING" <<<"$out" && { echo "FAIL: a child was not served the expected way"; exit 1; }
echo "PASS"
