# The CUDA instance grid, written once. kernels/cuda/CMakeLists.txt turns every entry into a
# generated translation unit, an `extern template` line and a registry entry; tests/cuda runs
# every registered instance. Canonical names (config.h) are derived from these fields.
#
#   attend / full: "head_dim group tile_tokens stages kv_dtype"
#                  group = the largest GQA group the instance runs (any smaller one runs padded)
#   match:         "head_dim probe kv_dtype"       (probe: 0 or 1)
#   merge:         "head_dim"

# The default grid: what CI compiles (2 cores, sm_80 + sm_90a). Llama-class shapes: D = 128,
# bf16 KV, GQA up to 8.
set(MACTUNE_CUDA_ATTEND_DEFAULT "128 8 64 2 bf16")
set(MACTUNE_CUDA_FULL_DEFAULT "128 8 64 2 bf16")
set(MACTUNE_CUDA_MATCH_DEFAULT "128 0 bf16" "128 1 bf16")
set(MACTUNE_CUDA_MERGE_DEFAULT "128")

# The full grid (MACTUNE_ALL_INSTANCES=ON): the cross product of these axes, minus configs
# whose attend shared memory exceeds 227 KB (the sm_90 per-CTA limit).
set(MACTUNE_CUDA_HEAD_DIMS 64 128 256)
set(MACTUNE_CUDA_GROUPS 8 16)
set(MACTUNE_CUDA_TILE_TOKENS 64 128)
set(MACTUNE_CUDA_STAGES 2 3 4)
set(MACTUNE_CUDA_KV_DTYPES bf16 f16)
set(MACTUNE_CUDA_PROBES 0 1)
