// The interpreter's primitives on their own, against the PTX ISA and the CUDA programming guide:
// mma.m16n8k16 fragments (the ISA's tables, written out here independently of the runtime),
// one m16n8k16 tile through ldmatrix(.trans) + mma against a plain loop, shuffles with widths
// and masks, __syncwarp with partial masks, cp.async landing only at its wait_group (stale
// bytes before), zero-fill, atomics, __ldcg, static and dynamic shared memory.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/detail/ptx.cuh"
#include "kernels/dtype.h"
#include "simt_test_util.h"

namespace mactune::simt::testing {
namespace {

using cuda::detail::ldsm_x4;
using cuda::detail::ldsm_x4_trans;
using cuda::detail::mma_16816;

std::uint16_t bits16(float x, bool bf16) {
  return bf16 ? float_to_bf16(x).bits : float_to_f16(x).bits;
}
double value16(std::uint16_t b, bool bf16) {
  return bf16 ? bf16_to_float({b}) : f16_to_float({b});
}
std::uint32_t pack2(std::uint16_t lo, std::uint16_t hi) {
  return lo | (std::uint32_t{hi} << 16);
}

// A [16][16], B [16][8] (k, n), 16-bit bits; C, D [16][8] f32. Fragments from the PTX ISA's
// tables for mma.m16n8k16 (.row.col, 16-bit A/B, f32 C/D), groupID = lane / 4,
// threadID_in_group = lane % 4:
//   a0,a1: (g, 2t + {0,1})  a2,a3: (g + 8, 2t + {0,1})  a4,a5: (g, 2t + 8 + {0,1})
//   a6,a7: (g + 8, 2t + 8 + {0,1});  b0,b1: (k = 2t + {0,1}, n = g)  b2,b3: (k = 2t + 8 + {0,1}, g)
//   c0,c1: (g, 2t + {0,1})  c2,c3: (g + 8, 2t + {0,1})
template <DType T>
__global__ void mma_tables_kernel(const std::uint16_t* A, const std::uint16_t* B, const float* C,
                                  float* D) {
  const int L = static_cast<int>(threadIdx.x), g = L / 4, t = L % 4;
  std::uint32_t a[4];
  a[0] = pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
  a[1] = pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
  a[2] = pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
  a[3] = pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
  const std::uint32_t b0 = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
  const std::uint32_t b1 = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
  float d[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                C[(g + 8) * 8 + 2 * t + 1]};
  mma_16816<T>(d, a, b0, b1);
  D[g * 8 + 2 * t] = d[0];
  D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2];
  D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

template <DType T>
void check_mma_tables() {
  constexpr bool bf16 = T == DType::bf16;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::uint16_t> a(256), b(128);
  std::vector<float> c(128);
  for (auto& x : a) x = bits16(n(rng), bf16);
  for (auto& x : b) x = bits16(n(rng), bf16);
  for (auto& x : c) x = n(rng);
  DeviceArray<std::uint16_t> da(a), db(b);
  DeviceArray<float> dc(c), dd(128);
  mma_tables_kernel<T><<<1, 32>>>(da.p, db.p, dc.p, dd.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ReportScope::all();
  const std::vector<float> d = dd.download();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = c[i * 8 + j];
      for (int k = 0; k < 16; ++k) s += value16(a[i * 16 + k], bf16) * value16(b[k * 8 + j], bf16);
      EXPECT_NEAR(d[i * 8 + j], s, 1e-5 * (1 + std::abs(s))) << "D[" << i << "][" << j << "]";
    }
}

TEST(SimtPrimitives, MmaBf16FragmentsFollowThePtxTables) {
  ReportScope scope;
  check_mma_tables<DType::bf16>();
}
TEST(SimtPrimitives, MmaF16FragmentsFollowThePtxTables) {
  ReportScope scope;
  check_mma_tables<DType::f16>();
}

// One tile through shared memory: A [16][16] row-major, Bt [16 n][16 k] (the "col" operand as
// rows, K of a K-tile) and V [16 k][16 n] (row-major, the .trans operand). Lane L gives the row
// address of matrix L / 8: A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
// (rows 8-15, k 8-15) = a0a1, a2a3, a4a5, a6a7. Bt: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k
// 0-7), (n 8-15, k 8-15) = b0b1, b2b3 of n-block 0, then of n-block 1. V (.trans): (k 0-7, n 0-7),
// (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
__global__ void tile_kernel(const std::uint16_t* A, const std::uint16_t* Bt, const std::uint16_t* V,
                            float* S, float* O) {
  __shared__ std::uint16_t a_s[16 * 16], bt_s[16 * 16], v_s[16 * 16];
  const int L = static_cast<int>(threadIdx.x);
  for (int e = L; e < 256; e += 32) {
    a_s[e] = A[e];
    bt_s[e] = Bt[e];
    v_s[e] = V[e];
  }
  __syncwarp();
  const int i = L / 8, r = L % 8;
  std::uint32_t a[4], b[4], v[4];
  ldsm_x4(a, a_s + (r + (i & 1) * 8) * 16 + (i >> 1) * 8);
  ldsm_x4(b, bt_s + (r + (i >> 1) * 8) * 16 + (i & 1) * 8);
  ldsm_x4_trans(v, v_s + (r + (i & 1) * 8) * 16 + (i >> 1) * 8);
  float s0[4] = {}, s1[4] = {}, o0[4] = {}, o1[4] = {};
  mma_16816<DType::bf16>(s0, a, b[0], b[1]);
  mma_16816<DType::bf16>(s1, a, b[2], b[3]);
  mma_16816<DType::bf16>(o0, a, v[0], v[1]);
  mma_16816<DType::bf16>(o1, a, v[2], v[3]);
  const int g = L / 4, t = L % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
    S[row * 16 + col] = s0[e];
    S[row * 16 + col + 8] = s1[e];
    O[row * 16 + col] = o0[e];
    O[row * 16 + col + 8] = o1[e];
  }
}

TEST(SimtPrimitives, LdmatrixAndMmaComputeOneTileAsAPlainLoop) {
  ReportScope scope;
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::uint16_t> a(256), bt(256), v(256);
  for (auto* m : {&a, &bt, &v})
    for (auto& x : *m) x = bits16(n(rng), true);
  DeviceArray<std::uint16_t> da(a), dbt(bt), dv(v);
  DeviceArray<float> ds(256), dout(256);
  tile_kernel<<<1, 32>>>(da.p, dbt.p, dv.p, ds.p, dout.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ReportScope::all();
  const std::vector<float> s = ds.download(), o = dout.download();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want_s = 0, want_o = 0;
      for (int k = 0; k < 16; ++k) {
        want_s += value16(a[i * 16 + k], true) * value16(bt[j * 16 + k], true);  // A Bt^T
        want_o += value16(a[i * 16 + k], true) * value16(v[k * 16 + j], true);   // A V
      }
      EXPECT_NEAR(s[i * 16 + j], want_s, 1e-5 * (1 + std::abs(want_s))) << i << "," << j;
      EXPECT_NEAR(o[i * 16 + j], want_o, 1e-5 * (1 + std::abs(want_o))) << i << "," << j;
    }
  EXPECT_TRUE(reports().empty()) << ReportScope::all();
}

// Shuffles of the CUDA programming guide: xor, up, down, idx at width 32 and 8, and a shuffle
// under a half-warp mask executed by that half only.
__global__ void shuffle_kernel(int* out) {
  const int l = static_cast<int>(threadIdx.x);
  const int x = 10 * l + 1;
  int* o = out + l * 9;
  o[0] = __shfl_xor_sync(0xffffffffu, x, 5);
  o[1] = __shfl_up_sync(0xffffffffu, x, 3);
  o[2] = __shfl_down_sync(0xffffffffu, x, 3);
  o[3] = __shfl_sync(0xffffffffu, x, 7);
  o[4] = __shfl_xor_sync(0xffffffffu, x, 5, 8);
  o[5] = __shfl_up_sync(0xffffffffu, x, 3, 8);
  o[6] = __shfl_down_sync(0xffffffffu, x, 3, 8);
  o[7] = __shfl_sync(0xffffffffu, x, 13, 8);
  o[8] = -1;
  if (l < 16) o[8] = __shfl_xor_sync(0x0000ffffu, x, 8);
  const long long big = (1ll << 40) + l;
  if (__shfl_xor_sync(0xffffffffu, big, 1) != (1ll << 40) + (l ^ 1)) o[8] = -2;
}

TEST(SimtPrimitives, ShufflesFollowTheProgrammingGuide) {
  ReportScope scope;
  DeviceArray<int> d(32 * 9);
  shuffle_kernel<<<1, 32>>>(d.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ReportScope::all();
  const std::vector<int> o = d.download();
  auto val = [](int l) { return 10 * l + 1; };
  for (int l = 0; l < 32; ++l) {
    const int* r = &o[static_cast<std::size_t>(l) * 9];
    const int base8 = l & ~7;
    EXPECT_EQ(r[0], val(l ^ 5)) << l;
    EXPECT_EQ(r[1], val(l >= 3 ? l - 3 : l)) << l;
    EXPECT_EQ(r[2], val(l + 3 < 32 ? l + 3 : l)) << l;
    EXPECT_EQ(r[3], val(7)) << l;
    EXPECT_EQ(r[4], val((l ^ 5) < base8 + 8 ? (l ^ 5) : l)) << l;
    EXPECT_EQ(r[5], val(l - 3 >= base8 ? l - 3 : l)) << l;
    EXPECT_EQ(r[6], val(l + 3 < base8 + 8 ? l + 3 : l)) << l;
    EXPECT_EQ(r[7], val(base8 + 13 % 8)) << l;
    EXPECT_EQ(r[8], l < 16 ? val(l ^ 8) : -1) << l;
  }
}

// __syncwarp with two disjoint half-warp masks: each half meets on its own, no deadlock, and
// orders shared accesses within the half (no race reported).
__global__ void syncwarp_kernel(int* out) {
  __shared__ int s[32];
  const int l = static_cast<int>(threadIdx.x);
  s[l] = l;
  if (l < 16)
    __syncwarp(0x0000ffffu);
  else
    __syncwarp(0xffff0000u);
  out[l] = s[l < 16 ? 15 - l : 47 - l];
}

TEST(SimtPrimitives, SyncwarpWithPartialMasks) {
  ReportScope scope;
  DeviceArray<int> d(32);
  syncwarp_kernel<<<1, 32>>>(d.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ReportScope::all();
  const std::vector<int> o = d.download();
  for (int l = 0; l < 32; ++l) EXPECT_EQ(o[l], l < 16 ? 15 - l : 47 - l);
}

// cp.async: three groups; reads before each wait_group see the old bytes (reported), each wait
// lands exactly the groups the ISA says; src-size 0 writes zeros.
__global__ void cp_async_kernel(const std::uint32_t* src, std::uint32_t* seen) {
  __shared__ std::uint32_t buf[3][4];
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < 4; ++i) buf[g][i] = 0xaaaa0000u + g;
  cuda::detail::cp_async_16(buf[0], src, true);
  cuda::detail::cp_async_commit();
  cuda::detail::cp_async_16(buf[1], src + 4, true);
  cuda::detail::cp_async_commit();
  cuda::detail::cp_async_16(buf[2], src + 8, false);
  cuda::detail::cp_async_commit();
  seen[0] = buf[0][0];  // stale: nothing waited
  cuda::detail::cp_async_wait<2>();
  seen[1] = buf[0][1];  // landed
  seen[2] = buf[1][1];  // stale
  cuda::detail::cp_async_wait<1>();
  seen[3] = buf[1][2];
  seen[4] = buf[2][0];  // stale
  cuda::detail::cp_async_wait<0>();
  seen[5] = buf[2][3];  // zero-filled
}

TEST(SimtPrimitives, CpAsyncLandsAtItsWaitGroup) {
  ReportScope scope(/*expect_reports=*/true);
  std::vector<std::uint32_t> src(12);
  for (int i = 0; i < 12; ++i) src[i] = 100u + i;
  DeviceArray<std::uint32_t> ds(src), seen(6);
  cp_async_kernel<<<1, 1>>>(ds.p, seen.p);
  const std::vector<std::uint32_t> s = seen.download();
  EXPECT_EQ(s[0], 0xaaaa0000u);
  EXPECT_EQ(s[1], 101u);
  EXPECT_EQ(s[2], 0xaaaa0001u);
  EXPECT_EQ(s[3], 106u);
  EXPECT_EQ(s[4], 0xaaaa0002u);
  EXPECT_EQ(s[5], 0u);
  EXPECT_EQ(count_reports(Check::cp_async), 3u) << ReportScope::all();
  EXPECT_EQ(reports().size(), 3u) << ReportScope::all();
}

// Atomics across blocks, a static shared reduction, dynamic shared memory past 48 KB (with the
// attribute, as on a GPU), __ldcg.
__global__ void reduce_kernel(const float* x, float* block_sums, unsigned* counter, int n) {
  extern __shared__ __align__(16) unsigned char dyn[];
  __shared__ float partial[8];
  float* stage = reinterpret_cast<float*>(dyn);
  const int tid = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x) * 256 + tid;
  stage[tid] = i < n ? __ldcg(x + i) : 0.0f;
  stage[60 * 1024 / 4 - 1 - tid] = 1.0f;  // the far end of the dynamic bytes
  __syncthreads();
  float v = stage[tid] * stage[60 * 1024 / 4 - 1 - tid];
  for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (tid % 32 == 0) partial[tid / 32] = v;
  __syncthreads();
  if (tid == 0) {
    float s = 0;
    for (int w = 0; w < 8; ++w) s += partial[w];
    block_sums[blockIdx.x] = s;
    atomicAdd(counter, 1u);
  }
}

TEST(SimtPrimitives, AtomicsSharedMemoryAndCacheHintedLoads) {
  ReportScope scope;
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7);
  DeviceArray<float> dx(x), sums(4);
  DeviceArray<unsigned> counter(1);
  reduce_kernel<<<4, 256, 60 * 1024>>>(dx.p, sums.p, counter.p, n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "above 48 KB needs the attribute";
  ASSERT_EQ(
      cudaFuncSetAttribute(reduce_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 60 * 1024),
      cudaSuccess);
  reduce_kernel<<<4, 256, 60 * 1024>>>(dx.p, sums.p, counter.p, n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ReportScope::all();
  const std::vector<float> s = sums.download();
  for (int b = 0; b < 4; ++b) {
    float want = 0;
    for (int i = b * 256; i < std::min(n, b * 256 + 256); ++i) want += x[i];
    EXPECT_EQ(s[b], want) << b;
  }
  EXPECT_EQ(counter.download()[0], 4u);
  ASSERT_FALSE(launches().empty());
  // x once, plus the read half of each read-modify-write atomic.
  EXPECT_EQ(launches().back().global_read, static_cast<std::uint64_t>(n) * 4 + 4 * 4);
  EXPECT_EQ(launches().back().atomic_ops, 4u);
}

}  // namespace
}  // namespace mactune::simt::testing
