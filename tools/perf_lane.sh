#!/usr/bin/env bash
# Perf lane: the benches of the perf tables (docs/perf.md), in the order given, inside one
# time budget, on a machine with a GPU. Each bench's whole output goes to its own log; the
# console gets each bench's last lines. A bench that would start with under 20 s of the budget
# left is skipped (named in the summary), so a lease's call returns with what it measured.
#   tools/perf_lane.sh [BENCH ...]
# BENCH: a family's `cakec bench <family>` by its name, `<family>_torch` for the torch script
# beside it (tools/<family>/bench_torch.py), `jit` (`cakec bench jit`) or `torch_host` (the
# host time table of tests/torch_ops_check.py). Default: every family's bench and torch
# script, in `cakec bench`'s order, then jit and torch_host. Uses ${CAKE_BUILD_DIR:-build-gpu}
# (gpu_lane.sh says how to carry one); PERF_BUDGET seconds in all (default 540); logs under
# ${OUT:-/tmp/cake-perf-lane}; JIT_FILTER narrows `bench jit`'s compile rows (default ew_; set
# empty for every program, which takes minutes). Exits 1 when a bench failed or was stopped.
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
if [ -z "${CAKE_CACHE_DIR:-}" ]; then  # a cold cache of the lane's own, removed at the end
  CAKE_CACHE_DIR=$(mktemp -d)
  trap 'rm -rf "$CAKE_CACHE_DIR"' EXIT
fi
export CAKE_CACHE_DIR PYTHONUNBUFFERED=1

# The families with a `cakec bench` subcommand (all but jit and summarize), in its order.
families=$("$cakec" bench --help 2>/dev/null | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && $1 != "jit" && $1 != "summarize" {print $1}')
is_family() { grep -qx -- "$1" <<<"$families"; }

# Sets cmd to bench $1's command line (an array: paths and filters stay whole words).
command_of() {
  case $1 in
    jit)
      cmd=("$cakec" bench jit --runs 10)
      if [ -n "${JIT_FILTER-ew_}" ]; then cmd+=(--filter "${JIT_FILTER-ew_}"); fi ;;
    torch_host) cmd=(python3 tests/torch_ops_check.py python "$lib") ;;  # its last table
    *_torch)
      [ -f "tools/${1%_torch}/bench_torch.py" ] || return 1
      cmd=(python3 "tools/${1%_torch}/bench_torch.py" "$lib") ;;
    *)
      is_family "$1" || return 1
      cmd=("$cakec" bench "$1") ;;
  esac
}
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
  for f in $families; do
    benches+=("$f")
    if [ -f "tools/$f/bench_torch.py" ]; then benches+=("${f}_torch"); fi
  done
  benches+=(jit torch_host)
fi
for b in "${benches[@]}"; do
  command_of "$b" || { echo "perf_lane: unknown bench '$b' (families: $(echo $families))"; exit 2; }
done

nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader 2>/dev/null || true
start=$(date +%s)
summary=""
status=0
for b in "${benches[@]}"; do
  left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt 20 ]; then
    summary+="  $b: skipped (budget spent)"$'\n'
    continue
  fi
  command_of "$b"
  echo "=== $b (${cmd[*]}; at most ${left} s)"
  t0=$(date +%s)
  timeout -k 10 "$left" "${cmd[@]}" >"$out/$b.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || status=1
  tail -n 12 "$out/$b.log"
  summary+="  $b: rc=$rc in $(($(date +%s) - t0)) s$([ "$rc" = 124 ] && echo ' (stopped at the budget)')"$'\n'
done
echo "=== perf lane summary (logs in $out)"
printf '%s' "$summary"
exit $status
