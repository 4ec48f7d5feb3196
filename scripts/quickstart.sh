#!/usr/bin/env bash
# The main job on a fresh machine: set everything up, build the release preset, and tune this
# machine's CPU with the quick spec (about 3 minutes on 2 cores, the baseline included):
#   results/cpu-quick.db        every measurement (SQLite; `mactune db info --db ...`)
#   dispatch/cpu-quick.json     the dispatch table a serving engine loads
#   reports/cpu-quick/          report.md with SVG plots of speedup and break-even
# Another spec: SPEC=configs/h200.yaml bash scripts/quickstart.sh. Extra arguments go to
# `mactune tune` (e.g. --shard 0/4). Running it again resumes: stored points are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${SPEC:-configs/cpu-quick.yaml}
bash scripts/setup.sh release
mactune=build/release/cli/mactune
"$mactune" info
"$mactune" tune "$spec" "$@"
