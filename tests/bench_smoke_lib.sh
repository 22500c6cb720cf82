# Sourced by the families' `cakec bench` smoke tests (tests/<family>/bench_*_smoke.sh).
# bench_or_skip CAKEC ARGS...: runs `CAKEC bench ARGS...` into $out and prints it; exits 77
# (ctest's skip) where the bench says it needs a GPU, 1 on any other failure.
fail() { echo "FAIL: $*"; exit 1; }
bench_or_skip() {
  local cakec=$1
  shift
  out=$("$cakec" bench "$@" 2>&1)
  local rc=$?
  if [ "$rc" != 0 ] && grep -q "needs a GPU" <<<"$out"; then
    echo "SKIP: $out"
    exit 77
  fi
  echo "$out"
  [ "$rc" = 0 ] || fail "rc $rc"
}
