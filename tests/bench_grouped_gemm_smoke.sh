#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench grouped_gemm` on small rows, in turn in both orders
# (--order permute, the default, and fixed) and with --sustained; every row's output must be
# checked ok against the cuBLAS loop. Skips (exit 77) where the bench says it needs a GPU.
#   tests/bench_grouped_gemm_smoke.sh CAKEC
set -uo pipefail
cakec=$1
fail() { echo "FAIL: $*"; exit 1; }
rows=(--shape down --m 4096 --e 4 --dist balanced one_empty --op fwd wgrad_acc)

run_mode() {  # NAME HEADER_WORDS ARGS...: all four rows checked ok, the header names the mode
  local name=$1 header=$2
  shift 2
  out=$("$cakec" bench grouped_gemm "${rows[@]}" "$@" 2>&1)
  local rc=$?
  if [ "$rc" != 0 ] && grep -q "needs a GPU" <<<"$out"; then
    echo "SKIP: $out"
    exit 77
  fi
  echo "$out"
  [ "$rc" = 0 ] || fail "$name: rc $rc"
  # Rows: SHAPE M E DIST OP GROUPS CAKE_MS CAKE_TF LOOP_TF GROUPED VS_BEST CHECK ...
  [ "$(awk '$1 == "down" && $12 == "ok"' <<<"$out" | wc -l)" = 4 ] || fail "$name: expected four rows checked ok"
  grep -qF -- "$header" <<<"$out" || fail "$name: the header does not say '$header'"
}
run_mode permute "each rep in the next permutation of their order" --reps 6
run_mode fixed "in a fixed order (cake, loop, grouped)" --reps 3 --order fixed
run_mode sustained "each contender alone" --sustained --warm-ms 20 --window-ms 20 --rounds 1
echo "PASS"
