// The hand-written half of the CUDA registry: the list of every built instance over the
// generated tables (registry_table.cpp in the build tree).
#include "kernels/cuda/registry.h"

namespace mactune::cuda {

std::vector<InstanceDesc> instances() {
  std::vector<InstanceDesc> out;
  for (const auto& i : attend_instances()) out.push_back(i);
  for (const auto& i : full_instances()) out.push_back(i);
  for (const auto& i : match_instances()) out.push_back(i);
  for (const auto& i : merge_instances()) out.push_back(i);
  return out;
}

}  // namespace mactune::cuda
