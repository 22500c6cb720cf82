#!/usr/bin/env bash
# Sanitizer lanes. Each mode sets up what it needs (tools/setup.sh, plus clang for fuzz),
# builds into its own folder and exits non-zero on any test failure or sanitizer report.
#   tools/sanitize.sh asan            build-asan: ASan+UBSan (g++, Debug), ctest -L 'unit|nvrtc'
#   tools/sanitize.sh tsan            build-tsan: TSan (g++, Debug), the tests that start threads
#   tools/sanitize.sh fuzz [SECONDS]  build-fuzz: clang-14 libFuzzer targets (tests/fuzz), each
#                                     run SECONDS (default 60) on a copy of its seed corpus
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ncpu=$(nproc)
work_dir=""

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Installs missing Debian packages, as tools/setup.sh does.
ensure_packages() {
  local missing=() p sudo=""
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  echo "sanitize: installing ${missing[*]}"
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

configure() {  # configure DIR cmake-args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
}

# Sanitizer reports go to files as well as failing the process, so a report from a child
# process (cakec, cake_compile_worker) that a test's own exit-code check would swallow still
# fails the lane. Prints them and returns 1 when there is any.
check_logs() {
  local dir=$1
  shopt -s nullglob
  local logs=("$dir"/*)
  shopt -u nullglob
  ((${#logs[@]})) || return 0
  echo "sanitize: ${#logs[@]} sanitizer report(s):" >&2
  for f in "${logs[@]}"; do
    echo "---- $f" >&2
    cat "$f" >&2
  done
  return 1
}

# Tests that crash cake_compile_worker on purpose (CAKE_TEST_WORKER_FAULT=crash:...).
readonly CRASH_INJECTION_TESTS='^CompileWorker\..*Crash'
# Tests that load libcake.so into python, which has no sanitizer runtime to load it into.
readonly UNINSTRUMENTED_HOST_TESTS='^(worker_found_beside_ctypes_library|ctypes_prebuild_for)$'

mode_asan() {
  tools/setup.sh
  local dir=build-asan logs="$root/build-asan/sanitizer-logs"
  configure "$dir" -DCAKE_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  cmake --build "$dir" -j "$ncpu" --target cake_unit_tests cake_nvrtc_tests cakec cake_compile_worker cake \
    dlopen_worker_check cake_toy_family_tests
  rm -rf "$logs" && mkdir -p "$logs"
  local rc=0 asan="detect_leaks=1:abort_on_error=1:log_path=$logs/asan"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
  ASAN_OPTIONS=$asan ctest --test-dir "$dir" -L 'unit|nvrtc' -E "$CRASH_INJECTION_TESTS|$UNINSTRUMENTED_HOST_TESTS" \
    --output-on-failure -j "$ncpu" || rc=1
  # These make cake_compile_worker raise(SIGSEGV) on purpose and check that the host names
  # SIGSEGV; ASan's SEGV handler would turn it into a report and SIGABRT. Without the
  # handler the worker dies as in production; every other ASan check stays on.
  ASAN_OPTIONS=$asan:handle_segv=0 ctest --test-dir "$dir" -L 'unit|nvrtc' -R "$CRASH_INJECTION_TESTS" \
    --output-on-failure -j "$ncpu" || rc=1
  unset UBSAN_OPTIONS
  check_logs "$logs" || rc=1
  return $rc
}

# The tests that start threads (or processes racing on the disk cache):
#  cake_unit_tests: Loader.* (SingleFlightManyThreads: 32 threads; RacingProcessesCompileOnce
#    forks from the single-threaded test thread, which TSan supports), CacheKey.*,
#    DiskCache.*, PlannerTest.CachedPlansAreReused (the plan cache's locks);
#  cake_nvrtc_tests: Prebuild.* (prebuild() compiles on -j 2 worker threads, in-process and
#    through `cakec build -j 2`, which is built with TSan as well) and CompileWorker.*
#    (`cakec build` over crashing and hanging posix_spawn-ed workers).
# Nothing is excluded. The nvrtc part runs with handle_segv=0: two CompileWorker tests make the
# worker raise(SIGSEGV) on purpose and expect it to die of SIGSEGV, not of TSan's handler.
readonly TSAN_UNIT_FILTER='Loader.*:CacheKey.*:DiskCache.*:PlannerTest.CachedPlansAreReused'
readonly TSAN_NVRTC_FILTER='Prebuild.*:CompileWorker.*'

mode_tsan() {
  tools/setup.sh
  local dir=build-tsan logs="$root/build-tsan/sanitizer-logs"
  configure "$dir" -DCAKE_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug
  cmake --build "$dir" -j "$ncpu" --target cake_unit_tests cake_nvrtc_tests cakec cake_compile_worker
  rm -rf "$logs" && mkdir -p "$logs"
  local rc=0
  local tsan="halt_on_error=1:second_deadlock_stack=1:log_path=$logs/tsan"
  TSAN_OPTIONS=$tsan "$dir/tests/cake_unit_tests" --gtest_filter="$TSAN_UNIT_FILTER" || rc=1
  TSAN_OPTIONS=$tsan:handle_segv=0 "$dir/tests/cake_nvrtc_tests" --gtest_filter="$TSAN_NVRTC_FILTER" || rc=1
  check_logs "$logs" || rc=1
  return $rc
}

mode_fuzz() {
  local seconds=${1:-60}
  [[ $seconds =~ ^[0-9]+$ ]] || usage
  tools/setup.sh
  ensure_packages clang-14 libclang-rt-14-dev
  if ! grep -q 'tests/fuzz' CMakeLists.txt; then
    echo "sanitize: the top-level CMakeLists.txt does not add tests/fuzz (see tests/fuzz/README.md)" >&2
    return 1
  fi
  local dir=build-fuzz targets=(fuzz_registry fuzz_build_json fuzz_json fuzz_plan_args)
  configure "$dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCAKE_FUZZ=ON \
    -DCAKE_SANITIZE=address,undefined -DCAKE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build "$dir" -j "$ncpu" --target "${targets[@]}"
  # A scratch copy of each seed corpus: what the fuzzer adds never lands in the source tree.
  local work findings="$root/$dir/findings"
  work=$(mktemp -d "${TMPDIR:-/tmp}/cake-fuzz.XXXXXX")
  work_dir=$work  # removed on exit
  rm -rf "$findings" && mkdir -p "$findings"
  local t
  for t in "${targets[@]}"; do
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    cp "tests/fuzz/corpus/$t/"* "$work/$t/corpus/"
    while (($(jobs -rp | wc -l) >= ncpu)); do wait -n || true; done
    (
      cd "$work/$t"
      rc=0
      "$root/$dir/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" corpus >log.txt 2>&1 || rc=$?
      echo $rc >rc
    ) &
  done
  wait
  local failed=0
  for t in "${targets[@]}"; do
    local rc execs
    rc=$(cat "$work/$t/rc")
    execs=$(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$work/$t/log.txt" | grep -o '[0-9]*$' || true)
    echo "fuzz: $t: exit $rc, ${execs:-?} executions; $(grep -E '^#[0-9]+' "$work/$t/log.txt" | tail -n 1)"
    if [ "$rc" != 0 ] || [ -n "$(ls -A "$work/$t/artifacts")" ]; then
      failed=1
      mkdir -p "$findings/$t"
      cp "$work/$t/artifacts/"* "$work/$t/log.txt" "$findings/$t/" 2>/dev/null || true
      echo "fuzz: $t FAILED; reproducer and log in $findings/$t:" >&2
      grep -A 40 -E '^==[0-9]+==ERROR|runtime error|uncaught exception|deadly signal|Timeout|out-of-memory' \
        "$work/$t/log.txt" | head -n 60 >&2 || tail -n 40 "$work/$t/log.txt" >&2
    fi
  done
  return $failed
}

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in asan | tsan | fuzz) ;; *) usage ;; esac
start=$SECONDS
on_exit() {
  local rc=$?
  [ -z "$work_dir" ] || rm -rf "$work_dir"
  echo "sanitize: $mode: $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
}
trap on_exit EXIT
"mode_$mode" "$@"
