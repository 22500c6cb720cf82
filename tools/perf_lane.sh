#!/usr/bin/env bash
# Perf lane: the benches of the perf tables (docs/perf.md), in the order given, inside one
# time budget, on a machine with a GPU. Each bench's whole output goes to its own log; the
# console gets each bench's last lines. A bench that would start with under 20 s of the budget
# left is skipped (named in the summary), so a lease's call returns with what it measured.
#   tools/perf_lane.sh [BENCH ...]   (default: all, in the order below)
# BENCH: rmsnorm rmsnorm_torch dense_gemm dense_torch router_gemm router_torch grouped_gemm
#        grouped_torch jit torch_host. Uses ${CAKE_BUILD_DIR:-build-gpu} (gpu_lane.sh says how
# to carry one); PERF_BUDGET seconds in all (default 540); logs under ${OUT:-/tmp/cake-perf-lane};
# JIT_FILTER narrows `bench jit`'s compile rows (default ew_: every program takes minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${CAKE_BUILD_DIR:-build-gpu}
out=${OUT:-/tmp/cake-perf-lane}
budget=${PERF_BUDGET:-540}
mkdir -p "$out"
# A carried build records the absolute source path it was configured in; make it resolve.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null)
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
fi
cakec=$dir/tools/cakec
lib=$dir/runtime/libcake.so
export CAKE_CACHE_DIR=${CAKE_CACHE_DIR:-$(mktemp -d)} PYTHONUNBUFFERED=1

command_of() {
  case $1 in
    rmsnorm) echo "$cakec bench rmsnorm" ;;
    rmsnorm_torch) echo "python3 tools/rmsnorm/bench_torch.py $lib" ;;
    dense_gemm) echo "$cakec bench dense_gemm" ;;
    dense_torch) echo "python3 tools/dense_gemm/bench_torch.py $lib" ;;
    router_gemm) echo "$cakec bench router_gemm" ;;
    router_torch) echo "python3 tools/router_gemm/bench_torch.py $lib" ;;
    grouped_gemm) echo "$cakec bench grouped_gemm" ;;
    grouped_torch) echo "python3 tools/grouped_gemm/bench_torch.py $lib" ;;
    jit) echo "$cakec bench jit --runs 10 --filter ${JIT_FILTER:-ew_}" ;;
    torch_host) echo "python3 tests/torch_ops_check.py python $lib" ;;  # its last table
    *) return 1 ;;
  esac
}
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(rmsnorm rmsnorm_torch dense_gemm dense_torch router_gemm router_torch
                                    grouped_gemm grouped_torch jit torch_host)
for b in "${benches[@]}"; do
  command_of "$b" >/dev/null || { echo "perf_lane: unknown bench '$b'"; exit 2; }
done

nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader 2>/dev/null || true
start=$(date +%s)
summary=""
for b in "${benches[@]}"; do
  left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt 20 ]; then
    summary+="  $b: skipped (budget spent)"$'\n'
    continue
  fi
  echo "=== $b ($(command_of "$b"); at most ${left} s)"
  t0=$(date +%s)
  # shellcheck disable=SC2046
  timeout "$left" $(command_of "$b") >"$out/$b.log" 2>&1
  rc=$?
  tail -n 12 "$out/$b.log"
  summary+="  $b: rc=$rc in $(($(date +%s) - t0)) s$([ "$rc" = 124 ] && echo ' (stopped at the budget)')"$'\n'
done
echo "=== perf lane summary (logs in $out)"
printf '%s' "$summary"
