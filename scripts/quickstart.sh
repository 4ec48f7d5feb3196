#!/usr/bin/env bash
# The main job on a fresh machine: set up what the `mactune` CLI needs, build that target alone
# (the `quick` preset: no tests, benchmarks or fuzzers, which `scripts/test.sh` builds; the CUDA
# kernels only where nvidia-smi lists a GPU; the layers above kernels/ at -O1), and tune this
# machine's device with its quick spec: configs/cuda-quick.yaml where a GPU is usable,
# configs/cpu-quick.yaml otherwise (about 1¼ minutes on 2 cores, the baseline included):
#   results/<spec>.db        every measurement (SQLite; `mactune db info --db ...`)
#   dispatch/<spec>.json     the dispatch table a serving engine loads
#   reports/<spec>/          report.md with SVG plots of speedup and break-even
# Another spec: SPEC=configs/h200.yaml bash scripts/quickstart.sh. Extra arguments go to
# `mactune tune` (e.g. --shard 0/4). Running it again resumes: stored points are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh quick
mactune=build/quick/cli/mactune
"$mactune" info
spec=${SPEC:-configs/$("$mactune" info --backend)-quick.yaml}
"$mactune" tune "$spec" "$@"
