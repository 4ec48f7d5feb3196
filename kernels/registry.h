// Kernel instances: every compiled code path has one canonical name, derived from every field
// of its config, used as the key in the database, dispatch tables, benchmark names, NVTX
// ranges and test names. Examples:
//   attend_cuda_hd128_g4_t64_s2_bf16   a CUDA attend instance (family_backend_fields_dtype)
//   mac_cpu_avx2_hd128_bf16            the CPU MAC path for one ISA, head_dim and KV dtype
// Launch parameters that are not compiled in (CPU chunk tokens, threads) are not part of the
// name; they travel beside it as `params`.
#pragma once

#include <string>

namespace mactune {

struct InstanceInfo {
  std::string name;     // canonical name
  std::string backend;  // "cpu" | "cuda"
  std::string family;   // "mac" | "full" | "match" | "attend" | "merge"
  std::string config;   // the config fields, "key=value,key=value" (for the database)
};

}  // namespace mactune
