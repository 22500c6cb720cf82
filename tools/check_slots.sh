#!/usr/bin/env bash
# The family-slot rule: no file outside a folder named after a family names that family. The
# families are the folders of codegen/. Docs, the README and the generated registry may name
# them; so may the generic tests, which take real families as their examples (tests/*.cpp,
# tests/fuzz/): adding a family edits none of them. Prints each offending line; exit 1 if any.
#   tools/check_slots.sh [ROOT]   (default: this checkout; ROOT must be a git work tree)
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2
families=$(find codegen -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
[ -n "$families" ] || { echo "check_slots: no family folders in codegen/" >&2; exit 2; }
status=0
for f in $families; do
  # Tracked files (and new ones not ignored) outside docs, the README, generated files, and
  # every folder named after this family.
  while IFS= read -r file; do
    case "/$file" in
      */"$f"/*) continue ;;
    esac
    hits=$(grep -nwI -- "$f" "$file" 2>/dev/null) || continue
    while IFS= read -r h; do
      echo "$file:$h: names family '$f' outside a folder named $f"
    done <<<"$hits"
    status=1
  done < <(git ls-files --cached --others --exclude-standard -- . ':!docs' ':!README.md' ':!registry' \
             ':!build.json' ':!aot' ':!tests/*.cpp' ':!tests/*.hpp' ':!tests/fuzz' ':!tests/golden')
done
[ $status = 0 ] && echo "check_slots: ok (families: $(echo $families | tr '\n' ' '))"
exit $status
