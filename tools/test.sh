#!/usr/bin/env bash
# The test command: set up, build, run every ctest label (unit, nvrtc, gpu; the gpu tests
# skip with a reason where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/configure.sh
cd "${CAKE_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
