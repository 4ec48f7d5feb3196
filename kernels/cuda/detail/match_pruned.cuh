// Pruned match on the GPU: the CPU engine's exact pruning (kernels/cpu/prune.h; docs/design.md
// section 7) over a ring that also holds each entry's 4-bit sketch (codes, scale, sum of
// squared codes, error bound, as prune::quantize writes them).
//
// One CTA of kPrunedThreads per (request row, query head). Phase 1: a thread per candidate
// reads its D/2 code bytes and the three sketch floats, computes dot_n = sum q_i n_i (an fp32
// FMA chain) and, in double, the bound's threshold test (prune::e_lo / reaches, written again
// here for the device with the same constants); a candidate the bound cannot rule out goes on
// a shared-memory list. Phase 2: the listed rows are read in full with exactly the arithmetic
// of MatchCta::scan_full (lanes per row, 16-byte chunks, sq_dist8, the same shuffle tree), so a
// survivor's d2 equals the exhaustive kernel's bit for bit, and reduced as match.cuh reduces
// (better(): ties to the older position; newest under the threshold). Every row the bound
// rules out has d2 >= threshold under the scan's own rounding (the proof in prune.h holds for
// any summation order of nonnegative terms), so the head's MatchPartial decides as the scan's
// does (detail/decide.h); `bound` is the threshold when a candidate was ruled out.
//
// Bytes: a candidate costs D/2 + 12 bytes instead of 2 D, plus 2 D for a survivor. The session
// runs it for `match_mode = pruned` (nearest and newest picks; `normalized` scans) and keeps the
// sketch current with quantize_entry below (the sketch kernel, match_pruned.cu);
// tests/cuda/test_match_pruned.cu checks it against a host reference,
// tests/simt/test_simt_pruned.cpp the whole step.
#pragma once

#include <cstdint>

#include "kernels/cpu/prune.h"
#include "kernels/cuda/detail/match.cuh"

namespace mactune::cuda {

inline constexpr int kPrunedThreads = 128;

}  // namespace mactune::cuda

namespace mactune::cuda::detail {

// prune::quantize for one stored ring entry (D values of the 16-bit type S), in the same order
// with the same roundings: codes, scale, c2 and err equal the CPU engine's bit for bit.
template <class S>
__device__ void quantize_entry(const S* x, int D, std::uint8_t* codes, float* scale, float* c2,
                               float* err) {
  namespace pr = ::mactune::cpu::prune;
  double amax = 0.0;
  bool finite = true;
  for (int i = 0; i < D; ++i) {
    const float v = to_float(x[i]);
    finite = finite && isfinite(v);
    amax = fmax(amax, fabs(static_cast<double>(v)));
  }
  const float s = finite ? static_cast<float>(amax / pr::kLevels) : 0.0f;
  const int H = D / 2;
  double e2 = 0.0, csum = 0.0;
  for (int i = 0; i < D; ++i) {
    const double v = to_float(x[i]);
    int ci = 0;
    if (s > 0.0f) ci = static_cast<int>(lround(v / s));
    ci = min(max(ci, -pr::kLevels), pr::kLevels);
    const double r = v - static_cast<double>(s) * ci;
    e2 += r * r;
    csum += static_cast<double>(ci) * ci;
    const unsigned nibble = static_cast<unsigned>(ci + 8);
    if (i < H)
      codes[i] = static_cast<std::uint8_t>(nibble);
    else
      codes[i - H] = static_cast<std::uint8_t>(codes[i - H] | (nibble << 4));
  }
  *scale = s;
  *c2 = static_cast<float>(csum);
  if (!finite) {
    *err = __builtin_huge_valf();  // no bound: the row is always read
  } else {
    const float e = static_cast<float>(sqrt(e2) * (1.0 + pr::kSlop));
    *err = e == 0.0f ? 0.0f : nextafterf(e, __builtin_huge_valf());
  }
}

// prune::e_lo, root_for and reaches for the device (same constants, same inequalities).
__device__ __forceinline__ bool pruned_reaches(double q2, double qsum, double dot_err, double l1,
                                               float dot_n, float scale, float c2, float err,
                                               double root) {
  namespace pr = ::mactune::cpu::prune;
  const double s = scale;
  const double dot = static_cast<double>(dot_n) - 8.0 * qsum;
  const double mag = q2 + 2.0 * s * fabs(dot) + s * s * c2 + 16.0 * s * l1;
  const double elo = q2 - 2.0 * s * dot + s * s * c2 - 2.0 * s * dot_err - pr::kSlop * mag;
  const double r = root + static_cast<double>(err);
  return elo * (1.0 - pr::kSlop) >= r * r * (1.0 + pr::kSlop);
}

template <int D, DType T>
struct PrunedMatchCta {
  static constexpr int kLanesPerRow = D / 8;
  static constexpr int kHalfLanes = kLanesPerRow / 2;
  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  static constexpr int kWarps = kPrunedThreads / 32;
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  static_assert(T == DType::bf16 || T == DType::f16, "16-bit ring queries");

  const PrunedMatchParams& p;

  __device__ void run() {
    namespace pr = ::mactune::cpu::prune;
    __shared__ float qs[D];
    __shared__ double stats[3];  // ||q||^2, sum q, ||q||_1
    __shared__ int list[kPrunedMaxCapacity];
    __shared__ int count;
    __shared__ MatchPartial warp_best[kWarps];
    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int head_row = static_cast<int>(blockIdx.x);
    const int row = head_row / p.q_heads, h = head_row % p.q_heads;
    const int slot = p.rows[row].slot, m = p.rows[row].m;
    const int K = p.ring.capacity;
    MatchPartial best{kInf, -1, -1, kInf};
    if (m < p.min_context) {  // not eligible: the planner decides a miss
      if (tid == 0) p.best[head_row] = best;
      return;
    }
    const std::uint16_t* qin =
        static_cast<const std::uint16_t*>(p.q_ring_in) + static_cast<long long>(head_row) * D;
    if (tid < D / 8) {
      float x[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(qin + tid * 8), x);
#pragma unroll
      for (int i = 0; i < 8; ++i) qs[tid * 8 + i] = x[i];
    }
    if (tid == 0) count = 0;
    __syncthreads();
    if (tid == 0) {
      double q2 = 0, sum = 0, l1 = 0;
      for (int i = 0; i < D; ++i) q2 += double(qs[i]) * qs[i], sum += qs[i], l1 += fabs(qs[i]);
      stats[0] = q2, stats[1] = sum, stats[2] = l1;
    }
    __syncthreads();
    const double q2 = stats[0], qsum = stats[1], l1 = stats[2];
    constexpr double gam = pr::gamma(2 * D + 16);
    const double dot_err = gam * 15.0 * l1 + pr::kTiny;
    const double root = sqrt((static_cast<double>(p.threshold) + pr::kTiny) /
                             ((1.0 - gam) * (1.0 - pr::kSafety) * (1.0 - pr::kSlop)));
    const bool finite = isfinite(q2) && isfinite(l1);
    const int lo = m > K ? m - K : 0;
    const long long head_base = (static_cast<long long>(slot) * p.q_heads + h) * K;
    bool ruled_out = false;
    // Phase 1: the bound of every candidate.
    for (int pos = lo + tid; pos < m; pos += kPrunedThreads) {
      const int sl = pos % K;
      if (p.ring.pos[static_cast<long long>(slot) * K + sl] != pos ||
          !(p.ring.lse[head_base + sl] > -kInf))
        continue;
      const uint4* c = reinterpret_cast<const uint4*>(p.sketch.codes + (head_base + sl) * (D / 2));
      float dot = 0.0f;
#pragma unroll
      for (int v = 0; v < D / 32; ++v) {
        const uint4 u = c[v];
        const std::uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int b = 0; b < 16; ++b) {
          const std::uint32_t byte = (w[b / 4] >> (8 * (b % 4))) & 0xffu;
          const int j = v * 16 + b;
          dot = fmaf(qs[j], static_cast<float>(byte & 15u), dot);
          dot = fmaf(qs[j + D / 2], static_cast<float>(byte >> 4), dot);
        }
      }
      const long long i = head_base + sl;
      if (finite && pruned_reaches(q2, qsum, dot_err, l1, dot, p.sketch.scale[i], p.sketch.c2[i],
                                   p.sketch.err[i], root)) {
        ruled_out = true;  // d2 >= threshold
        continue;
      }
      list[atomicAdd(&count, 1)] = pos;
    }
    __syncthreads();
    const int n_list = count;
    // Phase 2: the survivors in full, as MatchCta::scan_full reads a row.
    const int chunk = lane % kLanesPerRow, rw = lane / kLanesPerRow;
    float a[8];
    unpack8<T>(*reinterpret_cast<const uint4*>(qin + chunk * 8), a);
    for (int k0 = warp * kRowsPerWarp; k0 < n_list; k0 += kWarps * kRowsPerWarp) {
      const int k = k0 + rw;
      const bool valid = k < n_list;
      const int pos = valid ? list[k] : -1;
      float b[8] = {};
      if (valid) {
        const std::uint16_t* r =
            static_cast<const std::uint16_t*>(p.ring.q) + (head_base + pos % K) * D;
        unpack8<T>(*reinterpret_cast<const uint4*>(r + chunk * 8), b);
      }
      const float half = half_row_sum<kHalfLanes>(sq_dist8(a, b));
      const float d2 = half + __shfl_xor_sync(0xffffffffu, half, kHalfLanes);
      if (valid) {
        if (better(d2, pos, best.d2, best.pos)) {
          best.d2 = d2;
          best.pos = pos;
        }
        if (d2 < p.threshold && pos > best.newest) best.newest = pos;
      }
    }
    if (ruled_out) best.bound = fminf(best.bound, p.threshold);
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) combine(best, shfl_partial(best, o));
    if (lane == 0) warp_best[warp] = best;
    __syncthreads();
    if (tid == 0) {
      MatchPartial t = warp_best[0];
      for (int w = 1; w < kWarps; ++w) combine(t, warp_best[w]);
      p.best[head_row] = t;
      if (p.rows_read) p.rows_read[head_row] = n_list;
    }
  }
};

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

template <int D, DType T>
__global__ void __launch_bounds__(kPrunedThreads)
    match_pruned_kernel(const __grid_constant__ PrunedMatchParams p) {
  detail::PrunedMatchCta<D, T> cta{p};
  cta.run();
}

// Host launcher: one CTA per (row, head). Returns cudaErrorInvalidValue when the ring is
// larger than a CTA's survivor list or a pointer is missing.
template <int D, DType T>
cudaError_t launch_match_pruned(const PrunedMatchParams& p, cudaStream_t stream) {
  static_assert(D % 32 == 0, "codes are read 16 bytes (32 dimensions) at a time");
  if (p.ring.capacity < 1 || p.ring.capacity > kPrunedMaxCapacity || !p.rows || !p.best ||
      !p.q_ring_in || !p.ring.q || !p.ring.pos || !p.ring.lse || !p.sketch.codes ||
      !p.sketch.scale || !p.sketch.c2 || !p.sketch.err || p.n < 1 || p.q_heads < 1)
    return cudaErrorInvalidValue;
  match_pruned_kernel<D, T><<<p.n * p.q_heads, kPrunedThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mactune::cuda
