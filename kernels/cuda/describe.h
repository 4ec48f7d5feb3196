// The descriptions of the CUDA instances (kernels/instance.h): name, config text, what shapes
// each can run and why not, its workspace. Plain C++ over the configs of config.h: the registry
// (registry.h) holds one per built instance beside its launchers, and the dispatch catalog
// lists the same descriptions, from the same grid (instance_grid.h), without the CUDA kernels.
#pragma once

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/config.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/params.h"
#include "kernels/instance.h"
#include "kernels/problem.h"

namespace mactune::cuda {
namespace detail {

// Shape checks shared by the tiled families (attend, full).
inline std::string tiled_can_implement(const AttendConfig& c, const Problem& p) {
  if (const std::string why = validate(p); !why.empty()) return why;
  std::ostringstream e;
  if (p.head_dim != c.head_dim)
    e << "head_dim " << p.head_dim << " != the instance's " << c.head_dim;
  else if (p.kv_dtype != c.kv_dtype)
    e << "KV dtype " << dtype_name(p.kv_dtype) << " != the instance's " << dtype_name(c.kv_dtype);
  else if (p.group_size() > c.group)
    e << "group size " << p.group_size() << " exceeds the instance's " << c.group
      << " (it runs any group up to that, padding rows masked)";
  return e.str();
}

// Partial states of a plan with `capacity` items.
inline std::size_t tiled_workspace(const Problem& p, int capacity) {
  return partial_o_bytes(capacity, p.group_size(), p.head_dim) +
         partial_lse_bytes(capacity, p.group_size());
}

template <class Config>
InstanceDesc describe_common(const Config& c, Family family) {
  InstanceDesc d;
  d.name = instance_name(c);
  d.backend = Backend::cuda;
  d.family = family;
  d.config = config_string(c);
  return d;
}

}  // namespace detail

inline InstanceDesc describe(const AttendConfig& c) {
  InstanceDesc d = detail::describe_common(c, Family::attend);
  d.selects = {{"attend", d.name}};
  d.can_implement = [c](const Problem& p) { return detail::tiled_can_implement(c, p); };
  d.workspace_bytes = detail::tiled_workspace;
  return d;
}

inline InstanceDesc describe(const FullConfig& c) {
  InstanceDesc d = detail::describe_common(c, Family::full);
  d.selects = {{"full", d.name}};
  d.can_implement = [c](const Problem& p) { return detail::tiled_can_implement(as_attend(c), p); };
  d.workspace_bytes = detail::tiled_workspace;
  return d;
}

inline InstanceDesc describe(const MatchConfig& c) {
  InstanceDesc d = detail::describe_common(c, Family::match);
  d.can_implement = [c](const Problem& p) -> std::string {
    if (const std::string why = validate(p); !why.empty()) return why;
    std::ostringstream e;
    if (p.head_dim != c.head_dim)
      e << "head_dim " << p.head_dim << " != the instance's " << c.head_dim;
    else if (p.kv_dtype != c.kv_dtype)
      e << "KV dtype " << dtype_name(p.kv_dtype) << " != the instance's " << dtype_name(c.kv_dtype)
        << " (the ring stores q~ in the KV dtype)";
    return e.str();
  };
  // Per-tile partials and per-head counters: `tiles` tiles a head, every request of the batch.
  d.workspace_bytes = [](const Problem& p, int tiles) {
    const std::size_t heads = static_cast<std::size_t>(p.batch) * p.q_heads;
    return heads * static_cast<std::size_t>(tiles) * sizeof(MatchPartial) + heads * 4u;
  };
  return d;
}

inline InstanceDesc describe(const MergeConfig& c) {
  InstanceDesc d = detail::describe_common(c, Family::merge);
  d.can_implement = [c](const Problem& p) -> std::string {
    if (const std::string why = validate(p); !why.empty()) return why;
    if (p.head_dim != c.head_dim)
      return "head_dim " + std::to_string(p.head_dim) + " != the instance's " +
             std::to_string(c.head_dim);
    return "";
  };
  d.workspace_bytes = [](const Problem&, int) { return std::size_t{0}; };
  return d;
}

}  // namespace mactune::cuda
