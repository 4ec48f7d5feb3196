#!/usr/bin/env bash
# The GPU check of issue 8, in two halves:
#
#   scripts/gpu-check.sh --prepare [BUNDLE]   on the build machine (this repo's toolchain and
#       Debian packages): builds the CUDA test and check binaries (static cudart, static
#       libstdc++; no yaml-cpp/SQLite) into BUNDLE (default .gpu-bundle, git-ignored locally)
#       and lists their shared libraries. The bundle's instances: the default grid plus one
#       instance of each code path the default grid does not reach (f16 and D = 64, D = 256,
#       G up to 16, two MMA steps a warp with 3 stages), so the gpu tests cover them all;
#       MACTUNE_GPU_CHECK_FILTER overrides the list (globs, ";"-separated).
#
#   scripts/gpu-check.sh OUTDIR [BUNDLE]       on the GPU machine (CUDA driver, no packages, no
#       network), in at most ~8 minutes: checks `ldd` first, runs the gpu tests, measures the
#       device-to-device copy bandwidth, match time and the full vs MAC table; writes
#       env.txt, ldd.txt, gpu-tests.{json,log}, results.{json,md} and gpu-check.log to OUTDIR.
#
# Copy OUTDIR/results.md into docs/gpu-results.md with the date, commit and GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bins=(test_cuda_gpu test_cuda_host mactune_gpu_check)
# More gpu-labelled tests: the device planner in a CUDA graph (issue 4) and the profiler's
# CUPTI trace and DRAM bytes vs modeled at 128K (issue 7; libcupti is loaded at run time from
# the GPU machine's toolkit).
extra_bins=(tests/schedules/test_schedules_plan_graph tests/profiler/test_profiler_gpu)

if [[ ${1:-} == --prepare ]]; then
  set -e
  bundle=${2:-$root/.gpu-bundle}
  build=$root/build/gpu-bundle
  filter=${MACTUNE_GPU_CHECK_FILTER:-"attend_cuda_hd128_g8_t64_s2_bf16;attend_cuda_hd128_g16_t64_s2_bf16;attend_cuda_hd64_g8_t64_s2_f16;attend_cuda_hd256_g8_t64_s2_bf16;attend_cuda_hd128_g8_t128_s3_bf16;full_cuda_hd128_g8_t64_s2_bf16;full_cuda_hd64_g8_t64_s2_f16;full_cuda_hd256_g16_t64_s2_bf16;match_cuda_hd128_*_bf16;match_cuda_hd64_p1_f16;match_cuda_hd256_p1_bf16;merge_cuda_*"}
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMACTUNE_BUILD_BENCH=OFF -DMACTUNE_ENABLE_CUPTI=ON \
    -DMACTUNE_ALL_INSTANCES=ON "-DMACTUNE_KERNEL_FILTER=$filter" >/dev/null
  cmake --build "$build" --target "${bins[@]}" "${extra_bins[@]##*/}" \
    -j "$(nproc 2>/dev/null || echo 2)"
  mkdir -p "$bundle"
  for b in "${bins[@]/#/tests/cuda/}" "${extra_bins[@]}"; do
    cp "$build/$b" "$bundle/"
    strip --strip-debug "$bundle/${b##*/}" 2>/dev/null || true
  done
  {
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (dirty tree)')"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
    echo "instances:"
    "$bundle/mactune_gpu_check" --list | sed 's/^/  /'
  } >"$bundle/MANIFEST"
  case $bundle in
    "$root"/*) rel=${bundle#"$root"/}
       grep -qxF "/$rel/" "$root/.git/info/exclude" 2>/dev/null || echo "/$rel/" >>"$root/.git/info/exclude" ;;
  esac
  for b in "${bins[@]}" "${extra_bins[@]##*/}"; do echo "== $b"; ldd "$bundle/$b"; done
  du -sh "$bundle"
  exit 0
fi

out=${1:?usage: scripts/gpu-check.sh OUTDIR [BUNDLE] | --prepare [BUNDLE]}
bundle=${2:-$root/.gpu-bundle}
mkdir -p "$out"
status=0
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  cat "$bundle/MANIFEST" 2>/dev/null || echo "no MANIFEST in $bundle"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1
} | tee "$out/env.txt"

# Shared libraries first: a missing one costs seconds here, not a failed run later.
: >"$out/ldd.txt"
for b in "${bins[@]}" "${extra_bins[@]##*/}"; do
  if [[ ! -x $bundle/$b ]]; then
    echo "gpu-check: $bundle/$b is missing (run scripts/gpu-check.sh --prepare on the build machine)" >&2
    exit 3
  fi
  { echo "== $b"; ldd "$bundle/$b"; } >>"$out/ldd.txt" 2>&1
done
if grep -q "not found" "$out/ldd.txt"; then
  cat "$out/ldd.txt" >&2
  echo "gpu-check: unresolved shared libraries (see $out/ldd.txt)" >&2
  exit 3
fi

echo "== gpu tests"
timeout 60 "$bundle/test_cuda_host" --gtest_brief=1 >"$out/host-tests.log" 2>&1 || status=1
timeout 200 "$bundle/test_cuda_gpu" --gtest_output="json:$out/gpu-tests.json" \
  >"$out/gpu-tests.log" 2>&1 || status=1
for b in "${extra_bins[@]##*/}"; do
  timeout 90 "$bundle/$b" --gtest_output="json:$out/$b.json" >"$out/$b.log" 2>&1 || status=1
  echo "$b: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$b.log" | tr '\n' ' ')"
done
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" "$out/gpu-tests.log" | tail -20
if grep -q "no usable GPU" "$out/gpu-tests.log"; then
  echo "gpu-check: the tests found no usable GPU: $(grep -m1 -o 'no usable GPU.*' "$out/gpu-tests.log")" >&2
  exit 4
fi

echo "== bandwidth, match and full vs MAC"
PYTHONUNBUFFERED=1 timeout 240 "$bundle/mactune_gpu_check" "$out" 2>&1 | tee "$out/gpu-check.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
exit "$status"
