#!/usr/bin/env bash
# The main job on a fresh machine: set everything up, build the release preset, and tune this
# machine's device (the CPU when there is no GPU) into an embedded SQLite database.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh release
exec build/release/cli/mactune info "$@"
