// Catalogs of kernel instances, and the default one made of this build's descriptions.
#include "dispatcher/catalog.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "kernels/cpu/instances.h"
#if MACTUNE_DISPATCH_CUDA_GRID
#include "kernels/cuda/instance_grid.h"
#endif

namespace mactune::dispatch {
namespace {

// The number after `prefix` when the whole token is prefix + digits.
std::optional<int> number_after(std::string_view prefix, std::string_view token) {
  if (token.size() <= prefix.size() || token.substr(0, prefix.size()) != prefix) return {};
  const std::string_view digits = token.substr(prefix.size());
  int value = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return {};
  return value;
}

}  // namespace

bool name_fits(std::string_view name, const Problem& p) {
  std::string_view last;
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t end = std::min(name.find('_', at), name.size());
    const std::string_view token = name.substr(at, end - at);
    if (auto hd = number_after("hd", token); hd && *hd != p.head_dim) return false;
    if (auto g = number_after("g", token); g && *g < p.group_size()) return false;  // runs G' <= G
    last = token;
    at = end + 1;
  }
  if (last == "f32" || last == "f16" || last == "bf16") return last == dtype_name(p.kv_dtype);
  return true;
}

Catalog::Catalog(std::vector<InstanceDesc> instances) : instances_(std::move(instances)) {
  by_name_.resize(instances_.size());
  for (std::size_t i = 0; i < by_name_.size(); ++i) by_name_[i] = i;
  std::stable_sort(by_name_.begin(), by_name_.end(), [this](std::size_t a, std::size_t b) {
    return instances_[a].name < instances_[b].name;
  });
}

const InstanceDesc* Catalog::find(std::string_view name) const {
  const auto it = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](std::size_t i, std::string_view n) { return instances_[i].name < n; });
  if (it == by_name_.end() || instances_[*it].name != name) return nullptr;
  return &instances_[*it];
}

std::string Catalog::why_not(const InstanceDesc& info, const Problem& p) const {
  if (info.can_implement) return info.can_implement(p);
  return name_fits(info.name, p) ? "" : "its name's fields do not allow the shape";
}

const InstanceDesc* Catalog::first_fit(Backend backend, Family family, const Problem& p) const {
  for (const InstanceDesc& info : instances_)
    if (info.backend == backend && info.family == family && fits(info, p)) return &info;
  return nullptr;
}

const Catalog& default_catalog() {
  static const Catalog catalog = [] {
    std::vector<InstanceDesc> all = cpu::instances();
#if MACTUNE_DISPATCH_CUDA_GRID
    for (InstanceDesc& d : cuda::built_instance_descs()) all.push_back(std::move(d));
#endif
    return Catalog(std::move(all));
  }();
  return catalog;
}

}  // namespace mactune::dispatch
