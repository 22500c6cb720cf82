#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench router_gemm` on small rows: every op's row runs, is
# checked ok against cuBLAS's SGEMM, and names cake's route. Skips (exit 77) where the bench
# says it needs a GPU.
#   tests/router_gemm/bench_router_gemm_smoke.sh CAKEC
set -uo pipefail
source "$(dirname "$0")/../bench_smoke_lib.sh"
bench_or_skip "$1" router_gemm --e 64 --h 512 --t 1 4097 --reps 3
# Rows: OP E H T CAKE_MS SGEMM_MS TF32_MS BF16X9 VS_SGEMM VS_TF32 ROUTE CHECK REL
for op in fwd dgrad wgrad wgrad_acc; do
  [ "$(awk -v op=$op '$1 == op && $2 == 64 && $12 == "ok"' <<<"$out" | wc -l)" = 2 ] || fail "$op: expected two rows checked ok"
done
grep -Eq "fwd_bf16x3_(fused_sm90|sm90|portable)_" <<<"$out" || fail "fwd does not name its route"
grep -q "wgrad_acc_" <<<"$out" || fail "wgrad_acc does not name its route"
