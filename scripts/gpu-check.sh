#!/usr/bin/env bash
# The GPU check, shaped by the lease rules (/work/.library/device: 15 minutes of device time in
# all, at most 10 minutes a command, only $OUT comes back: at most 8 files, 16 MiB each, 64 MiB
# together; the working tree that travels, carried paths included, at most 64 MiB; the GPU
# image has nvcc, CMake, ninja, PyTorch, ncu, compute-sanitizer, cuobjdump, but no Debian dev
# packages and no network).
#
#   scripts/gpu-check.sh --prepare [--from-build DIR] [BUNDLE]
#       On the build machine: builds the bundle (default .gpu-bundle, git-ignored): the GPU
#       test and check binaries for sm_90a with the instances below (or, with --from-build,
#       copies them from an existing build such as build/ci), static cudart and libstdc++.
#   scripts/gpu-check.sh --dry-run [--from-build DIR] [BUNDLE]
#       On the build machine (CI runs it): prepares the bundle (from DIR: no second CUDA build),
#       then fails if any rule is broken: a binary missing or needing a shared library outside
#       the C library; the step timeouts over 480 s; the device flow, run here with $OUT in a
#       temporary folder (every GPU step fails fast), leaving more than 8 files, a file over
#       16 MiB, more than 64 MiB, or a path deeper than 2 folders or with other characters;
#       the tree + bundle + carried wheels over 64 MiB; the report script failing.
#   scripts/gpu-check.sh [BUNDLE]
#       On the GPU machine, as one `run` command of at most 8 minutes, carrying the bundle:
#         run(command="bash scripts/gpu-check.sh", carry=[".gpu-bundle"], timeout_s=540)
#       Steps in order of value, each under its own timeout; a failed step does not stop the
#       rest. $OUT gets logs.tar.gz (every log, the ncu report), results.json, results.md;
#       the summary is printed last.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# The bundle: binaries, and the instances the lease builds (production hd128 bf16 g8 t64 s2,
# its g16 and 3- and 4-stage forms, a 128-token tile, f16 with D = 64, D = 256; every match and
# merge instance of those head dims).
bins=(test_cuda_gpu mactune_gpu_check test_profiler_gpu test_kernels_plan_graph)
bin_dirs=(tests/cuda tests/cuda tests/profiler tests/kernels)
default_filter="attend_cuda_hd128_g8_t64_s2_bf16;attend_cuda_hd128_g16_t64_s2_bf16;attend_cuda_hd128_g8_t64_s3_bf16;attend_cuda_hd128_g8_t64_s4_bf16;attend_cuda_hd128_g8_t128_s3_bf16;attend_cuda_hd64_g8_t64_s2_f16;attend_cuda_hd256_g8_t64_s2_bf16;full_cuda_hd128_g8_t64_s2_bf16;full_cuda_hd128_g8_t64_s4_bf16;full_cuda_hd64_g8_t64_s2_f16;full_cuda_hd256_g16_t64_s2_bf16;match_cuda_hd128_*_bf16;match_cuda_hd64_p1_f16;match_cuda_hd256_p1_bf16;merge_cuda_*"
# Shared libraries the GPU image is sure to have (glibc); anything else must be static.
allowed_libs='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$'
# compute-sanitizer's small filter: one attend instance, the small-items step, the plan.
sanitize_filter=${MACTUNE_SANITIZE_FILTER:-"Registry/AttendCuda.MatchesReference/attend_cuda_hd128_g8_t64_s2_bf16_G5_P7_Sbf16:StepCuda.ManySmallItemsMatchReference:PlanCuda.*"}

# Device steps: name|timeout seconds. Their sum is checked (<= 480) by --dry-run.
steps=(
  "env|15"
  "gpu_tests|110"
  "plan_graph|10"
  "memcheck|35"
  "racecheck|35"
  "synccheck|35"
  "initcheck|35"
  "table|100"
  "peer|35"
  "ncu|40"
  "profiler_tests|15"
  "report|5"
)
limit_s=480

die() { echo "gpu-check: error: $*" >&2; exit 2; }

prepare() {  # prepare FROM BUNDLE
  local from=$1 bundle=$2 build
  mkdir -p "$bundle"
  if [[ -n $from ]]; then
    build=$from
  else
    build=$root/build/gpu-bundle
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMACTUNE_BUILD_BENCH=OFF \
      -DMACTUNE_ENABLE_CUPTI=ON -DMACTUNE_ALL_INSTANCES=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      "-DMACTUNE_KERNEL_FILTER=${MACTUNE_GPU_CHECK_FILTER:-$default_filter}" >/dev/null ||
      die "cmake configure of $build failed"
    cmake --build "$build" --target "${bins[@]}" -j "${MACTUNE_JOBS:-2}" || die "build failed"
  fi
  local i
  for i in "${!bins[@]}"; do
    local b=$build/${bin_dirs[$i]}/${bins[$i]}
    [[ -x $b ]] || die "$b is missing (build it, or run --prepare without --from-build)"
    cp "$b" "$bundle/"
    strip --strip-debug "$bundle/${bins[$i]}" 2>/dev/null || true
  done
  {
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (dirty tree)')"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') from ${from:-build/gpu-bundle}"
    echo "instances:"
    "$bundle/mactune_gpu_check" --list | sed 's/^/  /'
  } >"$bundle/MANIFEST"
  case $bundle in
    "$root"/*)
      local rel=${bundle#"$root"/} exclude
      git -C "$root" check-ignore -q "$bundle" 2>/dev/null && return 0
      exclude=$(git -C "$root" rev-parse --git-path info/exclude 2>/dev/null) || exclude=""
      if [[ -n $exclude ]]; then
        [[ $exclude = /* ]] || exclude=$root/$exclude
        grep -qxF "/$rel/" "$exclude" 2>/dev/null || echo "/$rel/" >>"$exclude"
      fi ;;
  esac
}

# ---- The device flow.
device() {  # device BUNDLE
  local bundle=$1
  [[ -n ${OUT:-} ]] || die "OUT is not set (the device machine sets it; --dry-run sets a temporary one)"
  mkdir -p "$OUT"
  local logs
  logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-logs.XXXXXX")
  local summary=() failed=0
  local -A tmo
  local s
  for s in "${steps[@]}"; do tmo[${s%%|*}]=${s##*|}; done
  # step NAME CMD...: runs under its timeout, output to logs/NAME.log; one summary line.
  step() {
    local name=$1
    shift
    local t0=$SECONDS rc
    if declare -F "$1" >/dev/null; then  # a shell function: its commands carry their own timeouts
      "$@" >"$logs/$name.log" 2>&1
    else
      timeout --kill-after=5 "${tmo[$name]}" "$@" >"$logs/$name.log" 2>&1
    fi
    rc=$?
    local note="ok"
    if ((rc == 0)) && grep -q "no usable GPU" "$logs/$name.log"; then rc=4; note=x; fi
    if [[ $note == x ]]; then
      note="SKIPPED (no usable GPU)"
      failed=$((failed + 1))
    fi
    ((rc == 0 || rc == 4)) || { note="FAILED (exit $rc$( ((rc == 124 || rc == 137)) && echo ', timed out'))"; failed=$((failed + 1)); }
    summary+=("$(printf '%-15s %-40s %4ds of %4ds' "$name" "$note" $((SECONDS - t0)) "${tmo[$name]}")")
    echo "== $name: $note" >&2
  }
  env_step() {
    date -u '+date: %Y-%m-%d %H:%M:%S UTC'
    cat "$bundle/MANIFEST" 2>/dev/null || echo "no MANIFEST in $bundle"
    timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    local ok=$? b
    for b in "${bins[@]}"; do
      echo "== ldd $b"
      ldd "$bundle/$b" || ok=1
      ldd "$bundle/$b" | grep -q "not found" && ok=1
    done
    echo "== cuobjdump --list-elf mactune_gpu_check"
    timeout 10 cuobjdump --list-elf "$bundle/mactune_gpu_check" | sed 's/.*\(sm_[0-9a]*\).*/\1/' | sort | uniq -c
    ((PIPESTATUS[0] == 0)) || ok=1
    return $ok
  }
  step env env_step
  step gpu_tests "$bundle/test_cuda_gpu" "--gtest_output=json:$logs/gpu-tests.json"
  step plan_graph "$bundle/test_kernels_plan_graph"
  local tool
  for tool in memcheck racecheck synccheck initcheck; do
    step "$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bundle/test_cuda_gpu" "--gtest_filter=$sanitize_filter"
  done
  step table "$bundle/mactune_gpu_check" "$logs"
  step peer python3 "$root/scripts/gpu_peer.py" "$logs/results.json" "$logs/peer.json"
  step ncu ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section MemoryWorkloadAnalysis -k 'regex:(full|attend)_kernel' -c 2 -f -o "$logs/ncu" \
    "$bundle/mactune_gpu_check" --ncu
  step profiler_tests "$bundle/test_profiler_gpu"
  step report python3 "$root/scripts/gpu_report.py" "$logs/results.json" "$logs/peer.json" "$OUT"
  local tests
  tests=$(grep -HE "^\[  (PASSED|SKIPPED) \] [0-9]+ tests?|^\[  FAILED  \] " "$logs/gpu_tests.log" \
    "$logs/plan_graph.log" "$logs/profiler_tests.log" 2>/dev/null | sed "s|^$logs/|  |")
  # Everything else travels as one tarball; only the report's two files sit beside it.
  tar -czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null || echo "gpu-check: tar failed" >&2
  rm -rf "$logs"
  echo
  [[ -n $tests ]] && { echo "gpu tests:"; echo "$tests"; }
  echo "==== gpu-check summary ($failed failed of ${#summary[@]} steps; \$OUT: $(ls "$OUT" | tr '\n' ' '))"
  printf '%s\n' "${summary[@]}"
  [[ -f $OUT/results.md ]] && tail -n 4 "$OUT/results.md"
  ((failed == 0))
}

# ---- The rules, checked on the build machine.
dry_run() {  # dry_run BUNDLE
  local bundle=$1 bad=0 b
  fail() { echo "gpu-check --dry-run: FAIL: $*" >&2; bad=1; }
  # 1. Complete and self-sufficient.
  for b in "${bins[@]}"; do
    [[ -x $bundle/$b ]] || { fail "$b missing from $bundle"; continue; }
    local need
    need=$(readelf -d "$bundle/$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    local lib
    for lib in $need; do
      [[ $lib =~ $allowed_libs ]] || fail "$b needs $lib, which a GPU image without dev packages lacks"
    done
    ldd "$bundle/$b" 2>&1 | grep -q "not found" && fail "$b: ldd finds an unresolved library"
  done
  [[ -s $bundle/MANIFEST ]] || fail "no MANIFEST in $bundle"
  "$bundle/mactune_gpu_check" --list | grep -q . || fail "mactune_gpu_check --list lists no instance"
  # 2. Timeouts.
  local sum=0 s
  for s in "${steps[@]}"; do sum=$((sum + ${s##*|})); done
  ((sum <= limit_s)) || fail "step timeouts sum to ${sum} s (> ${limit_s} s)"
  # 3. The device flow here: what it leaves under $OUT.
  local out
  out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-out.XXXXXX")
  local t0=$SECONDS
  OUT=$out device "$bundle" >"$out.log" 2>&1
  local took=$((SECONDS - t0))
  grep -q "gpu-check summary" "$out.log" || fail "the device flow printed no summary (see $out.log)"
  local files total=0 n=0 f
  files=$(cd "$out" && find . -type f | sed 's|^\./||')
  for f in $files; do
    n=$((n + 1))
    local size
    size=$(stat -c %s "$out/$f")
    total=$((total + size))
    ((size <= 16 * 1024 * 1024)) || fail "\$OUT/$f is $size bytes (> 16 MiB)"
    [[ $f =~ ^([A-Za-z0-9._-]+/){0,2}[A-Za-z0-9._-]+$ ]] || fail "\$OUT/$f: too deep or odd characters"
  done
  ((n <= 8)) || fail "the device flow leaves $n files under \$OUT (> 8)"
  ((total <= 64 * 1024 * 1024)) || fail "\$OUT holds $total bytes (> 64 MiB)"
  for f in logs.tar.gz results.json results.md; do [[ -f $out/$f ]] || fail "\$OUT/$f not written"; done
  # 4. The report merges a table and its peer (fixture rows): the lease's last step works.
  local fx
  fx=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-report.XXXXXX")
  cat >"$fx/results.json" <<'JSON'
{"device": "fixture", "sms": 132, "arch": "sm_90", "runtime": "fixture", "copy_gbs": 4300,
 "graph_k1024_us": {"match": 8.0, "plan": 3.0, "step": 20.0},
 "eager_k1024_us": {"match": 9.0, "plan": 4.0, "step": 40.0},
 "rows": [{"context": 131072, "batch": 16, "group": 8, "hit": 0.0, "full_ms": 1.0,
           "mac_ms": 1.1, "full_gbs": 3400, "mac_skip": 0.0, "full_bytes": 1,
           "mac_match_ms": 0.01, "mac_plan_ms": 0.003, "mac_attend_ms": 1.0,
           "full_plan": "balanced 400 items", "mac_plan": "balanced 700 items"}],
 "targets": {}}
JSON
  echo '{"peer": "fixture", "torch": "0", "rows": [{"context": 131072, "batch": 16, "group": 8, "ms": 1.25}]}' \
    >"$fx/peer.json"
  if python3 "$root/scripts/gpu_report.py" "$fx/results.json" "$fx/peer.json" "$fx/out" >/dev/null; then
    grep -q "| 128K | 16 | 8 | 0.0 | 1.0000 | 1.2500 | 1.1000 | 0.80 | 0.91x | 1.14x |" "$fx/out/results.md" ||
      fail "gpu_report.py: the merged row is not as expected ($fx/out/results.md)"
  else
    fail "gpu_report.py failed on the fixture"
  fi
  python3 -m py_compile "$root/scripts/gpu_peer.py" || fail "scripts/gpu_peer.py does not compile"
  rm -rf "$fx"
  # 5. What travels: tracked + untracked-not-ignored files, shared/, the bundle, carried wheels.
  local tree=0 carried=0
  tree=$(cd "$root" && git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}')
  [[ -d $root/shared ]] && tree=$((tree + $(du -sb "$root/shared" | cut -f1)))
  local bsize
  bsize=$(du -sb "$bundle" | cut -f1)
  [[ -d $root/.whl ]] && carried=$(du -sb "$root/.whl" | cut -f1)
  local travel=$((tree + bsize + carried))
  ((travel <= 64 * 1024 * 1024)) || fail "tree $tree + bundle $bsize + wheels $carried = $travel bytes (> 64 MiB)"
  mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
  echo "gpu-check --dry-run: bundle $bundle: ${#bins[@]} binaries, $(mb "$bsize") MiB; step" \
    "timeouts $sum s of $limit_s; device flow here ${took} s, \$OUT $n files, $total bytes;" \
    "travels $(mb "$travel") MiB (tree $(mb "$tree") + bundle $(mb "$bsize") + wheels" \
    "$(mb "$carried")) of 64 MiB"
  rm -rf "$out" "$out.log"
  ((bad == 0)) && echo "gpu-check --dry-run: every rule holds"
  return $bad
}

mode=device from="" bundle=""
while (($#)); do
  case $1 in
    --prepare) mode=prepare ;;
    --dry-run) mode=dry-run ;;
    --from-build) from=${2:?--from-build needs a build directory}; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) bundle=$1 ;;
  esac
  shift
done
[[ -z $from || -d $from ]] || die "--from-build $from: no such directory"
case $mode in
  prepare) prepare "$from" "${bundle:-$root/.gpu-bundle}"; du -sh "${bundle:-$root/.gpu-bundle}" ;;
  dry-run)
    bundle=${bundle:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")}
    prepare "$from" "$bundle" && dry_run "$bundle" ;;
  device)
    bundle=${bundle:-$root/.gpu-bundle}
    [[ -x $bundle/test_cuda_gpu ]] || die "$bundle is not a bundle (scripts/gpu-check.sh --prepare, and carry it)"
    device "$bundle" ;;
esac
