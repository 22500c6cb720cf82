#!/usr/bin/env bash
# GPU test (ctest label gpu): tools/grouped_gemm/bench_torch.py, cake through the C ABI against
# torch._grouped_mm, on two small rows in turn and with --sustained, and its argument errors.
# Skips (exit 77) where python3 has no torch or torch sees no GPU.
#   tests/grouped_gemm/torch_bench_smoke.sh LIBCAKE SOURCE_DIR
set -uo pipefail
lib=$1
script=$2/tools/grouped_gemm/bench_torch.py
source "$(dirname "$0")/../torch_smoke_common.sh"
skip_without_torch_gpu
rows=(--shape down --m 4096 --e 2 --dist balanced --op fwd wgrad_acc)

out=$(python3 "$script" "$lib" "${rows[@]}" --reps 2 2>&1) || fail "in turn: rc $?"$'\n'"$out"
echo "$out"
[ "$(grep -c '  ok  ' <<<"$out")" = 2 ] || fail "in turn: expected two rows checked ok"
grep -q "one shared clock" <<<"$out" || fail "in turn: the header does not name the mode"

out=$(python3 "$script" "$lib" "${rows[@]}" --sustained --warm-ms 20 --window-ms 20 --rounds 1 2>&1) ||
  fail "sustained: rc $?"$'\n'"$out"
echo "$out"
[ "$(grep -c '  ok  ' <<<"$out")" = 2 ] || fail "sustained: expected two rows checked ok"
grep -q "MHZ c/t" <<<"$out" || fail "sustained: no clock column"
grep -Eq "  ok +[0-9]+/[0-9]+ +[0-9]+/[0-9]+ " <<<"$out" || fail "sustained: no clock and power figures (NVML)"

for bad in "--reps 3 --sustained|--reps and --sustained exclude" "--warm-ms 1000|need --sustained" \
           "--sustained --window-ms 0|--window-ms must be positive"; do
  args=${bad%%|*}
  want=${bad#*|}
  # shellcheck disable=SC2086
  out=$(python3 "$script" "$lib" $args 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "'$args': rc $rc, want 2"
  grep -qF -- "$want" <<<"$out" || fail "'$args': no '$want' in: $out"
done
echo "PASS"
