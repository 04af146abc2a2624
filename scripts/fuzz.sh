#!/usr/bin/env bash
# libFuzzer targets of the parsers that read what callers control.
#   fuzz.sh build                 configure and build build-fuzz/ (clang)
#   fuzz.sh run NAME SECONDS      run fuzz_NAME for SECONDS from its seed corpus;
#                                 fails on any crash, leak, timeout or sanitizer report
#   fuzz.sh all SECONDS           build, then every target in turn
# Targets: manifest, progress, config, submit, table, power_model, kernel_journal, netrc, credentials, metrics_http. Seeds: tests/fuzz/corpus/NAME/
# (checked in); what a run finds new goes to build-fuzz/corpus/NAME/.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(manifest progress config submit table power_model kernel_journal netrc credentials metrics_http)  # as tests/fuzz/sources.cmake

build() {
  # -O1 and line tables only (libFuzzer's own advice): the tree compiles all of
  # libxfer under three sanitizers, and -O2 -g made it the suite's longest step
  # (487 s of a 20-min run); stack traces keep their file and line.
  local flags="-O1 -gline-tables-only -DNDEBUG"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DXFER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
}

run() {
  local name=$1 secs=$2
  local bin=build-fuzz/bin/fuzz_$name work=build-fuzz/corpus/$name
  [ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (fuzz.sh build)" >&2; exit 2; }
  mkdir -p "$work" build-fuzz/artifacts
  echo "fuzz_$name: ${secs}s from tests/fuzz/corpus/$name"
  # -timeout: one input may take 10 s at most; rss_limit: 2 GiB.
  local log=build-fuzz/fuzz_$name.log rc=0
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/artifacts/"$name"- "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    echo "fuzz_$name: FAILED (exit $rc); the input is in build-fuzz/artifacts/, the whole log in $log"
  else
    grep -E '^(#[0-9]+ +DONE|stat::(number_of_executed_units|new_units_added|peak_rss_mb))' "$log" || true
    echo "fuzz_$name: no crash in ${secs}s"
  fi
  return "$rc"
}

case "${1:-}" in
  build) build ;;
  run) run "${2:?target}" "${3:?seconds}" ;;
  all) build; for t in "${targets[@]}"; do run "$t" "${2:-30}"; done ;;
  *) echo "usage: fuzz.sh build | run NAME SECONDS | all SECONDS" >&2; exit 2 ;;
esac
