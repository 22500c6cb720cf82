#!/usr/bin/env bash
# GPU test lane: runs `ctest -L 'gpu|multigpu'` on a machine with a GPU, then compute-sanitizer
# (memcheck, racecheck) over the GPU tests, and prints one summary. Uses the build in
# ${CAKE_BUILD_DIR:-build-gpu}: carried from a machine with the -dev packages (the GPU
# machine has none), or built here when absent. Logs go to ${OUT:-/tmp/cake-gpu-lane}.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${CAKE_BUILD_DIR:-build-gpu}
out=${OUT:-/tmp/cake-gpu-lane}
mkdir -p "$out"
if [ ! -x "$dir/tests/cake_gpu_tests" ]; then
  CAKE_BUILD_DIR=$dir tools/configure.sh -DCMAKE_BUILD_TYPE=Release || exit 1
fi
# A carried build records the absolute source path it was configured in; make it resolve.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt")
if [ -n "$src" ] && [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
fi
export CAKE_CACHE_DIR=$(mktemp -d)   # a cold cache: the lane exercises the JIT path
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
"$dir/tools/cakec" doctor

status=0
# Every test's own output goes to the log (-V: the passing ones too, e.g. torch_ops's host time
# table and the bench smokes' rows); the console gets one line a test.
ctest --test-dir "$dir" -L 'gpu|multigpu' -V >"$out/ctest_gpu.log" 2>&1 || status=1
grep -E "^ *[0-9]+/[0-9]+ Test +#[0-9]+:" "$out/ctest_gpu.log"
summary=$(grep -E "tests passed|tests failed" "$out/ctest_gpu.log" | tail -1)
skipped=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+:.*Skipped" "$out/ctest_gpu.log" || true)

sanitizer=""
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    # The largest cases (and the ten-seed sweeps) take minutes under the sanitizers; their
    # kernels are the ones the smaller cases run (same programs), so they are left to the
    # plain ctest run above.
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$dir/tests/cake_gpu_tests" \
      --gtest_filter="${CAKE_SANITIZE_FILTER:--*T140000*:*T20000*:*T513_H4096*:*T300_H8192*:*Seeds*}" \
      >"$out/sanitizer_$tool.log" 2>&1
    rc=$?
    line=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizer_$tool.log" | tail -1)
    sanitizer+="  $tool: rc=$rc ${line:-no summary line}"$'\n'
    [ "$rc" = 0 ] || status=1
  done
else
  sanitizer="  compute-sanitizer not found"$'\n'
fi
echo "=== GPU lane summary"
echo "ctest -L 'gpu|multigpu': $summary ($skipped skipped)"
printf '%s' "$sanitizer"
exit $status
