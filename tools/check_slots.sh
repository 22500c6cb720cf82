#!/usr/bin/env bash
# The family-slot rule: no file outside a folder named after a family names that family, in
# its text or its file name. The families are the folders of codegen/. A name counts wherever
# it stands between characters that are not letters or digits (so `op_family_toy` and
# `"toy_ops.hpp"` name a family toy), in any case. Docs, the README and the generated registry
# may name families; so may the generic tests at the top of tests/ (C++ and Python), which take
# real families as their examples: adding a family edits none of them. Prints each offending line; exit 1
# if there is one, 2 when ROOT is not a git work tree.
#   tools/check_slots.sh [ROOT]   (default: this checkout)
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "check_slots: $PWD is not a git work tree" >&2; exit 2; }
families=$(find codegen -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
[ -n "$families" ] || { echo "check_slots: no family folders in codegen/" >&2; exit 2; }
files=$(git ls-files --cached --others --exclude-standard -- . ':!docs' ':!README.md' ':!registry' \
          ':!build.json' ':!aot' ':(exclude,glob)tests/*.cpp' ':(exclude,glob)tests/*.hpp' \
          ':(exclude,glob)tests/*.py' ':!tests/fuzz' \
          ':!tests/golden') || { echo "check_slots: git ls-files failed" >&2; exit 2; }
status=0
for f in $families; do
  word="(^|[^[:alnum:]])$f([^[:alnum:]]|\$)"
  while IFS= read -r file; do
    [ -n "$file" ] || continue
    case "/$file" in
      */"$f"/*) continue ;;
    esac
    if grep -qiE -- "$word" <<<"${file##*/}"; then
      echo "$file: its name names family '$f' outside a folder named $f"
      status=1
    fi
    [ -f "$file" ] || continue
    hits=$(grep -nIiE -- "$word" "$file" 2>/dev/null) || continue
    while IFS= read -r h; do
      echo "$file:$h: names family '$f' outside a folder named $f"
    done <<<"$hits"
    status=1
  done <<<"$files"
done
[ $status = 0 ] && echo "check_slots: ok (families: $(echo $families | tr '\n' ' '))"
exit $status
