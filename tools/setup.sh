#!/usr/bin/env bash
# Installs what cake needs to build and test, on a fresh Debian machine with the CUDA
# toolkit. Idempotent: installs only what is missing.
set -euo pipefail

packages=(cmake ninja-build g++ nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
          libgtest-dev libdlpack-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ] && ! command -v nvcc >/dev/null; then
  echo "setup: the CUDA toolkit (headers: cuda.h, nvrtc.h) is required; set CUDA_HOME" >&2
  exit 1
fi
