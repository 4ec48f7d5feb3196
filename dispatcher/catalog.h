// The kernel instances a dispatch table may name: the loader refuses a table that names one the
// catalog lacks, and the fallback picks from them. An instance is its description
// (kernels/instance.h): name, backend, family, and its own can_implement. The default catalog
// is this build's instances as the engines describe them (kernels/cpu/instances.h, and the
// generated CUDA grid) - descriptions only, so reading tables links no kernel. An engine with
// kernels of its own passes its own descriptions; one without a can_implement is checked by
// name_fits().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels/instance.h"
#include "kernels/problem.h"

namespace mactune::dispatch {

// Whether the canonical name of an instance allows the shape, from the fields names carry:
// `hd<D>` (head_dim D), `g<G>` (groups of up to G query heads per KV head: a CUDA instance runs
// any q_heads / kv_heads <= G, masking the padding rows) and the trailing KV dtype
// (`attend_cuda_hd128_g4_t64_s2_bf16`, `mac_cpu_avx2_hd128_bf16`). Fields a name lacks do not
// constrain; a name with none of them fits every shape. For descriptions without a
// can_implement of their own.
bool name_fits(std::string_view instance, const Problem& p);

class Catalog {
 public:
  Catalog() = default;
  // `instances` in preference order: the fallback takes the first that fits.
  explicit Catalog(std::vector<InstanceDesc> instances);

  const InstanceDesc* find(std::string_view name) const;
  // "" when the instance can run `p` (its can_implement, or name_fits), else why not.
  std::string why_not(const InstanceDesc& info, const Problem& p) const;
  bool fits(const InstanceDesc& info, const Problem& p) const { return why_not(info, p).empty(); }
  // The first instance of `family` on `backend` that fits `p`, or nullptr.
  const InstanceDesc* first_fit(Backend backend, Family family, const Problem& p) const;
  const std::vector<InstanceDesc>& instances() const { return instances_; }
  bool empty() const { return instances_.empty(); }

 private:
  std::vector<InstanceDesc> instances_;
  std::vector<std::size_t> by_name_;  // indices sorted by name
};

// This build's instances: the CPU engine's (widest ISA first, the path `isa = auto` takes),
// then the built CUDA instances in grid order.
const Catalog& default_catalog();

}  // namespace mactune::dispatch
