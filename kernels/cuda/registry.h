// The registry of built CUDA instances: each one's description (describe.h: name, config text,
// can_implement saying why not, workspace bytes) and, beside it, its config, launcher and
// occupancy query. The tables are generated at configure time from the grid in instances.txt
// (filtered by MACTUNE_KERNEL_FILTER); this header and registry.cpp are the hand-written half.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/config.h"
#include "kernels/cuda/describe.h"
#include "kernels/cuda/params.h"
#include "kernels/error.h"
#include "kernels/instance.h"
#include "kernels/problem.h"

namespace mactune::cuda {

// One built instance of a family: what it is (InstanceDesc), its config and its launchers.
template <class Config, class Launch>
struct Instance : InstanceDesc {
  Config config;
  Launch launch = nullptr;
  cudaError_t (*ctas_per_sm)(int&) = nullptr;  // occupancy query (none for merge)
};

using AttendLaunch = cudaError_t (*)(const AttendParams&, int grid, cudaStream_t);
using AttendInstance = Instance<AttendConfig, AttendLaunch>;
using FullInstance = Instance<FullConfig, AttendLaunch>;
using MatchInstance = Instance<MatchConfig, cudaError_t (*)(const MatchParams&, cudaStream_t)>;
using MergeInstance = Instance<MergeConfig, cudaError_t (*)(const MergeParams&, cudaStream_t)>;

// The built instances of each family, in grid order.
const std::vector<AttendInstance>& attend_instances();
const std::vector<FullInstance>& full_instances();
const std::vector<MatchInstance>& match_instances();
const std::vector<MergeInstance>& merge_instances();

// Every built instance (backend "cuda"), for the database, dispatch tables and `mactune info`.
std::vector<InstanceDesc> instances();

// The build's instance filter (MACTUNE_KERNEL_FILTER, "" = none) and whether the full grid
// (MACTUNE_ALL_INSTANCES) was built.
std::string_view kernel_filter();
bool all_instances_built();

// The built instance of that name, or nullptr.
template <class I>
const I* find_instance(const std::vector<I>& built, std::string_view name) {
  for (const I& i : built)
    if (i.name == name) return &i;
  return nullptr;
}

// The named instance, or (name empty) the first built one that can implement p. Throws
// InputError naming the instance or listing why each built one cannot.
template <class I>
const I& select_instance(const std::vector<I>& built, const Problem& p,
                         std::string_view name = {}) {
  if (!name.empty()) {
    const I* i = find_instance(built, name);
    if (i == nullptr)
      input_error("CUDA instance '", name, "' is not built (see `mactune info`; build with ",
                  "MACTUNE_ALL_INSTANCES=ON or widen MACTUNE_KERNEL_FILTER)");
    if (const std::string why = i->can_implement(p); !why.empty())
      input_error("CUDA instance '", name, "' cannot run this shape: ", why);
    return *i;
  }
  std::string why;
  for (const I& i : built) {
    const std::string w = i.can_implement(p);
    if (w.empty()) return i;
    why += "; " + i.name + ": " + w;
  }
  const std::string_view family = name_of(describe(decltype(I::config){}).family);
  if (built.empty()) input_error("no CUDA ", family, " instance is built (MACTUNE_KERNEL_FILTER?)");
  input_error("no built CUDA ", family, " instance can run head_dim ", p.head_dim, ", G ",
              p.group_size(), ", ", dtype_name(p.kv_dtype), why);
}

}  // namespace mactune::cuda
