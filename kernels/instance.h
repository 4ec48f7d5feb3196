// Kernel instances: every compiled code path has one canonical name, derived from every field
// of its config, used as the key in the database, dispatch tables, benchmark names, NVTX
// ranges and test names. Examples:
//   attend_cuda_hd128_g4_t64_s2_bf16   a CUDA attend instance (family_backend_fields_dtype)
//   mac_cpu_avx2_hd128_bf16            the CPU MAC path for one ISA, head_dim and KV dtype
// Launch parameters that are not compiled in (CPU chunk tokens, threads) are not part of the
// name; they travel beside it as `params`.
//
// Both backends describe their instances with one type, InstanceDesc (kernels/cpu/instances.h,
// kernels/cuda/describe.h): what it is, what it can run and why not, what it needs. The
// descriptions are plain C++ over the configs, so whoever only reads dispatch tables (the
// catalog, dispatcher/catalog.h) knows this build's instances without linking a kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/backend.h"
#include "kernels/enum_names.h"
#include "kernels/fields.h"
#include "kernels/problem.h"

namespace mactune {

// What an instance computes: a whole MAC or full-attention step (CPU), or one kernel of a
// CUDA step.
enum class Family : std::uint8_t { mac, full, attend, match, merge };
template <>
struct EnumNames<Family> {
  static constexpr std::string_view what = "instance family";
  static constexpr EnumName<Family> names[] = {{Family::mac, "mac"},
                                               {Family::full, "full"},
                                               {Family::attend, "attend"},
                                               {Family::match, "match"},
                                               {Family::merge, "merge"}};
};

struct InstanceDesc {
  std::string name;  // canonical name
  Backend backend = Backend::cpu;
  Family family = Family::mac;
  std::string config;  // the config fields, "key=value,key=value" (the database's column)
  // The engine settings that pick this instance (kernels/fields.h, FieldRole::selects): the
  // CPU ISA, the CUDA attend or full instance. How a dispatch choice becomes session options.
  Params selects;
  // "" when this instance can run `p` on this machine, else one sentence saying why not.
  // Unset in descriptions read back from a database.
  std::function<std::string(const Problem&)> can_implement;
  // Device workspace of one step of `p` with `items` work items (attend, full: planned items;
  // match: ring tiles per head); 0 when the instance needs none.
  std::function<std::size_t(const Problem&, int items)> workspace_bytes;

  // A description as a database or another tool holds it: what it is, without predicates.
  static InstanceDesc named(std::string name, Backend backend, Family family,
                            std::string config = {}) {
    InstanceDesc d;
    d.name = std::move(name);
    d.backend = backend;
    d.family = family;
    d.config = std::move(config);
    return d;
  }
};

}  // namespace mactune
