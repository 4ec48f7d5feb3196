# shellcheck shell=bash disable=SC2034
# The lease plan of scripts/gpu-check.sh (sourced; docs/gpu-lease.md explains it): the bundle,
# the steps of each part in order of value with their caps, the budgets and the time plan that
# `--dry-run` checks against one 15-minute lease.

# The bundle: binaries, and the instances the lease builds (production hd128 bf16 g8 t64 s2,
# its g16 and 3- and 4-stage forms, a 128-token tile, f16 with D = 64, D = 256; every match and
# merge instance of those head dims).
bins=(test_cuda_gpu mactune_gpu_check test_profiler_gpu test_kernels_plan_graph)
bin_dirs=(tests/cuda tests/cuda tests/profiler tests/kernels)
default_filter="attend_cuda_hd128_g8_t64_s2_bf16;attend_cuda_hd128_g16_t64_s2_bf16;attend_cuda_hd128_g8_t64_s3_bf16;attend_cuda_hd128_g8_t64_s4_bf16;attend_cuda_hd128_g8_t128_s3_bf16;attend_cuda_hd64_g8_t64_s2_f16;attend_cuda_hd256_g8_t64_s2_bf16;full_cuda_hd128_g8_t64_s2_bf16;full_cuda_hd128_g8_t64_s4_bf16;full_cuda_hd64_g8_t64_s2_f16;full_cuda_hd256_g16_t64_s2_bf16;match_cuda_hd128_*_bf16;match_cuda_hd64_p1_f16;match_cuda_hd256_p1_bf16;merge_cuda_*"
# Shared libraries the GPU image is sure to have (glibc); anything else must be static.
allowed_libs='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$'

gpu_test_shards=4  # test_cuda_gpu runs as this many parallel gtest shards
ncu_warmup=3       # warm steps before ncu's profiled one (its --launch-skip counts them)

# name|part|cap (s)|needs the bundle's binaries|what. Part 0: first in every part.
lease_plan=(
  "env|0|20|0|date, MANIFEST, nvidia-smi, the machine's glibc against the bundle's, ldd, GPU probe"
  "gpu_tests|1|90|1|test_cuda_gpu: every instance vs the fp64 reference ($gpu_test_shards parallel shards)"
  "table|1|60|1|mactune_gpu_check: copy, grid, check, match, instances, ring, pages"
  "peer|1|30|0|SDPA on the grid's shapes (dense bf16 KV, graph replays)"
  "memcheck|1|30|1|compute-sanitizer memcheck on the sanitize section (multi-tile items, K 1024)"
  "ncu|1|35|1|ncu of the full and attend kernels at 128K batch 16, after $ncu_warmup warm steps"
  "profiler_tests|1|15|1|test_profiler_gpu (CUPTI trace, DRAM bytes vs modeled)"
  "sass|2|15|0|cuobjdump -sass of the attend, full and match kernels, their instruction counts"
  "plan_graph|2|15|1|test_kernels_plan_graph: the serial planner in a replayed graph"
  "racecheck|2|50|1|compute-sanitizer racecheck on the sanitize section"
  "synccheck|2|30|1|compute-sanitizer synccheck on the sanitize section"
  "ncu_match|2|30|1|ncu of the match kernel at K 1024, batch 1, warm"
  "table_again|2|30|1|grid and match again (run 2): the run-to-run spread"
)
declare -A cap_s part_of needs_bundle what_of
lease_steps=()
for _s in "${lease_plan[@]}"; do
  IFS='|' read -r _n _p _c _b _w <<<"$_s"
  lease_steps+=("$_n")
  cap_s[$_n]=$_c part_of[$_n]=$_p needs_bundle[$_n]=$_b what_of[$_n]=$_w
done
unset _s _n _p _c _b _w

# Each part's budget (the steps' caps fit inside it), the `run` timeout that leaves tail_s for
# the last report and tar, and the lease they must fit with two machine starts and idle waits.
declare -A budget_s=([1]=300 [2]=200) call_timeout_s=([1]=320 [2]=220)
tail_s=10
lease_s=900 start_s=120 idle_s=30

# part_steps PART RERUN: the steps of a part after env (RERUN's first, in plan order).
part_steps() {
  local part=$1 n r
  local -A want=()
  IFS=',' read -ra r <<<"$2"
  for n in "${r[@]}"; do
    [[ -n ${cap_s[$n]:-} ]] || { echo "mactune: error: gpu-check: --rerun: no step '$n'" >&2; return 2; }
    want[$n]=1
  done
  for n in "${lease_steps[@]}"; do [[ -n ${want[$n]:-} && $n != env ]] && echo "$n"; done
  for n in "${lease_steps[@]}"; do
    [[ ${part_of[$n]} == "$part" && -z ${want[$n]:-} ]] && echo "$n"
  done
  return 0
}
