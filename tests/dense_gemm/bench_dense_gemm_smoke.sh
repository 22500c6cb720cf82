#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench dense_gemm` on small rows: every op's row (the step's
# too, from CUDA graphs, and launched with --no-graph) runs, is checked ok against cuBLAS's
# output, and names cake's route; the header has the measured copy bandwidth and GEMM rate. Skips (exit 77) where the bench says it needs a GPU.
#   tests/dense_gemm/bench_dense_gemm_smoke.sh CAKEC
set -uo pipefail
source "$(dirname "$0")/../bench_smoke_lib.sh"
cakec=$1
bench_or_skip "$cakec" dense_gemm --k 512 --n 32 200 --t 1 4097 --reps 3
grep -qE "copy [0-9]+ GB/s, cuBLAS bf16 8192\^3 [0-9]+ TFLOP/s" <<<"$out" || fail "no measured bounds in the header"
# Rows: OP K N T CAKE_MS CUBLAS_MS LT8_MS VS_BEST ROOF%c ROOF%b ROUTE CHECK REL; cuBLASLt's
# column holds a time (its top 8 ran).
for op in fwd dgrad wgrad wgrad_acc; do
  [ "$(awk -v op=$op '$1 == op && $2 == 512 && $12 == "ok" && $7 + 0 > 0' <<<"$out" | wc -l)" = 4 ] ||
    fail "$op: expected four rows checked ok with a cuBLASLt time"
done
grep -q "wgrad_acc_f32_fused" <<<"$out" || fail "wgrad_acc does not name its fused route"
# deterministic = false: at T 4097 and N 200 (the split's window is N 136-256) the split over T
# (reduce-added), checked ok like the others; at N 32 the deterministic route.
[ "$(awk '$1 == "wgrad_acc_nd" && $3 == 200 && $4 == 4097 && $12 == "ok" && $11 ~ /reduce/' <<<"$out" | wc -l)" = 1 ] ||
  fail "wgrad_acc_nd: expected the reduce split at N 200, T 4097, checked ok"
[ "$(awk '$1 == "wgrad_acc_nd" && $3 == 32 && $12 == "ok" && $11 !~ /reduce/' <<<"$out" | wc -l)" = 2 ] ||
  fail "wgrad_acc_nd: expected the deterministic route at N 32, checked ok"
# A step row: dgrad then the accumulating wgrad, both checked, both routes named.
[ "$(awk '$1 == "step" && $2 == 512 && $12 == "ok" && $0 !~ /BAD/ && gsub(/ \/ ok /, "&") == 1 && $11 ~ /\+/' <<<"$out" | wc -l)" = 4 ] ||
  fail "step: expected four rows, each GEMM checked ok, two routes"
# Launched instead of replayed from a graph: the same rows run and check.
out2=$("$cakec" bench dense_gemm --k 512 --n 32 --t 4097 --op fwd wgrad_acc --reps 3 --no-graph 2>&1) || fail "--no-graph: rc $?"
echo "$out2"
[ "$(awk '$2 == 512 && $12 == "ok"' <<<"$out2" | wc -l)" = 2 ] || fail "--no-graph: expected two rows checked ok"
# fwd with an f32 y (asked for by name): four rows checked ok, each naming an f32 route.
out3=$("$cakec" bench dense_gemm --k 512 --n 32 200 --t 1 4097 --op fwd_f32 --reps 3 2>&1) || fail "fwd_f32: rc $?"
echo "$out3"
[ "$(awk '$1 == "fwd_f32" && $2 == 512 && $12 == "ok" && $11 ~ /^fwd_f32_/' <<<"$out3" | wc -l)" = 4 ] ||
  fail "fwd_f32: expected four rows checked ok on an f32 route"
