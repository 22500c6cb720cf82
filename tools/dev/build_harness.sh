#!/usr/bin/env bash
# Builds tools/dev/gg_sm90_harness.cu against a copy of templates/ with patches applied:
#   tools/dev/build_harness.sh OUT [PATCH...] [-- NVCC_FLAGS...]
# PATCH is a name in tools/dev/patches/ (without .patch) or a path. OUT is the binary's path.
# Example (the tall tiles with the energy probe's no-multiply switch):
#   tools/dev/build_harness.sh .devbin/gg_tall_nomma sm90_tall_tiles sm90_energy_probe -- -DGG_TALL -DGG_NO_MMA
# Builds on the CPU machine; carry the binary to the GPU machine (it needs libcublas there).
# GG_TEMPLATES_REV=REV takes templates/ from that git revision instead of the work tree (the
# patches were made against d7fff03's, before fwd and dgrad split their tail).
set -euo pipefail
cd "$(dirname "$0")/../.."
if (($# < 1)); then
  sed -n '2,7p' "$0" >&2
  exit 2
fi
out=$1
shift
patches=()
while (($#)) && [ "$1" != "--" ]; do
  patches+=("$1")
  shift
done
(($#)) && shift  # the --
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
if [ -n "${GG_TEMPLATES_REV:-}" ]; then
  git archive "$GG_TEMPLATES_REV" templates | tar -x -C "$copy" || { echo "build_harness: no templates at $GG_TEMPLATES_REV" >&2; exit 2; }
else
  cp -r templates "$copy/"
fi
for p in "${patches[@]}"; do
  file=$p
  [ -f "$file" ] || file=tools/dev/patches/$p.patch
  [ -f "$file" ] || { echo "build_harness: no patch $p" >&2; exit 2; }
  file=$(realpath "$file")
  (cd "$copy" && patch -s -p1 --no-backup-if-mismatch <"$file") || { echo "build_harness: $p does not apply" >&2; exit 1; }
done
mkdir -p "$(dirname "$out")"
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a "$@" -I "$copy/templates" -I templates -I tools/dev \
  -I tools/cakec tools/dev/gg_sm90_harness.cu tools/cakec/nvml_reader.cpp -lcublas -ldl -o "$out" \
  -Wno-deprecated-declarations
echo "built $out (${patches[*]:-no patches}; templates: ${GG_TEMPLATES_REV:-work tree}; flags: ${*:-none})"
