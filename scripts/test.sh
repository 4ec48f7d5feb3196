#!/usr/bin/env bash
# Sets everything up, builds the `ci` preset and runs every test. GPU tests (label `gpu`)
# report Skipped where no GPU is usable. Extra arguments go to ctest (e.g. -L host).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh ci
ctest --preset ci -j "$(nproc 2>/dev/null || echo 2)" "$@"
