// The host implementation of the PTX wrappers of kernels/cuda/detail/ptx.cuh (the simt build,
// MACTUNE_SIMT): the same functions with the PTX ISA's semantics, executed by the simt runtime.
//   cp.async.cg 16 bytes (src-size 0: zero-fill): the source is read at issue, the bytes land
//     in shared memory only at the cp.async.wait_group that retires their group (until then a
//     read sees the old bytes, and the runtime reports it)
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 and
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.f32: warp-collective, fragments as in the
//     PTX ISA's tables (kernels/cuda/simt/runtime.cpp; tests/simt/test_simt_primitives.cpp)
// Included by ptx.cuh in place of its inline assembly; never on the device.
#pragma once

#include <cstdint>

#include "kernels/cuda/simt/runtime.h"
#include "kernels/dtype.h"

namespace mactune::cuda::detail {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return ::mactune::simt::dev::shared_offset(p);
}

__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  ::mactune::simt::dev::cp_async_16(dst, src, valid);
}
__device__ __forceinline__ void cp_async_commit() {
  ::mactune::simt::dev::cp_async_commit();
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  ::mactune::simt::dev::cp_async_wait(N);
}

__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const void* row) {
  ::mactune::simt::dev::ldmatrix_x4(r, row, false);
}
__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const void* row) {
  ::mactune::simt::dev::ldmatrix_x4(r, row, true);
}

template <DType T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  static_assert(T == DType::bf16 || T == DType::f16, "mma operands are bf16 or f16");
  ::mactune::simt::dev::mma_16816(d, a, b0, b1, T == DType::bf16);
}

}  // namespace mactune::cuda::detail
