// The tables of the paths this build has not compiled: every vector path on non-x86 builds,
// and those MACTUNE_CPU_ISAS leaves out (kernels/cpu/CMakeLists.txt). isa_supported() reports
// them absent and these tables are empty, so they are never selected.
#include "kernels/cpu/kernel_api.h"

namespace mactune::cpu {
#if !defined(__x86_64__) || defined(MACTUNE_CPU_SKIP_AVX2)
namespace avx2 {
KernelSet kernel_set(int, DType) {
  return {};
}
}  // namespace avx2
#endif
#if !defined(__x86_64__) || defined(MACTUNE_CPU_SKIP_AVX512)
namespace avx512 {
KernelSet kernel_set(int, DType) {
  return {};
}
}  // namespace avx512
#endif
}  // namespace mactune::cpu
