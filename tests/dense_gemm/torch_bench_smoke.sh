#!/usr/bin/env bash
# GPU test (ctest label gpu): tools/dense_gemm/bench_torch.py, cake through the C ABI against
# torch.mm / F.linear, on two small rows: both print a row of four ops and nothing fails.
# Skips (exit 77) where python3 has no torch or triton, or torch sees no GPU.
#   tests/dense_gemm/torch_bench_smoke.sh LIBCAKE SOURCE_DIR
set -uo pipefail
lib=$1
script=$2/tools/dense_gemm/bench_torch.py
if ! python3 -c "import sys, torch, triton; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "SKIP: python3 has no torch (with triton) that sees a GPU"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
out=$(python3 "$script" "$lib" 512,32,1000 256,136,4097 2>&1) || fail "rc $?"$'\n'"$out"
echo "$out"
grep -q "FAIL" <<<"$out" && fail "a row disagrees with torch"
[ "$(grep -cE '^ +(512|256) +(32|136) +(1000|4097) \|' <<<"$out")" = 2 ] || fail "expected two rows"
