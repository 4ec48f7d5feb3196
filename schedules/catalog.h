// The kernel instances a dispatch table may name: the loader refuses a table that names one this
// build does not have, and the fallback picks from them. The default catalog is the registries
// compiled into this build (mactune::cpu::instances(), mactune::cuda::instances()); an engine
// with its own kernels passes its own list and, if names are not enough to tell whether an
// instance runs a shape, its own `fits` predicate (e.g. the instance's can_implement).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/problem.h"
#include "kernels/registry.h"

namespace mactune::sched {

// Whether the canonical name of an instance allows the shape, from the fields names carry:
// `hd<D>` (head_dim D), `g<G>` (groups of up to G query heads per KV head: a CUDA instance runs
// any q_heads / kv_heads <= G, masking the padding rows) and the trailing KV dtype
// (`attend_cuda_hd128_g4_t64_s2_bf16`, `mac_cpu_avx2_hd128_bf16`). Fields a name lacks do not
// constrain; a name with none of them fits every shape. The default catalog uses the engines'
// own checks instead (cpu::validate, each CUDA instance's can_implement).
bool name_fits(std::string_view instance, const Problem& p);

class Catalog {
 public:
  using Fits = std::function<bool(const InstanceInfo&, const Problem&)>;

  Catalog() = default;
  // `instances` in preference order: the fallback takes the first that fits.
  explicit Catalog(std::vector<InstanceInfo> instances, Fits fits = {});

  const InstanceInfo* find(std::string_view name) const;
  bool fits(const InstanceInfo& info, const Problem& p) const;
  // The first instance of `family` on `backend` that fits `p`, or nullptr.
  const InstanceInfo* first_fit(std::string_view backend, std::string_view family,
                                const Problem& p) const;
  const std::vector<InstanceInfo>& instances() const { return instances_; }
  bool empty() const { return instances_.empty(); }

 private:
  std::vector<InstanceInfo> instances_;
  std::vector<std::size_t> by_name_;  // indices sorted by name
  Fits fits_;
};

// The registries compiled into this build (CPU instances ordered by ISA, widest first; then
// CUDA instances when built with CUDA). Empty in a build that has neither.
const Catalog& default_catalog();

}  // namespace mactune::sched
