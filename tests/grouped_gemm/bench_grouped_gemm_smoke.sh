#!/usr/bin/env bash
# GPU test (ctest label gpu): `cakec bench grouped_gemm` on small rows, in turn in both orders
# (--order permute, the default, and fixed) and with --sustained (with its energy columns); every row's output must be
# checked ok against the cuBLAS loop; with --samples, the CSV read back (python3) and each row's
# VS_BEST computed again from it. Skips (exit 77) where the bench says it needs a GPU.
#   tests/grouped_gemm/bench_grouped_gemm_smoke.sh CAKEC
set -uo pipefail
source "$(dirname "$0")/../bench_smoke_lib.sh"
cakec=$1
rows=(--shape down --m 4096 --e 4 --dist balanced one_empty --op fwd wgrad_acc)

run_mode() {  # NAME HEADER_WORDS ARGS...: all four rows checked ok, the header names the mode
  local name=$1 header=$2
  shift 2
  echo "== $name"
  bench_or_skip "$cakec" grouped_gemm "${rows[@]}" "$@"
  # Rows: SHAPE M E DIST OP GROUPS CAKE_MS CAKE_TF LOOP_TF GROUPED VS_BEST CHECK ...
  [ "$(awk '$1 == "down" && $12 == "ok"' <<<"$out" | wc -l)" = 4 ] || fail "$name: expected four rows checked ok"
  grep -qF -- "$header" <<<"$out" || fail "$name: the header does not say '$header'"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
samples=$tmp/calls.csv
run_mode permute "each rep in the next permutation of their order" --reps 6 --samples "$samples"
# --samples: a header and one line per timed call: 4 rows, each with cake, the loop and maybe
# the grouped GEMM (n/a for wgrad_acc), each of them once in each of the 6 reps, in a slot of
# its own, times above zero; and each row's VS_BEST as printed, computed again from its calls.
printf '%s\n' "$out" >"$tmp/out.txt"
python3 - "$samples" "$tmp/out.txt" <<'PY' || fail "samples: $(head -3 "$samples")"
import math, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0] == "row,shape,m,e,dist,op,rep,slot,contender,ms", lines[0]
printed = [l.split() for l in open(sys.argv[2]) if l.startswith("down ")]
calls, keys = {}, {}  # row -> contender -> rep -> ms; row -> [dist, op]
slots = {}  # (row, rep) -> slots
for l in lines[1:]:
    f = l.split(",")
    assert len(f) == 10, l
    row, rep, slot, who, ms = int(f[0]), int(f[6]), int(f[7]), f[8], float(f[9])
    assert f[1:4] == ["down", "4096", "4"] and who in ("cake", "loop", "grouped"), l
    assert 0 <= rep < 6 and math.isfinite(ms) and ms > 0, l
    assert rep not in calls.setdefault(row, {}).setdefault(who, {}), "twice: " + l
    calls[row][who][rep] = ms
    assert keys.setdefault(row, f[4:6]) == f[4:6], l
    slots.setdefault((row, rep), []).append(slot)
assert sorted(calls) == [0, 1, 2, 3] and len(printed) == 4, (sorted(calls), len(printed))
for row, c in calls.items():
    assert "cake" in c and "loop" in c and all(len(r) == 6 for r in c.values()), (row, c)
    assert all(sorted(slots[(row, i)]) == list(range(len(c))) for i in range(6)), row
    assert printed[row][3:5] == keys[row], (row, printed[row], keys[row])
    def med(r):
        r = sorted(r)
        return math.sqrt(r[2] * r[3])  # 6 reps: the geometric mean of the middle two
    vs = min(med([c[b][i] / c["cake"][i] for i in range(6)]) for b in c if b != "cake")
    assert abs(vs - float(printed[row][10].rstrip("x"))) <= 0.0006, (row, vs, printed[row][10])
print("samples ok: 4 rows, VS_BEST recomputed")
PY
# `cakec bench summarize` reads the file back: its geomean over the rows is the bench's (to the
# last printed digit: the file holds 9 significant digits a time).
sum=$("$cakec" bench summarize "$samples" 2>&1) || fail "summarize: $sum"
echo "$sum"
bench_all=$(awk '$1 == "all" && $3 == "over" {print $2}' <<<"$out")
sum_all=$(awk '$1 == "all" {print $2}' <<<"$sum")
awk -v a="${bench_all%x}" -v b="${sum_all%x}" 'BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) <= 0.0011) }' ||
  fail "summarize: all '$sum_all', the bench printed '$bench_all'"
grep -qF "VS_BEST = for each baseline the median over reps of its time in the rep / cake's" <<<"$out" ||
  fail "permute: VS_BEST not explained"
grep -qF "as the faster baseline's median / cake's median: all" <<<"$out" || fail "permute: no ratio of the medians"
run_mode fixed "in a fixed order (cake, loop, grouped)" --reps 3 --order fixed
run_mode sustained "each contender alone" --sustained --warm-ms 20 --window-ms 20 --rounds 1
grep -qF "VS_BEST = faster baseline's mean time / cake's" <<<"$out" || fail "sustained: VS_BEST not explained"
# Energy: a J column per contender and J_VS_BEST on every row, and their summary line.
[ "$(awk '$1 == "down" && $15 ~ /^(n\/a|-?[0-9.e+-]+)(\/(n\/a|-?[0-9.e+-]+))+$/ && $16 ~ /^(n\/a|-?[0-9.]+x)$/' <<<"$out" | wc -l)" = 4 ] ||
  fail "sustained: no J c/l/g and J_VS_BEST columns"
grep -qE "J_VS_BEST( geomean [0-9.]+x over|: n/a)" <<<"$out" || fail "sustained: no J_VS_BEST summary"
echo "PASS"
