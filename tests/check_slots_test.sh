#!/usr/bin/env bash
# tools/check_slots.sh on this checkout (passes) and on a small tree that breaks the rule
# (fails, naming the file), so the check can fail.
set -uo pipefail
script=$1
# The checkout itself, where it is a git work tree (a copy of the tree carried elsewhere may not be).
if git -C "$(dirname "$script")/.." rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  "$script" || { echo "FAIL: the checkout breaks the slot rule"; exit 1; }
else
  echo "the checkout is not a git work tree: only the planted trees are checked"
fi
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
# Within an identifier, in another case, in a file name, in a test folder that is not the
# family's: each is caught.
for line in '#include "toy_ops.hpp"' 'int op_family_TOY();'; do
  echo "// a generic file" > "$tmp/runtime/planner/planner.cpp"
  echo "$line" >> "$tmp/runtime/planner/planner.cpp"
  "$script" "$tmp" >/dev/null && { echo "FAIL: passed: $line"; exit 1; }
done
echo "// a generic file" > "$tmp/runtime/planner/planner.cpp"
touch "$tmp/runtime/planner/toy_special.cpp"
out=$("$script" "$tmp")
grep -q "toy_special.cpp: its name names family 'toy'" <<<"$out" || { echo "FAIL: a file name passed: $out"; exit 1; }
rm "$tmp/runtime/planner/toy_special.cpp"
mkdir -p "$tmp/tests/other" && echo "// toy.scale" > "$tmp/tests/other/test_x.cpp"
"$script" "$tmp" >/dev/null && { echo "FAIL: a test in another family's folder passed"; exit 1; }
rm "$tmp/tests/other/test_x.cpp"
# A generic Python test at the top of tests/ may take a family as its example; elsewhere not.
echo "# toy.scale" > "$tmp/tests/check_x.py"
"$script" "$tmp" >/dev/null || { echo "FAIL: a generic Python test at the top of tests/ was refused"; exit 1; }
echo "# toy.scale" > "$tmp/tests/other/check_x.py"
"$script" "$tmp" >/dev/null && { echo "FAIL: a Python test in another family's folder passed"; exit 1; }
rm -r "$tmp/tests"
"$script" "$tmp" >/dev/null || { echo "FAIL: the clean tree was refused"; exit 1; }
rm -rf "$tmp/.git"
"$script" "$tmp" >/dev/null 2>&1; [ $? = 2 ] || { echo "FAIL: not a work tree was not exit 2"; exit 1; }
echo "ok"
