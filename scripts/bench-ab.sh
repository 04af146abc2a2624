#!/usr/bin/env bash
# Before and after in one bench run: every xferctl client of SCENARIO runs
# twice, as written (this tree's xferctl) and as "NAME (before)" with an
# older build's xferctl, the peers once, all on the same link one right
# after the other (xfer-bench interleaves the clients per dataset and
# repeat). The scenario with the added clients is written into OUT.
#   scripts/bench-ab.sh SCENARIO.toml BEFORE_XFERCTL OUT [xfer-bench options]
# e.g. with d47ecf8's xferctl built in a worktree:
#   git worktree add /tmp/d47 d47ecf8 && cmake -S /tmp/d47 -B /tmp/d47/build \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/d47/build --target xferctl
#   scripts/bench-ab.sh tests/bench/floor-wan.toml /tmp/d47/build/bin/xferctl \
#     bench/results/floor-wan-ab-$(git rev-parse --short HEAD) --repeat 3
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
scenario=$1 before=$2 out=$3
shift 3
[ -f "$scenario" ] || { echo "bench-ab.sh: no scenario $scenario" >&2; exit 2; }
[ -x "$before" ] || { echo "bench-ab.sh: $before is not an executable xferctl" >&2; exit 2; }
[ -x build/bin/xfer-bench ] || { echo "bench-ab.sh: build/bin/xfer-bench missing (scripts/build.sh release)" >&2; exit 2; }
mkdir -p "$out"
ab="$out/$(basename "$scenario" .toml)-ab.toml"
before_abs=$(readlink -f "$before")
# Each [[client]] block of kind xferctl again, renamed, with its program.
# Datasets and plans stay where the scenario named them (its folder).
awk -v prog="$before_abs" '
  function flush() {
    if (block == "") return
    out = out block
    if (is_client && is_xferctl) {
      copy = block
      sub(/name = "[^"]*"/, "name = \"" name " (before)\"\nprogram = \"" prog "\"", copy)
      out = out "\n" copy
    }
    block = ""
  }
  /^\[/ { flush(); is_client = ($0 == "[[client]]"); is_xferctl = 0; name = "" }
  /^name = "/ && is_client { n = $0; sub(/^name = "/, "", n); sub(/".*$/, "", n); name = n }
  /^kind = "xferctl"/ { is_xferctl = 1 }
  { block = block $0 "\n" }
  END { flush(); printf "%s", out }
' "$scenario" > "$ab"
# Relative paths in the scenario (an [hla] plan) resolve against its folder.
sed -i "s|^plan = \"\([^/\"][^\"]*\)\"|plan = \"$(readlink -f "$(dirname "$scenario")")/\1\"|" "$ab"
echo "bench-ab.sh: $ab ($(grep -c '(before)' "$ab") clients from $before_abs)"
exec build/bin/xfer-bench "$ab" --out "$out" "$@"
