// Catalogs of kernel instances, and the default one made of this build's registries.
#include "schedules/catalog.h"

#include <algorithm>
#include <charconv>
#include <optional>

#if MACTUNE_SCHEDULES_HAVE_CPU
#include "kernels/cpu/session.h"
#endif
#if MACTUNE_SCHEDULES_HAVE_CUDA
#include "kernels/cuda/registry.h"
#endif

namespace mactune::sched {
namespace {

// The number after `prefix` when the whole token is prefix + digits.
std::optional<int> field(std::string_view token, std::string_view prefix) {
  if (token.size() <= prefix.size() || token.substr(0, prefix.size()) != prefix) return {};
  const std::string_view digits = token.substr(prefix.size());
  int value = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return {};
  return value;
}

#if MACTUNE_SCHEDULES_HAVE_CPU
// Widest vector ISA first, so the fallback takes the fastest CPU path this machine runs.
int isa_rank(std::string_view name) {
  if (name.find("_avx512_") != std::string_view::npos) return 0;
  if (name.find("_avx2_") != std::string_view::npos) return 1;
  return 2;
}
#endif

}  // namespace

bool name_fits(std::string_view name, const Problem& p) {
  std::string_view last;
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t end = std::min(name.find('_', at), name.size());
    const std::string_view token = name.substr(at, end - at);
    if (auto hd = field(token, "hd"); hd && *hd != p.head_dim) return false;
    if (auto g = field(token, "g"); g && *g < p.group_size()) return false;  // runs G' <= G
    last = token;
    at = end + 1;
  }
  if (last == "f32" || last == "f16" || last == "bf16") return last == dtype_name(p.kv_dtype);
  return true;
}

Catalog::Catalog(std::vector<InstanceInfo> instances, Fits fits)
    : instances_(std::move(instances)), fits_(std::move(fits)) {
  by_name_.resize(instances_.size());
  for (std::size_t i = 0; i < by_name_.size(); ++i) by_name_[i] = i;
  std::stable_sort(by_name_.begin(), by_name_.end(), [this](std::size_t a, std::size_t b) {
    return instances_[a].name < instances_[b].name;
  });
}

const InstanceInfo* Catalog::find(std::string_view name) const {
  const auto it = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](std::size_t i, std::string_view n) { return instances_[i].name < n; });
  if (it == by_name_.end() || instances_[*it].name != name) return nullptr;
  return &instances_[*it];
}

bool Catalog::fits(const InstanceInfo& info, const Problem& p) const {
  return fits_ ? fits_(info, p) : name_fits(info.name, p);
}

const InstanceInfo* Catalog::first_fit(std::string_view backend, std::string_view family,
                                       const Problem& p) const {
  for (const InstanceInfo& info : instances_)
    if (info.backend == backend && info.family == family && fits(info, p)) return &info;
  return nullptr;
}

namespace {

#if MACTUNE_SCHEDULES_HAVE_CPU
// The CPU engine's own check (head_dim, G, ISA) on top of the name's fields.
bool cpu_fits(const InstanceInfo& info, const Problem& p) {
  if (!name_fits(info.name, p)) return false;
  cpu::SessionOptions o;
  o.shape = p;
  o.mac_enabled = info.family != "full";
  return cpu::validate(o).empty();
}
#endif

#if MACTUNE_SCHEDULES_HAVE_CUDA
// The instance's can_implement(), by family.
bool cuda_fits(const InstanceInfo& info, const Problem& p) {
  if (info.family == "attend") {
    const cuda::AttendInstance* i = cuda::find_attend(info.name);
    return i && i->can_implement(p).empty();
  }
  if (info.family == "full") {
    const cuda::FullInstance* i = cuda::find_full(info.name);
    return i && i->can_implement(p).empty();
  }
  if (info.family == "match") {
    const cuda::MatchInstance* i = cuda::find_match(info.name);
    return i && i->can_implement(p).empty();
  }
  if (info.family == "merge") {
    const cuda::MergeInstance* i = cuda::find_merge(info.name);
    return i && i->can_implement(p).empty();
  }
  return name_fits(info.name, p);
}
#endif

bool registry_fits(const InstanceInfo& info, const Problem& p) {
#if MACTUNE_SCHEDULES_HAVE_CPU
  if (info.backend == "cpu") return cpu_fits(info, p);
#endif
#if MACTUNE_SCHEDULES_HAVE_CUDA
  if (info.backend == "cuda") return cuda_fits(info, p);
#endif
  return name_fits(info.name, p);
}

}  // namespace

const Catalog& default_catalog() {
  static const Catalog catalog = [] {
    std::vector<InstanceInfo> all;
#if MACTUNE_SCHEDULES_HAVE_CPU
    std::vector<InstanceInfo> cpu = mactune::cpu::instances();
    std::stable_sort(cpu.begin(), cpu.end(), [](const InstanceInfo& a, const InstanceInfo& b) {
      return isa_rank(a.name) < isa_rank(b.name);
    });
    all.insert(all.end(), cpu.begin(), cpu.end());
#endif
#if MACTUNE_SCHEDULES_HAVE_CUDA
    std::vector<InstanceInfo> cuda = mactune::cuda::instances();
    all.insert(all.end(), cuda.begin(), cuda.end());
#endif
    return Catalog(std::move(all), registry_fits);
  }();
  return catalog;
}

}  // namespace mactune::sched
