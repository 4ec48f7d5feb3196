// The portable path: the kernel body over 8-lane GCC/Clang vector extensions (generic_v.inl),
// compiled for the baseline target (SSE2 on x86-64; NEON or scalar elsewhere). bf16 rows are
// split by lane parity as on AVX2 (V::pair_slot); other dtypes keep memory order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/kernel_api.h"

namespace mactune::cpu::generic {
namespace {

#include "kernels/cpu/generic_v.inl"

using V = GenericV<8, true>;

#include "kernels/cpu/kernel_body.inl"

}  // namespace

#include "kernels/cpu/kernel_table.inl"

}  // namespace mactune::cpu::generic
