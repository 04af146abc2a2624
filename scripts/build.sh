#!/usr/bin/env bash
# Configures and builds one tree. build/ is the release build (binaries in
# build/bin/); build-san/ has AddressSanitizer and UndefinedBehaviorSanitizer.
#   build.sh [release|sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  sanitize) dir=build-san; flags=(-DCMAKE_BUILD_TYPE=Debug -DXFER_SANITIZE=ON) ;;
  *) echo "build.sh: release or sanitize, not '$kind'" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
