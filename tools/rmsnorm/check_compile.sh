#!/usr/bin/env bash
# Compile-checks templates/rmsnorm/smxx_rmsnorm.cuh without a GPU: explicit instantiations of
# cake::rms::{fwd,bwd,dw_finalize} over a representative parameter set, built with nvcc for
# sm_90a and sm_80 (-Xptxas -v), failing on any compile error, any spill or any stack frame;
# every kernel of registry/rmsnorm.json is in the set.
# Then the same header through NVRTC (the runtime's compiler, with the loader's options)
# via name expressions, as the host will do. Prints one line per kernel: regs, smem, stack.
#
#   tools/rmsnorm/check_compile.sh [--quick] [--keep DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
NVCC=${NVCC:-nvcc}
QUICK=0
KEEP=
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1 ;;
    --keep) KEEP=$2; shift ;;
    *) echo "usage: $0 [--quick] [--keep DIR]" >&2; exit 2 ;;
  esac
  shift
done
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
[[ -z $KEEP ]] && trap 'rm -rf "$WORK"' EXIT

# ---- the instantiation list: one name expression per line (also used for NVRTC).
EXPRS=$WORK/exprs.txt
: >"$EXPRS"
TWS="cake::bf16 float"
HS="0 128 256 1024 1536 4096 5120 8192"
THREADS="128 256 512 1024"
CHUNKS="64 256"
[[ $QUICK == 1 ]] && { HS="0 256 4096 8192"; THREADS="256 1024"; CHUNKS="64"; }
for tw in $TWS; do
  for h in $HS; do
    for t in $THREADS; do
      for res in true false; do
        echo "cake::rms::fwd<$tw, $h, 8, $t, $res>" >>"$EXPRS"
      done
      for ch in $CHUNKS; do
        for comp in true false; do
          echo "cake::rms::bwd<$tw, $h, 8, $t, $ch, $comp>" >>"$EXPRS"
        done
      done
    done
  done
  for t in 128 256 512 1024; do
    for comp in true false; do
      echo "cake::rms::dw_finalize<$tw, $t, $comp>" >>"$EXPRS"
    done
  done
done
# kVec < 8 (8- and 4-byte accesses) and a small chunk, once each.
cat >>"$EXPRS" <<'EOF'
cake::rms::fwd<cake::bf16, 4096, 4, 256, true>
cake::rms::fwd<float, 0, 2, 128, false>
cake::rms::bwd<cake::bf16, 4096, 4, 512, 64, true>
cake::rms::bwd<float, 0, 2, 256, 16, false>
cake::rms::bwd<cake::bf16, 64, 8, 1024, 64, true>
EOF
# Every kernel the registry ships (rendered from codegen/rmsnorm/spec.cpp), also in --quick.
grep -o '"cake::rms::[^"]*"' registry/rmsnorm.json | tr -d '"' >>"$EXPRS"
sort -u -o "$EXPRS" "$EXPRS"
N=$(wc -l <"$EXPRS")

# ---- nvcc: explicit instantiations need the full signature; derive it from the name.
CU=$WORK/rms_inst.cu
{
  echo '#include "smxx_rmsnorm.cuh"'
  echo '#define BF cake::bf16'
  while read -r e; do
    args=${e#*<}; args=${args%>}
    tw=${args%%,*}
    case $e in
      cake::rms::fwd*)
        echo "template __global__ void $e(BF*, float*, BF*, const BF*, const BF*, const $tw*, long long, int, long long, long long, long long, long long, float);" ;;
      cake::rms::bwd*)
        echo "template __global__ void $e(BF*, float*, const BF*, const BF*, const float*, const $tw*, long long, int, long long, long long, long long);" ;;
      cake::rms::dw_finalize*)
        echo "template __global__ void $e($tw*, const float*, long long, int);" ;;
    esac
  done <"$EXPRS"
} >"$CU"

FILT=$(command -v cu++filt || command -v c++filt) || { echo "need cu++filt or c++filt" >&2; exit 1; }
fail=0
for arch in 90a 80; do
  log=$WORK/ptxas_sm$arch.log
  echo "== nvcc sm_$arch: $N kernels"
  if ! "$NVCC" -std=c++17 -I "$ROOT/templates/rmsnorm" -I "$ROOT/templates/common" -gencode="arch=compute_$arch,code=sm_$arch" \
      -Xptxas -v -Werror all-warnings -c "$CU" -o "$WORK/rms_sm$arch.o" >"$log" 2>&1; then
    cat "$log"; echo "FAIL: nvcc sm_$arch"; exit 1
  fi
  # ptxas -v: "Compiling entry function 'M' for 'sm_X'", then "N bytes stack frame, S bytes
  # spill stores, L bytes spill loads" and "Used R registers, ... S bytes smem".
  awk -v arch="$arch" '
    /Compiling entry function/ { match($0, /\x27[^\x27]+\x27/); fn = substr($0, RSTART+1, RLENGTH-2) }
    /bytes stack frame/ { n = split($0, a, /[ ,]+/); for (i = 1; i + 3 <= n; ++i) {
        if (a[i+1] == "bytes" && a[i+2] == "stack") st = a[i];
        if (a[i+1] == "bytes" && a[i+2] == "spill" && a[i+3] == "stores") ss = a[i];
        if (a[i+1] == "bytes" && a[i+2] == "spill" && a[i+3] == "loads") sl = a[i] } }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); r = substr($0, RSTART+5, RLENGTH-15);
        sm = 0; if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH-11);
        printf "%s\t%s\t%s\t%s\t%s\t%s\n", fn, r, sm, st, ss, sl }' "$log" >"$WORK/props_sm$arch.tsv"
  got=$(wc -l <"$WORK/props_sm$arch.tsv")
  [[ $got -eq $N ]] || { echo "FAIL: sm_$arch: parsed $got of $N kernels"; cat "$log"; exit 1; }
  cut -f1 "$WORK/props_sm$arch.tsv" | $FILT >"$WORK/names_sm$arch.txt"
  paste "$WORK/names_sm$arch.txt" "$WORK/props_sm$arch.tsv" | sort |
    awk -F'\t' -v arch="$arch" '{
      name = $1; sub(/\(.*/, "", name); sub(/^void /, "", name)
      bad = ($5 != 0 || $6 != 0 || $7 != 0)
      printf "sm_%-3s regs %3d smem %6d stack %3d spill %3d/%-3d %s%s\n", arch, $3, $4, $5, $6, $7, name, bad ? "   <-- SPILL/STACK" : ""
    }' | tee "$WORK/summary_sm$arch.txt"
  if grep -q 'SPILL/STACK' "$WORK/summary_sm$arch.txt"; then
    echo "FAIL: sm_$arch: spills or stack frames above"; fail=1
  fi
done

# ---- NVRTC: the header as the loader compiles it (name expressions, lowered names).
NVRTC_SRC=$WORK/nvrtc_check.cpp
cat >"$NVRTC_SRC" <<'EOF'
// Host-only: compiles the header with NVRTC for one arch and resolves every name expression.
#include <nvrtc.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
static std::string slurp(const char* p) { std::ifstream f(p); std::stringstream s; s << f.rdbuf(); return s.str(); }
int main(int argc, char** argv) {
  if (argc != 5) { std::cerr << "usage: nvrtc_check templates_dir exprs arch log\n"; return 2; }
  const std::string dir = argv[1];
  std::string types = slurp((dir + "/common/smxx_types.cuh").c_str());
  std::string rms = slurp((dir + "/rmsnorm/smxx_rmsnorm.cuh").c_str());
  const char* hdrs[] = {types.c_str(), rms.c_str()};
  const char* names[] = {"smxx_types.cuh", "smxx_rmsnorm.cuh"};
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, "#include \"smxx_rmsnorm.cuh\"\n", "rms.cu", 2, hdrs, names) != NVRTC_SUCCESS) return 1;
  std::vector<std::string> exprs;
  { std::ifstream f(argv[2]); std::string l; while (std::getline(f, l)) if (!l.empty()) exprs.push_back(l); }
  for (auto& e : exprs) nvrtcAddNameExpression(prog, e.c_str());
  const std::string a = std::string("--gpu-architecture=") + argv[3];
  const char* opts[] = {a.c_str(), "--std=c++17", "--fmad=true"};
  nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  size_t n = 0; nvrtcGetProgramLogSize(prog, &n); std::string log(n, '\0'); nvrtcGetProgramLog(prog, &log[0]);
  std::ofstream(argv[4]) << log;
  if (r != NVRTC_SUCCESS) { std::cerr << log << "\nNVRTC: " << nvrtcGetErrorString(r) << "\n"; return 1; }
  for (auto& e : exprs) {
    const char* lowered = nullptr;
    if (nvrtcGetLoweredName(prog, e.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) { std::cerr << "no lowered name: " << e << "\n"; return 1; }
  }
  size_t cubin = 0; nvrtcGetCUBINSize(prog, &cubin);
  std::cout << argv[3] << ": " << exprs.size() << " name expressions lowered, cubin " << cubin << " bytes\n";
  nvrtcDestroyProgram(&prog);
  return 0;
}
EOF
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v "$NVCC")")")}
echo "== NVRTC"
"$NVCC" -std=c++17 -o "$WORK/nvrtc_check" "$NVRTC_SRC" -lnvrtc
for arch in sm_90a sm_80; do
  LD_LIBRARY_PATH="$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" \
    "$WORK/nvrtc_check" "$ROOT/templates" "$EXPRS" "$arch" "$WORK/nvrtc_$arch.log" || { echo "FAIL: NVRTC $arch"; exit 1; }
  if [[ -s $WORK/nvrtc_$arch.log ]] && grep -qi 'warning' "$WORK/nvrtc_$arch.log"; then
    cat "$WORK/nvrtc_$arch.log"; echo "FAIL: NVRTC $arch warnings"; fail=1
  fi
done

[[ $fail == 0 ]] && echo "OK: $N kernels x {sm_90a, sm_80}: no errors, no spills, no stack frames"
exit $fail
