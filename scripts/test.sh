#!/usr/bin/env bash
# Sets everything up, builds the `ci` preset and runs every test; then builds the libFuzzer
# targets (the `fuzz` preset, clang) and runs each for a bounded time. GPU tests (label `gpu`)
# report Skipped where no GPU is usable; on an AVX-512 host the CPU engine's tests
# (test_cpu_engine) run a second time with the ISA capped at avx2. The Slurm test (label
# `slurm`) starts its own single-node cluster; in CI (CI=true) it must start, elsewhere it
# reports Skipped with what failed. Then the simt mutation check (scripts/mutate.sh, every
# mutation of scripts/mutations.txt), and, outside CI, the quick start's build (the `quick` preset).
# Extra arguments go to the main ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${CI:-} == true ]]; then
  export MACTUNE_REQUIRE_SLURM=1
fi
jobs=$(nproc 2>/dev/null || echo 2)
bash scripts/setup.sh ci
status=0
ctest --preset ci -j "$jobs" "$@" || status=$?
# The mutation check (scripts/mutate.sh): each seeded one-line kernel bug of the list must fail
# its simt tests, and the unmutated kernels must pass them. With ccache (setup.sh installs it)
# only the mutated family's TUs compile: all 24 in 205 s on 2 cores (2026-12-02, load 3-5).
# MACTUNE_SKIP_MUTATION=1 skips it.
if [[ -z "${MACTUNE_SKIP_MUTATION:-}" ]] && grep -q '^MACTUNE_SIMT:BOOL=ON' build/ci/CMakeCache.txt; then
  bash scripts/mutate.sh || status=$?
fi
# On an AVX-512 host, the CPU engine's tests once more as an AVX2-only host would run them
# (MACTUNE_CPU_ISA caps the paths `auto` may pick; kernels/cpu/isa.h).
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  echo "test: the CPU engine's tests again with MACTUNE_CPU_ISA=avx2"
  MACTUNE_CPU_ISA=avx2 build/ci/tests/cpu/test_cpu_engine --gtest_brief=1 || status=$?
fi
# The quick start's build (scripts/quickstart.sh): the `mactune` CLI alone, with the layers above
# kernels/ in unity batches (MACTUNE_UNITY_BUILD), which a developer's ci build does not use; a
# name that two files of one folder both define breaks it. In CI the ci build above already
# compiled those batches (setup.sh turns them on there), so it is not built twice.
# MACTUNE_SKIP_QUICK=1 skips it.
if [[ -z "${MACTUNE_SKIP_QUICK:-}" && ${CI:-} != true ]]; then
  bash scripts/setup.sh quick || status=$?
fi
if [[ -z "${MACTUNE_SKIP_FUZZ:-}" ]]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target fuzzers -j "$jobs"
  ctest --preset fuzz -j "$jobs" || status=$?
fi
exit "$status"
