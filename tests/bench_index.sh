#!/usr/bin/env bash
# Every folder under bench/results is listed in its index (README.md) and is
# named <what>-<commit>, the commit being one of this repository's; nothing
# is left under tests/ or named after a work session.
set -u
top=${1:?source dir}
cd "$top" || exit 1
idx=bench/results/README.md
bad=0
[ -f "$idx" ] || { echo "no $idx"; exit 1; }
have_git=1
git rev-parse --git-dir >/dev/null 2>&1 || have_git=0
n=0
for d in bench/results/*/; do
  name=$(basename "$d")
  n=$((n + 1))
  grep -q "^| \`$name\` |" "$idx" || { echo "$name: not in $idx"; bad=1; }
  commit=${name##*-}
  [[ "$commit" =~ ^[0-9a-f]{7,40}$ ]] || { echo "$name: does not end in a commit"; bad=1; continue; }
  if [ $have_git = 1 ] && ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "$name: $commit is no commit of this repository"; bad=1
  fi
done
grep -o '^| `[^`]*` |' "$idx" | sed 's/^| `\(.*\)` |$/\1/' | while read -r name; do
  [ -d "bench/results/$name" ] || { echo "$idx lists $name, which does not exist"; exit 1; }
done || bad=1
stray=$(find . -path ./build\* -prune -o -type d \( -name 'stop[0-9]*' -o -path './tests/bench/results' \) -print | head -3)
[ -z "$stray" ] || { echo "results outside bench/results or named after a session: $stray"; bad=1; }
[ $have_git = 1 ] || echo "not a git checkout: commits not checked"
echo "$n result folders checked"
exit $bad
