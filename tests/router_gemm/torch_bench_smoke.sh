#!/usr/bin/env bash
# GPU test (ctest label gpu): tools/router_gemm/bench_torch.py, cake through the C ABI against
# torch's FP32 matmuls, on two small rows: both print a row of three ops within the FP32
# budget. Skips (exit 77) where python3 has no torch or triton, or torch sees no GPU.
#   tests/router_gemm/torch_bench_smoke.sh LIBCAKE SOURCE_DIR
set -uo pipefail
lib=$1
script=$2/tools/router_gemm/bench_torch.py
source "$(dirname "$0")/../torch_smoke_common.sh"
skip_without_torch_gpu triton
out=$(python3 "$script" "$lib" 64,512,1000 136,256,4097 2>&1) || fail "rc $?"$'\n'"$out"
echo "$out"
grep -q "FAIL" <<<"$out" && fail "a row misses the FP32 budget"
[ "$(grep -cE '^ +(64|136) +(512|256) +(1000|4097) \|' <<<"$out")" = 2 ] || fail "expected two rows"
