// The registry of built CUDA instances: canonical name -> config, launcher, occupancy query,
// can_implement (saying why not) and workspace size. The tables are generated at configure
// time from the grid in instances.cmake (filtered by MACTUNE_KERNEL_FILTER); this header and
// registry.cpp are the hand-written half.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/config.h"
#include "kernels/cuda/params.h"
#include "kernels/problem.h"
#include "kernels/registry.h"

namespace mactune::cuda {

struct AttendInstance {
  AttendConfig config;
  std::string name;
  cudaError_t (*launch)(const AttendParams&, int grid, cudaStream_t);
  cudaError_t (*ctas_per_sm)(int&);

  std::string can_implement(const Problem& p) const;  // "" when it can, else why not
  std::size_t smem_bytes() const;
  // Partial states of a plan with `capacity` items.
  std::size_t workspace_bytes(const Problem& p, std::int32_t capacity) const;
};

struct FullInstance {
  FullConfig config;
  std::string name;
  cudaError_t (*launch)(const AttendParams&, int grid, cudaStream_t);
  cudaError_t (*ctas_per_sm)(int&);

  std::string can_implement(const Problem& p) const;
  std::size_t smem_bytes() const;
  std::size_t workspace_bytes(const Problem& p, std::int32_t capacity) const;
};

struct MatchInstance {
  MatchConfig config;
  std::string name;
  cudaError_t (*launch)(const MatchParams&, cudaStream_t);
  cudaError_t (*ctas_per_sm)(int&);

  std::string can_implement(const Problem& p) const;
  // Per-tile partials and per-head counters for `rows` rows and `tiles` tiles a head.
  std::size_t workspace_bytes(const Problem& p, int rows, int tiles) const;
};

struct MergeInstance {
  MergeConfig config;
  std::string name;
  cudaError_t (*launch)(const MergeParams&, cudaStream_t);

  std::string can_implement(const Problem& p) const;
  std::size_t workspace_bytes(const Problem&) const { return 0; }
};

// The built instances of each family, in grid order.
const std::vector<AttendInstance>& attend_instances();
const std::vector<FullInstance>& full_instances();
const std::vector<MatchInstance>& match_instances();
const std::vector<MergeInstance>& merge_instances();

// Every built instance (backend "cuda"), for the database, dispatch tables and `mactune info`.
std::vector<InstanceInfo> instances();

// The build's instance filter (MACTUNE_KERNEL_FILTER, "" = none) and whether the full grid
// (MACTUNE_ALL_INSTANCES) was built.
std::string_view kernel_filter();
bool all_instances_built();

// Lookup by canonical name (nullptr when not built).
const AttendInstance* find_attend(std::string_view name);
const FullInstance* find_full(std::string_view name);
const MatchInstance* find_match(std::string_view name);
const MergeInstance* find_merge(std::string_view name);

// The named instance, or (name empty) the first built instance that can implement p.
// Throws InputError naming the instance or listing why each built one cannot.
const AttendInstance& select_attend(const Problem& p, std::string_view name = {});
const FullInstance& select_full(const Problem& p, std::string_view name = {});
const MatchInstance& select_match(const Problem& p, std::string_view name = {});
const MergeInstance& select_merge(const Problem& p, std::string_view name = {});

}  // namespace mactune::cuda
