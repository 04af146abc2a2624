#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root: installs what
# is missing, builds with sanitizers, runs every test (unit and integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer)"
bash scripts/build.sh sanitize
echo "== tests"
cd build-san
ctest -j"$(nproc)" --output-on-failure --timeout 600
