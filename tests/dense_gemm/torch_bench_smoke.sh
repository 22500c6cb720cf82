#!/usr/bin/env bash
# GPU test (ctest label gpu): tools/dense_gemm/bench_torch.py, cake through the C ABI against
# torch.mm / F.linear, on two small rows: both print a row of four ops and nothing fails.
# Skips (exit 77) where python3 has no torch or triton, or torch sees no GPU.
#   tests/dense_gemm/torch_bench_smoke.sh LIBCAKE SOURCE_DIR
set -uo pipefail
lib=$1
script=$2/tools/dense_gemm/bench_torch.py
source "$(dirname "$0")/../torch_smoke_common.sh"
skip_without_torch_gpu triton
out=$(python3 "$script" "$lib" 512,32,1000 256,136,4097 2>&1) || fail "rc $?"$'\n'"$out"
echo "$out"
grep -q "FAIL" <<<"$out" && fail "a row disagrees with torch"
[ "$(grep -cE '^ +(512|256) +(32|136) +(1000|4097) \|' <<<"$out")" = 2 ] || fail "expected two rows"
