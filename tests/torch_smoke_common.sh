# Sourced by the families' torch script smokes (tests/<family>/torch_bench_smoke.sh): fail,
# and skip_without_torch_gpu MODULE..., which exits 77 (ctest's skip) unless python3 imports
# torch and the modules named and torch sees a GPU.
fail() { echo "FAIL: $*"; exit 1; }
skip_without_torch_gpu() {
  local imports="sys, torch" what="torch"
  for m in "$@"; do imports+=", $m" what+=" (with $m)"; done
  if ! python3 -c "import $imports; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "SKIP: python3 has no $what that sees a GPU"
    exit 77
  fi
}
