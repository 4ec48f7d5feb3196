#!/usr/bin/env bash
# The GPU check, shaped by the lease (/work/.library/device; the plan in docs/gpu-lease.md):
# 15 minutes of device time in all, machine starts counted; at most 10 minutes a command; only
# $OUT comes back (at most 8 files, 16 MiB each, 64 MiB together); the working tree that
# travels, carried paths included, at most 64 MiB; the GPU image has nvcc, PyTorch, ncu,
# compute-sanitizer and cuobjdump, but no Debian dev packages and no network.
#
#   scripts/gpu-check.sh --prepare [--from-build DIR] [BUNDLE]
#       On the build machine: builds the bundle (default .gpu-bundle, git-ignored): the GPU
#       test and check binaries for sm_90a with the instances below (or, with --from-build,
#       copies them from a build such as build/ci), its MANIFEST (commit, glibc it needs,
#       instances) and plan.jsonl (the grid's shapes, for the peer).
#   scripts/gpu-check.sh --dry-run [--from-build DIR] [--show] [BUNDLE]
#       On the build machine (CI runs it): checks every lease rule on the bundle (prepared
#       from DIR first when given) and prints the time plan; --show prints the dry report.
#   scripts/gpu-check.sh [--part 1|2] [--rerun STEP,...] [BUNDLE]
#       On the GPU machine, one `run` command a part, carrying the bundle:
#         run(command="bash scripts/gpu-check.sh", carry=[".gpu-bundle"], timeout_s=320)
#         run(command="bash scripts/gpu-check.sh --part 2", carry=[".gpu-bundle"], timeout_s=220)
#       Part 1 prints the exact part-2 command last, with --rerun naming what failed in it.
#       Steps run in order of value under the part's budget (a step that no longer fits is
#       skipped, saying so); a failing step stops only itself. After every step $OUT holds
#       the step states (steps.jsonl), every record measured so far (results.jsonl,
#       again.jsonl, peer.jsonl: JSON lines, appended as measured), the report (results.md,
#       results.json) and logs.tar.gz (every log, gtest XML, ncu report, SASS).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/gpu_plan.sh"

die() { echo "mactune: error: gpu-check: $*" >&2; exit 2; }
version_lt() { [[ $1 != "$2" && $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1) == "$1" ]]; }

prepare() {  # prepare FROM BUNDLE
  local from=$1 bundle=$2 build i
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
  for i in "${!bins[@]}"; do
    local b=$build/${bin_dirs[$i]}/${bins[$i]}
    [[ -x $b ]] || die "$b is missing (build it, or run --prepare without --from-build)"
    cp "$b" "$bundle/"
    strip --strip-debug "$bundle/${bins[$i]}" 2>/dev/null || true
  done
  local glibc
  glibc=$(for i in "${bins[@]}"; do readelf -V --wide "$bundle/$i"; done |
    grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  "$bundle/mactune_gpu_check" plan >"$bundle/plan.jsonl" || die "mactune_gpu_check plan failed"
  {
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (dirty tree)')"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') from ${from:-build/gpu-bundle}"
    echo "glibc_required: ${glibc:-unknown}"
    echo "instances:"
    "$bundle/mactune_gpu_check" list | sed 's/^/  /'
  } >"$bundle/MANIFEST"
}

# ---- The device flow: one part, its steps in order, the state of each recorded as it ends.
device() {  # device BUNDLE PART STEP...
  local bundle=$1 part=$2
  shift 2
  [[ -n ${OUT:-} ]] || die "OUT is not set (the device machine sets it; --dry-run sets a temporary one)"
  mkdir -p "$OUT"
  logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-logs.XXXXXX")
  local t_start=$SECONDS budget=${budget_s[$part]} name
  bundle_why=""
  cp "$bundle/MANIFEST" "$logs/" 2>/dev/null
  echo "==== gpu-check part $part (budget $budget s): $(for name in env "$@"; do printf '%s %s s, ' "$name" "${cap_s[$name]}"; done)"
  for name in env "$@"; do
    run_step "$name"
  done
  echo
  echo "==== gpu-check part $part: $((SECONDS - t_start)) s of $budget; \$OUT: $(ls "$OUT" | tr '\n' ' ')"
  python3 "$root/scripts/gpu_steps.py" summary "$OUT/steps.jsonl"
  [[ -f $OUT/results.md ]] && sed -n '/^## Targets/,/^## Full/p' "$OUT/results.md" | sed '/^## Full/d'
  local again
  again=$(python3 "$root/scripts/gpu_steps.py" failed "$OUT/steps.jsonl")
  if ((part == 1)); then
    echo "next: run(command=\"bash scripts/gpu-check.sh --part 2${again:+ --rerun $again}\", carry=[\".gpu-bundle\"], timeout_s=${call_timeout_s[2]})"
  fi
  rm -rf "$logs"
  [[ -z $again ]]
}

run_step() {  # run_step NAME: under min(cap, what the budget leaves); then state, report, tar
  local name=$1 cap=${cap_s[$1]}
  local left=$((budget - (SECONDS - t_start) - tail_s))
  local limit=$((cap < left ? cap : left)) t0=$SECONDS rc=0
  step_skip="" rec=()
  if ((limit < cap / 2 || limit < 3)); then
    step_skip="the part's budget: ${left} s left of ${budget} s, this step needs up to ${cap} s"
    rec=(--deferred)
  elif [[ ${needs_bundle[$name]:-0} == 1 && -n $bundle_why ]]; then
    step_skip=$bundle_why
  else
    "step_$name" "$limit"
    rc=$?
  fi
  python3 "$root/scripts/gpu_steps.py" record "$OUT/steps.jsonl" --name "$name" --part "$part" \
    --rc "$rc" --seconds $((SECONDS - t0)) --limit "$limit" ${step_skip:+--skip "$step_skip"} \
    "${rec[@]}"
  local have=() f
  for f in results again peer steps; do [[ -f $OUT/$f.jsonl ]] && have+=("$OUT/$f.jsonl"); done
  python3 "$root/scripts/gpu_report.py" "$OUT" "${have[@]}" >"$logs/report.log" 2>&1
  tar -czf "$logs.tar.gz" -C "$logs" . 2>/dev/null && mv -f "$logs.tar.gz" "$OUT/logs.tar.gz"
}

limited() {  # limited LIMIT CMD...: the step's command under its limit
  local limit=$1
  shift
  timeout --kill-after=5 "$limit" "$@"
}

step_env() {
  local ok=0 b have need
  {
    date -u '+date: %Y-%m-%d %H:%M:%S UTC'
    cat "$bundle/MANIFEST"
    echo "== uname -r: $(uname -r)"
    timeout 5 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    need=$(sed -n 's/^glibc_required: //p' "$bundle/MANIFEST")
    echo "== glibc: this machine ${have:-unknown}, the bundle needs ${need:-unknown}"
    if [[ -z $have || -z $need ]] || version_lt "$have" "$need"; then
      bundle_why="the bundle needs glibc ${need:-?}, this machine has ${have:-?}: rebuild it there"
    fi
    for b in "${bins[@]}"; do
      echo "== ldd $b"
      ldd "$bundle/$b" 2>&1
      if ldd "$bundle/$b" 2>&1 | grep -q "not found"; then
        bundle_why=${bundle_why:-"$b needs a library this machine lacks (ldd in env.log)"}
      fi
    done
    if [[ -z $bundle_why ]]; then
      echo "== probe"
      timeout 10 "$bundle/mactune_gpu_check" probe
    fi
    if command -v cuobjdump >/dev/null; then
      echo "== cuobjdump --list-elf mactune_gpu_check"
      timeout 5 cuobjdump --list-elf "$bundle/mactune_gpu_check" | sed 's/.*\(sm_[0-9a]*\).*/\1/' | sort | uniq -c
    fi
  } >"$logs/env.log" 2>&1
  [[ -z $bundle_why ]] || { rec=(--code "1=$bundle_why"); ok=1; }
  return $ok
}

gtest() {  # gtest LIMIT NAME BINARY [ARGS...]: one gtest binary, its XML report
  local limit=$1 name=$2 bin=$3
  shift 3
  rec=(--gtest "$logs/$name.xml")
  limited "$limit" "$bundle/$bin" "--gtest_output=xml:$logs/$name.xml" "$@" >"$logs/$name.log" 2>&1
}

step_gpu_tests() {  # test_cuda_gpu in parallel shards (the fp64 references use the 16 cores)
  local limit=$1 i rc=0 r pids=()
  rec=(--shards "$gpu_test_shards")
  for ((i = 0; i < gpu_test_shards; i++)); do
    rec+=(--gtest "$logs/gpu_tests.$i.xml")
    GTEST_TOTAL_SHARDS=$gpu_test_shards GTEST_SHARD_INDEX=$i limited "$limit" \
      "$bundle/test_cuda_gpu" "--gtest_output=xml:$logs/gpu_tests.$i.xml" \
      >"$logs/gpu_tests.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i"
    r=$?
    if ((r == 124 || r == 137)); then rc=$r; elif ((rc == 0)); then rc=$r; fi
  done
  return $rc
}
step_plan_graph() { gtest "$1" plan_graph test_kernels_plan_graph; }
step_profiler_tests() { gtest "$1" profiler_tests test_profiler_gpu; }

table() {  # table LIMIT NAME FILE ARGS...: mactune_gpu_check, every row also on stdout
  local limit=$1 name=$2 file=$3
  shift 3
  rec=(--records "$file")
  limited "$limit" "$bundle/mactune_gpu_check" run "$file" "$@" 2>&1 | tee "$logs/$name.log"
  return "${PIPESTATUS[0]}"
}
step_table() { table "$1" table "$OUT/results.jsonl"; }
step_table_again() { table "$1" table_again "$OUT/again.jsonl" --sections grid,match --run 2; }

step_peer() {
  rec=(--records "$OUT/peer.jsonl")
  PYTHONUNBUFFERED=1 limited "$1" python3 "$root/scripts/gpu_peer.py" "$bundle/plan.jsonl" \
    "$OUT/peer.jsonl" 2>&1 | tee "$logs/peer.log"
  return "${PIPESTATUS[0]}"
}

sanitize() {  # sanitize LIMIT TOOL: compute-sanitizer on the sanitize section
  local limit=$1 tool=$2
  command -v compute-sanitizer >/dev/null || { step_skip="compute-sanitizer is not on PATH"; return 0; }
  rec=(--records "$logs/$tool.jsonl" --code "9=compute-sanitizer $tool reported errors ($tool.log)")
  limited "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 50 \
    "$bundle/mactune_gpu_check" run "$logs/$tool.jsonl" --sections sanitize >"$logs/$tool.log" 2>&1
}
step_memcheck() { sanitize "$1" memcheck; }
step_racecheck() { sanitize "$1" racecheck; }
step_synccheck() { sanitize "$1" synccheck; }

profile() {  # profile LIMIT NAME KERNEL_REGEX SKIP COUNT SECTION: ncu on warm launches
  local limit=$1 name=$2 regex=$3 skip=$4 count=$5 section=$6 rc
  command -v ncu >/dev/null || { step_skip="ncu is not on PATH"; return 0; }
  rec=(--records "$logs/$name.jsonl" --expect "$logs/$name.ncu-rep")
  limited "$((limit > 18 ? limit - 8 : 10))" ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section MemoryWorkloadAnalysis -k "regex:$regex" --launch-skip "$skip" \
    --launch-count "$count" -f -o "$logs/$name" "$bundle/mactune_gpu_check" run \
    "$logs/$name.jsonl" --sections "$section" --warmup "$ncu_warmup" >"$logs/$name.log" 2>&1
  rc=$?
  [[ -f $logs/$name.ncu-rep ]] &&
    timeout 8 ncu --import "$logs/$name.ncu-rep" --page details >"$logs/$name-details.txt" 2>&1
  return $rc
}
step_ncu() { profile "$1" ncu '(full|attend)_kernel' $((2 * ncu_warmup)) 2 ncu; }
step_ncu_match() { profile "$1" ncu_match 'match_kernel' "$ncu_warmup" 1 ncu_match; }

step_sass() {  # the SASS of the attend, full and match kernels, and what each one uses
  command -v cuobjdump >/dev/null || { step_skip="cuobjdump is not on PATH"; return 0; }
  rec=(--expect "$logs/sass-attend.txt" --expect "$logs/sass-match.txt")
  limited "$1" cuobjdump -sass "$bundle/mactune_gpu_check" >"$logs/sass-all.txt" 2>"$logs/sass.log" ||
    return $?
  awk -v a="$logs/sass-attend.txt" -v m="$logs/sass-match.txt" '
    /Function :/ { out = ($0 ~ /attend_kernel|full_kernel/) ? a : ($0 ~ /match_kernel/) ? m : "" }
    out != "" { print > out }' "$logs/sass-all.txt"
  rm -f "$logs/sass-all.txt"
  {
    echo "== per function: HMMA LDGSTS LDSM LDL STL BAR"
    cat "$logs/sass-attend.txt" "$logs/sass-match.txt" 2>/dev/null | awk '
      /Function :/ { if (f) print f, n["HMMA"]+0, n["LDGSTS"]+0, n["LDSM"]+0, n["LDL"]+0, n["STL"]+0, n["BAR"]+0
                     f = $3; delete n }
      { for (k in w) if (index($0, " " k)) n[k]++ }
      BEGIN { split("HMMA LDGSTS LDSM LDL STL BAR", ks); for (i in ks) w[ks[i]] = 1 }
      END { if (f) print f, n["HMMA"]+0, n["LDGSTS"]+0, n["LDSM"]+0, n["LDL"]+0, n["STL"]+0, n["BAR"]+0 }'
    echo "== cuobjdump -res-usage"
    timeout 10 cuobjdump -res-usage "$bundle/mactune_gpu_check" | grep -A1 -E 'attend_kernel|full_kernel|match_kernel'
  } >>"$logs/sass.log" 2>&1
  [[ -s $logs/sass-attend.txt && -s $logs/sass-match.txt ]]
}

mode=device from="" bundle="" part=1 rerun="" show=0
while (($#)); do
  case $1 in
    --prepare) mode=prepare ;;
    --dry-run) mode="dry-run" ;;
    --show) show=1 ;;
    --from-build) from=${2:?--from-build needs a build directory}; shift ;;
    --part) part=${2:?--part needs 1 or 2}; shift ;;
    --rerun) rerun=${2:?--rerun needs STEP,...}; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) bundle=$1 ;;
  esac
  shift
done
[[ -z $from || -d $from ]] || die "--from-build $from: no such directory"
[[ $part == 1 || $part == 2 ]] || die "--part $part: the lease has parts 1 and 2"
case $mode in
  prepare) prepare "$from" "${bundle:-$root/.gpu-bundle}"; du -sh "${bundle:-$root/.gpu-bundle}" ;;
  dry-run)
    bundle=${bundle:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-bundle.XXXXXX")}
    if [[ -n $from || ! -f $bundle/MANIFEST ]]; then prepare "$from" "$bundle" || exit 2; fi
    source "$root/scripts/gpu_dry_run.sh"
    dry_run "$bundle" ;;
  device)
    bundle=${bundle:-$root/.gpu-bundle}
    [[ -x $bundle/test_cuda_gpu ]] || die "$bundle is not a bundle (scripts/gpu-check.sh --prepare, and carry it)"
    todo=$(part_steps "$part" "$rerun") || exit 2
    mapfile -t todo <<<"$todo"
    device "$bundle" "$part" "${todo[@]}" ;;
esac
