// The hand-written half of the CUDA registry: can_implement, sizes, lookup and selection over
// the generated tables (registry_table.cpp in the build tree).
#include "kernels/cuda/registry.h"

#include <sstream>

#include "kernels/cuda/launch.h"
#include "kernels/error.h"

namespace mactune::cuda {
namespace {

// Shape checks shared by the tiled families (attend, full).
std::string tiled_can_implement(const AttendConfig& c, const Problem& p) {
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

template <class Instance>
const Instance* find_in(const std::vector<Instance>& table, std::string_view name) {
  for (const Instance& i : table)
    if (i.name == name) return &i;
  return nullptr;
}

template <class Instance>
const Instance& select_in(const std::vector<Instance>& table, const Problem& p,
                          std::string_view name, std::string_view family) {
  if (!name.empty()) {
    const Instance* i = find_in(table, name);
    if (i == nullptr)
      input_error("CUDA instance '", name, "' is not built (see `mactune info`; build with ",
                  "MACTUNE_ALL_INSTANCES=ON or widen MACTUNE_KERNEL_FILTER)");
    if (const std::string why = i->can_implement(p); !why.empty())
      input_error("CUDA instance '", name, "' cannot run this shape: ", why);
    return *i;
  }
  std::ostringstream why;
  for (const Instance& i : table) {
    const std::string w = i.can_implement(p);
    if (w.empty()) return i;
    why << "; " << i.name << ": " << w;
  }
  if (table.empty()) input_error("no CUDA ", family, " instance is built (MACTUNE_KERNEL_FILTER?)");
  input_error("no built CUDA ", family, " instance can run head_dim ", p.head_dim, ", G ",
              p.group_size(), ", ", dtype_name(p.kv_dtype), why.str());
}

}  // namespace

std::string AttendInstance::can_implement(const Problem& p) const {
  return tiled_can_implement(config, p);
}
std::size_t AttendInstance::smem_bytes() const {
  return attend_smem_bytes(config);
}
std::size_t AttendInstance::workspace_bytes(const Problem& p, std::int32_t capacity) const {
  return partial_o_bytes(capacity, p.group_size(), p.head_dim) +
         partial_lse_bytes(capacity, p.group_size());
}

std::string FullInstance::can_implement(const Problem& p) const {
  return tiled_can_implement(as_attend(config), p);
}
std::size_t FullInstance::smem_bytes() const {
  return attend_smem_bytes(as_attend(config));
}
std::size_t FullInstance::workspace_bytes(const Problem& p, std::int32_t capacity) const {
  return partial_o_bytes(capacity, p.group_size(), p.head_dim) +
         partial_lse_bytes(capacity, p.group_size());
}

std::string MatchInstance::can_implement(const Problem& p) const {
  if (const std::string why = validate(p); !why.empty()) return why;
  std::ostringstream e;
  if (p.head_dim != config.head_dim)
    e << "head_dim " << p.head_dim << " != the instance's " << config.head_dim;
  else if (p.kv_dtype != config.kv_dtype)
    e << "KV dtype " << dtype_name(p.kv_dtype) << " != the instance's "
      << dtype_name(config.kv_dtype) << " (the ring stores q~ in the KV dtype)";
  return e.str();
}
std::size_t MatchInstance::workspace_bytes(const Problem& p, int rows, int tiles) const {
  const std::size_t heads = static_cast<std::size_t>(rows) * p.q_heads;
  return heads * static_cast<std::size_t>(tiles) * sizeof(MatchPartial) + heads * 4u;
}

std::string MergeInstance::can_implement(const Problem& p) const {
  if (const std::string why = validate(p); !why.empty()) return why;
  if (p.head_dim != config.head_dim)
    return "head_dim " + std::to_string(p.head_dim) + " != the instance's " +
           std::to_string(config.head_dim);
  return "";
}

std::vector<InstanceInfo> instances() {
  std::vector<InstanceInfo> out;
  for (const auto& i : attend_instances())
    out.push_back({i.name, "cuda", "attend", config_string(i.config)});
  for (const auto& i : full_instances())
    out.push_back({i.name, "cuda", "full", config_string(i.config)});
  for (const auto& i : match_instances())
    out.push_back({i.name, "cuda", "match", config_string(i.config)});
  for (const auto& i : merge_instances())
    out.push_back({i.name, "cuda", "merge", config_string(i.config)});
  return out;
}

const AttendInstance* find_attend(std::string_view name) {
  return find_in(attend_instances(), name);
}
const FullInstance* find_full(std::string_view name) {
  return find_in(full_instances(), name);
}
const MatchInstance* find_match(std::string_view name) {
  return find_in(match_instances(), name);
}
const MergeInstance* find_merge(std::string_view name) {
  return find_in(merge_instances(), name);
}

const AttendInstance& select_attend(const Problem& p, std::string_view name) {
  return select_in(attend_instances(), p, name, "attend");
}
const FullInstance& select_full(const Problem& p, std::string_view name) {
  return select_in(full_instances(), p, name, "full");
}
const MatchInstance& select_match(const Problem& p, std::string_view name) {
  return select_in(match_instances(), p, name, "match");
}
const MergeInstance& select_merge(const Problem& p, std::string_view name) {
  return select_in(merge_instances(), p, name, "merge");
}

}  // namespace mactune::cuda
