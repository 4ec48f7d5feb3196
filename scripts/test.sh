#!/usr/bin/env bash
# Sets everything up, builds the `ci` preset and runs every test; then builds the libFuzzer
# targets (the `fuzz` preset, clang) and runs each for a bounded time. GPU tests (label `gpu`)
# report Skipped where no GPU is usable. Extra arguments go to the main ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
bash scripts/setup.sh ci
status=0
ctest --preset ci -j "$jobs" "$@" || status=$?
if [[ -z "${MACTUNE_SKIP_FUZZ:-}" ]]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target fuzzers -j "$jobs"
  ctest --preset fuzz -j "$jobs" || status=$?
fi
exit "$status"
