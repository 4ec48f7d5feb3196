#!/usr/bin/env bash
# Seeded bugs, caught: applies each one-line mutation of scripts/mutations.txt to a copy of
# kernels/cuda, builds only the simt test binary against it (build/mutate, MACTUNE_SIMT_KERNEL_DIR;
# ccache makes reruns cheap), runs the mutation suite (fail-fast) and names the check that caught
# it. Exit status 0 only when every mutant fails the suite and the unmutated copy passes it.
#   scripts/mutate.sh [--list] [ID...]        (default: every mutation)
#   MACTUNE_MUTATE_SKIP_BASELINE=1: skip the unmutated run (reruns of a few mutations)
# Output: one table row per mutation (also build/mutate/mutation-report.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
list=scripts/mutations.txt
build=${MACTUNE_MUTATE_BUILD:-build/mutate}
work=$build/kernels-copy
# The suite: fast tests that between them reach every kernel path a mutation can break (the GPU
# harness over many steps; the ticket path over two steps; multi-pass, multi-tile match;
# balanced plans with several items an entry: batch 64 at hit 0).
suite=${MACTUNE_MUTATE_SUITE:-'SimtStep.HarnessGqa4Page1Nearest:SimtStep.SynthBatch4Gqa4Ring512NewestFullScan:SimtStep.SynthBatch64Gqa4Hit1TicketPath:SimtStep.SynthBatch4Gqa8Ring2048MixedProbe:SimtStep.SynthBatch64Gqa8Hit0Page1Normalized'}
timeout_s=${MACTUNE_MUTATE_TIMEOUT:-600}

mapfile -t rows < <(grep -v '^\s*#' "$list" | grep -v '^\s*$')
if [[ ${1:-} == --list ]]; then
  for r in "${rows[@]}"; do echo "${r%% |*}"; done
  exit 0
fi
want=("$@")

[[ -f /root/.ccache_env ]] && source /root/.ccache_env
mkdir -p "$build"
rm -rf "$work" && mkdir -p "$work/kernels" && cp -r kernels/cuda "$work/kernels/cuda"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMACTUNE_SIMT=ON \
    -DMACTUNE_ENABLE_CUDA=OFF -DMACTUNE_BUILD_BENCH=OFF -DMACTUNE_BUILD_PYTHON=OFF \
    -DMACTUNE_SIMT_KERNEL_DIR="$root/$work/kernels/cuda" >/dev/null
fi

# mutate FILE PATTERN REPLACEMENT [OCCURRENCE]: replace the line whose stripped text is PATTERN.
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

build_and_run() {
  local log=$1
  if ! cmake --build "$build" --target test_simt -j "$(nproc)" >"$log.build" 2>&1; then
    echo build; return
  fi
  if timeout "$timeout_s" "$build/tests/simt/test_simt" --gtest_filter="$suite" --gtest_fail_fast \
      >"$log" 2>&1; then
    echo pass
  else
    echo fail
  fi
}

report=$build/mutation-report${MACTUNE_MUTATE_SKIP_BASELINE:+-partial}.md
{
  echo "| mutation | file | caught by | seconds |"
  echo "|---|---|---|---|"
} >"$report"
start_all=$(date +%s)
if [[ -z ${MACTUNE_MUTATE_SKIP_BASELINE:-} ]]; then
  echo "baseline (no mutation)..."
  base=$(build_and_run "$build/baseline.log")
  if [[ $base != pass ]]; then
    echo "the unmutated kernels fail the mutation suite ($base): see $build/baseline.log"
    exit 1
  fi
fi
survived=0
count=0
for r in "${rows[@]}"; do
  IFS='|' read -r id file pat rep occ <<<"$r"
  id=$(echo "$id" | xargs)
  file=$(echo "$file" | xargs)
  if ((${#want[@]})) && [[ ! " ${want[*]} " == *" $id "* ]]; then continue; fi
  count=$((count + 1))
  t0=$(date +%s)
  cp "kernels/cuda/$file" "$work/kernels/cuda/$file"
  mutate "$work/kernels/cuda/$file" "$pat" "$rep" "${occ:-}"
  log=$build/mutant-$id.log
  result=$(build_and_run "$log")
  cp "kernels/cuda/$file" "$work/kernels/cuda/$file"  # restore
  if [[ $result == pass ]]; then
    caught="**SURVIVED**"
    survived=$((survived + 1))
  elif [[ $result == build ]]; then
    caught="does not compile (see $log.build)"
  else
    caught=$(classify "$log")
  fi
  secs=$(($(date +%s) - t0))
  printf '%-34s %-22s %s (%ss)\n' "$id" "$file" "$caught" "$secs"
  echo "| $id | $file | $caught | $secs |" >>"$report"
done
echo "$count mutations, $survived survived, $(($(date +%s) - start_all)) s; table: $report"
((survived == 0))
