#!/usr/bin/env bash
# The main job: set up, build, prebuild every cubin into aot/, print the route table; on a
# machine with a GPU, also run the smoke example.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/configure.sh
cakec=${CAKE_BUILD_DIR:-build}/tools/cakec
"$cakec" build --out aot
"$cakec" list-routes
if "$cakec" doctor | grep -q '^  gpu 0'; then
  if [ -x "${CAKE_BUILD_DIR:-build}/tools/cake_smoke" ]; then
    CAKE_AOT_DIR=aot "${CAKE_BUILD_DIR:-build}/tools/cake_smoke"
  fi
else
  echo "main: no GPU here; the smoke example runs only where a GPU is (cakec doctor says why)"
fi
