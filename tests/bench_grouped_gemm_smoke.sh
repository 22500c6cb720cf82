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
samples=$(mktemp -d)/calls.csv
run_mode permute "each rep in the next permutation of their order" --reps 6 --samples "$samples"
# --samples: a header and one line per timed call: 4 rows, each with cake, the loop and maybe
# the grouped GEMM (n/a for wgrad_acc), each of them once in each of the 6 reps, in a slot of
# its own (0 .. contenders - 1), times above zero.
[ "$(head -1 "$samples")" = "shape,m,e,dist,op,rep,slot,contender,ms" ] || fail "samples: header"
awk -F, 'NR > 1 {
  row = $1 FS $2 FS $3 FS $4 FS $5; rows[row] = 1; calls[row FS $8]++; seen[row FS $6 FS $8]++
  slots[row FS $6 FS $7]++; if ($7 > top[row]) top[row] = $7
  if ($1 != "down" || $2 != 4096 || $3 != 4 || $6 < 0 || $6 > 5 || $7 < 0 || $9 <= 0 ||
      ($8 != "cake" && $8 != "loop" && $8 != "grouped")) bad = bad " line " NR
}
END {
  for (k in seen) if (seen[k] != 1) bad = bad " twice: " k
  for (k in slots) if (slots[k] != 1) bad = bad " slot twice: " k
  for (r in rows) {
    n++; g = (r FS "grouped") in calls
    if (calls[r FS "cake"] != 6 || calls[r FS "loop"] != 6 || (g && calls[r FS "grouped"] != 6) || top[r] != 1 + g)
      bad = bad " row " r
  }
  if (n != 4) bad = bad " rows " n
  if (bad != "") { print "bad samples:" bad; exit 1 }
}' "$samples" || fail "samples: $(head -3 "$samples")"
rm -rf "$(dirname "$samples")"
grep -qF "VS_BEST = in each rep, the faster baseline's time / cake's" <<<"$out" || fail "permute: VS_BEST not explained"
grep -qF "as the faster baseline's median / cake's median: all" <<<"$out" || fail "permute: no ratio of the medians"
run_mode fixed "in a fixed order (cake, loop, grouped)" --reps 3 --order fixed
run_mode sustained "each contender alone" --sustained --warm-ms 20 --window-ms 20 --rounds 1
grep -qF "VS_BEST = faster baseline's mean time / cake's" <<<"$out" || fail "sustained: VS_BEST not explained"
echo "PASS"
