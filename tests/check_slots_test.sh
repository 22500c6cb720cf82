#!/usr/bin/env bash
# tools/check_slots.sh on this checkout (passes) and on a small tree that breaks the rule
# (fails, naming the file), so the check can fail.
set -uo pipefail
script=$1
"$script" || { echo "FAIL: the checkout breaks the slot rule"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/codegen/toy" "$tmp/runtime/ops/toy" "$tmp/runtime/planner"
echo "// the toy family's spec" > "$tmp/codegen/toy/spec.cpp"
echo "// binds toy stages" > "$tmp/runtime/ops/toy/toy_ops.cpp"
echo "// a generic file" > "$tmp/runtime/planner/planner.cpp"
git -C "$tmp" init -q
"$script" "$tmp" || { echo "FAIL: a tree that keeps the rule was refused"; exit 1; }
echo "if (op == \"toy.run\") {}  // a special case for toy" >> "$tmp/runtime/planner/planner.cpp"
out=$("$script" "$tmp") && { echo "FAIL: a generic file naming a family passed"; exit 1; }
grep -q "runtime/planner/planner.cpp:2:.*names family 'toy'" <<<"$out" || { echo "FAIL: not named: $out"; exit 1; }
echo "ok"
