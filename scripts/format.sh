#!/usr/bin/env bash
# Formats the C++ sources with the project's .clang-format (Debian's clang-format 14, as
# installed by scripts/install-deps.sh).
# Usage: scripts/format.sh            rewrite every .cpp/.hpp in place
#        scripts/format.sh --check    change nothing; list the files that differ, exit 1 if any
#                                     (the CTest test format.check runs this)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
command -v clang-format >/dev/null || { echo "format.sh: clang-format is not installed (scripts/install-deps.sh)" >&2; exit 2; }
# Tracked and new (not ignored) files when this is a clone, else every source under the project's folders.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp')
else
  mapfile -t files < <(find admission bench cli core diagnose inventory kube server test util -name '*.cpp' -o -name '*.hpp' | sort)
fi
case ${1:-} in
  "") clang-format -i "${files[@]}" ;;
  --check)
    bad=()
    for f in "${files[@]}"; do
      clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done
    if ((${#bad[@]})); then
      printf 'not formatted (run scripts/format.sh): %s\n' "${bad[@]}" >&2
      exit 1
    fi
    echo "format.sh: ${#files[@]} files formatted as .clang-format says"
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
