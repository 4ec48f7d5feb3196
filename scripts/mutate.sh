#!/usr/bin/env bash
# Seeded bugs, caught: applies each one-line mutation of scripts/mutations.txt to a copy of
# kernels/cuda, builds the simt test binary against it (build/mutate, MACTUNE_SIMT_KERNEL_DIR:
# only the kernel translation units that include the mutated file recompile), keeps one binary
# per mutant, then runs each mutant's own short tests (the list's fifth column, fail-fast), two
# at a time, and names the check that caught it. Exit status 0 only when the unmutated binary
# passes every listed test and every mutant fails its tests. scripts/test.sh (CI) runs the
# whole list.
#   scripts/mutate.sh [--list | --ci | ID...]   (default: every mutation, what scripts/test.sh
#                                                runs; --ci: the list's `ci:` subset, quicker)
#   MACTUNE_MUTATE_JOBS=N: test runs at once (default 2); MACTUNE_MUTATE_TIMEOUT: seconds a run
# Output: one table row per mutation (also build/mutate/mutation-report.md), and the times of
# the build and run phases.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
list=scripts/mutations.txt
build=${MACTUNE_MUTATE_BUILD:-build/mutate}
work=$build/kernels-copy
bins=$build/bin
jobs=${MACTUNE_MUTATE_JOBS:-2}
timeout_s=${MACTUNE_MUTATE_TIMEOUT:-300}

mapfile -t rows < <(grep -v '^\s*#' "$list" | grep -v '^\s*$' | grep -v '^ci:')
if [[ ${1:-} == --list ]]; then
  for r in "${rows[@]}"; do echo "${r%% |*}"; done
  exit 0
fi
if [[ ${1:-} == --ci ]]; then  # a quicker subset: the list's `ci:` lines
  read -r -a want <<<"$(grep '^ci:' "$list" | cut -d: -f2- | tr '\n' ' ')"
  ((${#want[@]} >= 12)) || { echo "mutate.sh: the ci: subset of $list names fewer than 12"; exit 1; }
else
  want=("$@")
fi

# Fields of a row: id file pattern replacement tests [occurrence], trimmed.
field() { echo "$1" | cut -d'|' -f"$2" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//'; }

# ccache (scripts/ccache-env.sh): the unmutated TUs' objects come from the ci build's cache.
source scripts/ccache-env.sh
mkdir -p "$build" "$bins"
rm -rf "$work" && mkdir -p "$work/kernels" && cp -r kernels/cuda "$work/kernels/cuda"
# Only the instances the mutation tests run (a MAC step: attend, the full-scan match, merge):
# an attend or merge mutation recompiles its family's instance alone (each instance TU includes
# its family's detail/launch_<family>.cuh only); a match mutation also the pruned match's TU.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMACTUNE_SIMT=ON \
  -DMACTUNE_ENABLE_CUDA=OFF -DMACTUNE_BUILD_BENCH=OFF -DMACTUNE_BUILD_PYTHON=OFF \
  -DMACTUNE_KERNEL_FILTER='attend_*;match_*_p0_*;merge_*' \
  -DMACTUNE_SIMT_KERNEL_DIR="$root/$work/kernels/cuda" >/dev/null

# mutate FILE PATTERN REPLACEMENT [OCCURRENCE]: replace the line whose stripped text is PATTERN
# (or starts with it).
mutate() {
  python3 - "$@" <<'PY'
import sys
path, pat, rep = sys.argv[1], sys.argv[2].strip(), sys.argv[3].strip()
occ = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4].strip() else 0
lines = open(path).read().split('\n')
hits = [i for i, l in enumerate(lines) if l.strip() == pat or (pat in l and l.strip().startswith(pat))]
if not hits or (occ == 0 and len(hits) != 1) or occ > len(hits):
    sys.exit(f"mutation pattern found {len(hits)} times in {path}: {pat}")
i = hits[occ - 1 if occ else 0]
indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
lines[i] = indent + (rep if rep else '// (mutation: line removed)')
open(path, 'w').write('\n'.join(lines))
PY
}

# What caught it: the first simt report's check, else the first failed expectation's kind.
classify() {
  local log=$1
  local check
  check=$(grep -oE '^simt: [a-z_]+' "$log" | head -1 | cut -d' ' -f2 || true)
  if [[ -n $check ]]; then echo "simt check: $check"; return; fi
  if grep -q 'not written (or NaN)' "$log"; then echo "outputs unwritten (poison)"; return; fi
  if grep -qE 'simt hit|gpu hit' "$log"; then echo "decisions vs reference"; return; fi
  if grep -q 'ticket path' "$log"; then echo "plan (ticket path)"; return; fi
  if grep -qE 'rel err|ring summaries|ring entry|ring lse|Failure' "$log"; then
    if grep -qE 'kv_tokens_read|modeled_bytes' "$log" && ! grep -q 'rel err' "$log"; then
      echo "step accounting"; return
    fi
    echo "outputs vs fp64 reference"; return
  fi
  echo "crash or timeout"
}

# build NAME: builds test_simt from the copy as it stands and keeps it as $bins/NAME.
build_as() {
  if cmake --build "$build" --target test_simt -j "$(nproc)" >"$build/$1.build.log" 2>&1; then
    cp "$build/tests/simt/test_simt" "$bins/$1"
  else
    rm -f "$bins/$1"
  fi
}

# The rows to run, grouped by file (a file switch rebuilds the restored file's TUs once).
selected=()
for r in "${rows[@]}"; do
  id=$(field "$r" 1)
  if ((${#want[@]})) && [[ ! " ${want[*]} " == *" $id "* ]]; then continue; fi
  selected+=("$(field "$r" 2)|$r")
done
mapfile -t selected < <(printf '%s\n' "${selected[@]}" | sort -s -t'|' -k1,1 | cut -d'|' -f2-)

# ---- Build phase: the unmutated binary, then one per mutant.
t_build=$(date +%s)
build_as baseline
all_tests=""
for r in "${selected[@]}"; do
  id=$(field "$r" 1) file=$(field "$r" 2) tests=$(field "$r" 5)
  all_tests+="${all_tests:+:}$tests"
  # Every file of the copy back to the sources', then this mutation.
  while IFS= read -r -d '' src; do
    rel=${src#kernels/cuda/}
    cmp -s "$src" "$work/kernels/cuda/$rel" || cp "$src" "$work/kernels/cuda/$rel"
  done < <(find kernels/cuda -type f \( -name '*.cuh' -o -name '*.cu' -o -name '*.h' \) -print0)
  mutate "$work/kernels/cuda/$file" "$(field "$r" 3)" "$(field "$r" 4)" "$(field "$r" 6)"
  build_as "$id"
done
cp -r kernels/cuda/. "$work/kernels/cuda/"  # leave the copy unmutated
t_build=$(($(date +%s) - t_build))

# ---- Run phase: the baseline runs every listed test; each mutant its own, `jobs` at a time.
t_run=$(date +%s)
run_one() {  # NAME FILTER: writes $build/NAME.result (pass, fail or build) and NAME.log
  local name=$1 filter=$2 t0=$SECONDS res
  if [[ ! -x $bins/$name ]]; then
    res=build
  elif MACTUNE_SOURCE_DIR=$root timeout "$timeout_s" "$bins/$name" --gtest_filter="$filter" \
      --gtest_fail_fast >"$build/$name.log" 2>&1; then
    res=pass
  else
    res=fail
  fi
  echo "$res $((SECONDS - t0))" >"$build/$name.result"
}
queue=("baseline|$(echo "$all_tests" | tr ':' '\n' | sort -u | paste -sd:)")
for r in "${selected[@]}"; do queue+=("$(field "$r" 1)|$(field "$r" 5)"); done
for q in "${queue[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "${q%%|*}" "${q#*|}" &
done
wait
t_run=$(($(date +%s) - t_run))

report=$build/mutation-report.md
{
  echo "| mutation | file | tests | caught by | seconds (run) |"
  echo "|---|---|---|---|---|"
} >"$report"
read -r base base_s <"$build/baseline.result"
survived=0
for r in "${selected[@]}"; do
  id=$(field "$r" 1) file=$(field "$r" 2) tests=$(field "$r" 5)
  read -r result secs <"$build/$id.result"
  case $result in
    pass) caught="**SURVIVED**"; survived=$((survived + 1)) ;;
    build) caught="does not compile (see $build/$id.build.log)"; survived=$((survived + 1)) ;;
    *) caught=$(classify "$build/$id.log") ;;
  esac
  printf '%-34s %-22s %s (%ss)\n' "$id" "$file" "$caught" "$secs"
  echo "| $id | $file | ${tests//SimtStep./} | $caught | $secs |" >>"$report"
done
echo "${#selected[@]} mutations, $survived not caught; build ${t_build} s, runs ${t_run} s" \
  "($jobs at a time; baseline $base in ${base_s} s); table: $report"
if [[ $base != pass ]]; then
  echo "the unmutated kernels fail the mutation tests ($base): see $build/baseline.log"
  exit 1
fi
((survived == 0))
