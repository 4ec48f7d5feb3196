// See isa_lanes.h. Compiled for the baseline target, like isa_generic.cpp.
#include "tests/cpu/isa_lanes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mactune::cpu::lanes16 {
namespace {
#include "kernels/cpu/generic_v.inl"
using V = GenericV<16, true>;
#include "kernels/cpu/kernel_body.inl"
}  // namespace
#include "kernels/cpu/kernel_table.inl"
}  // namespace mactune::cpu::lanes16
