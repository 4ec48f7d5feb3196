// Non-x86 builds: the AVX2 and AVX-512 paths do not exist; isa_supported() reports them absent
// and these tables are empty, so only the generic path is ever selected.
#include "kernels/cpu/kernel_api.h"

namespace mactune::cpu {
namespace avx2 {
KernelSet kernel_set(int, DType) {
  return {};
}
}  // namespace avx2
namespace avx512 {
KernelSet kernel_set(int, DType) {
  return {};
}
}  // namespace avx512
}  // namespace mactune::cpu
