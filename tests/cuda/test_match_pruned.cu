// The CUDA pruned match (kernels/cuda/detail/match_pruned.cuh) against a host reference of
// the exhaustive scan's decision: random bf16 rings whose sketches prune::quantize writes (as
// the CPU ring write does), queries that repeat ring entries exactly (d2 = 0, and ties between
// two equal entries), perturbed ones (hits with d2 > 0) and fresh ones (misses); pick nearest
// (position, ties to the older) and newest. Reports Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/prune.h"
#include "kernels/cuda/detail/match_pruned.cuh"
#include "kernels/cuda/device.h"
#include "kernels/dtype.h"
#include "kernels/problem.h"

namespace mactune::cuda {
namespace {

template <class T>
T* upload(const std::vector<T>& h) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

float bf16_value(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(CudaMatchPruned, DecidesAsTheExhaustiveScan) {
  if (!gpu_status().usable) GTEST_SKIP() << "no usable GPU: " << gpu_status().why_not;
  constexpr int D = 128, Hq = 8, K = 512, n = 3;
  const int m = 700;  // the ring holds positions [m - K, m)
  const double tau = 0.45;
  const float thr = static_cast<float>(match_threshold(D, tau));
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::uint16_t> ring_q(std::size_t(n) * Hq * K * D), q_in(std::size_t(n) * Hq * D);
  std::vector<std::uint8_t> codes(std::size_t(n) * Hq * K * D / 2);
  std::vector<float> scale(std::size_t(n) * Hq * K), c2(scale.size()), err(scale.size());
  std::vector<float> lse(scale.size(), 1.0f);
  std::vector<std::int32_t> pos(std::size_t(n) * K);
  std::vector<StepRow> rows(n);
  for (int r = 0; r < n; ++r) {
    rows[r] = {r, m};
    for (int p = m - K; p < m; ++p) pos[std::size_t(r) * K + p % K] = p;
  }
  std::vector<float> x(D);
  for (std::size_t e = 0; e < scale.size(); ++e) {
    for (int i = 0; i < D; ++i) {
      ring_q[e * D + i] = float_to_bf16(nd(rng)).bits;
      x[i] = bf16_value(ring_q[e * D + i]);
    }
    const cpu::prune::Sketch s = cpu::prune::quantize(x.data(), D, &codes[e * D / 2]);
    scale[e] = s.scale, c2[e] = s.c2, err[e] = s.err;
  }
  // Queries: head h of row r copies the entry at lag (h + 1) * 7 (h % 4 == 0), perturbs one
  // (h % 4 == 1), is fresh (h % 4 == 2), or copies an entry that another slot duplicates (a tie).
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < Hq; ++h) {
      const std::size_t head = std::size_t(r) * Hq + h;
      const int p = m - (h + 1) * 7;
      const std::uint16_t* src = &ring_q[(head * K + p % K) * D];
      for (int i = 0; i < D; ++i) {
        float v = bf16_value(src[i]);
        if (h % 4 == 1) v += 0.05f * nd(rng);
        if (h % 4 == 2) v = nd(rng);
        q_in[head * D + i] = float_to_bf16(v).bits;
      }
      if (h % 4 == 3) {  // a second copy, older: the tie goes to it
        const int older = p - 100;
        std::copy(src, src + D, &ring_q[(head * K + older % K) * D]);
        std::copy(&codes[(head * K + p % K) * D / 2], &codes[(head * K + p % K) * D / 2] + D / 2,
                  &codes[(head * K + older % K) * D / 2]);
        scale[head * K + older % K] = scale[head * K + p % K];
        c2[head * K + older % K] = c2[head * K + p % K];
        err[head * K + older % K] = err[head * K + p % K];
      }
    }
  PrunedMatchParams prm;
  prm.ring.q = upload(ring_q);
  prm.ring.lse = upload(lse);
  prm.ring.pos = upload(pos);
  prm.ring.capacity = K;
  prm.sketch = {upload(codes), upload(scale), upload(c2), upload(err)};
  prm.rows = upload(rows);
  prm.q_ring_in = upload(q_in);
  std::vector<MatchPartial> best(std::size_t(n) * Hq);
  std::vector<std::int32_t> read(best.size());
  prm.best = upload(best);
  prm.rows_read = upload(read);
  prm.n = n;
  prm.q_heads = Hq;
  prm.threshold = thr;
  ASSERT_EQ((launch_match_pruned<D, DType::bf16>(prm, nullptr)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(best.data(), prm.best, best.size() * sizeof(MatchPartial), cudaMemcpyDeviceToHost),
      cudaSuccess);
  ASSERT_EQ(cudaMemcpy(read.data(), prm.rows_read, read.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  long total_read = 0;
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < Hq; ++h) {
      const std::size_t head = std::size_t(r) * Hq + h;
      // The host reference: every candidate in double; the decisions sit far from the
      // threshold and from ties except the exact ones built above.
      double bd = INFINITY;
      int bp = -1, newest = -1;
      for (int p = m - K; p < m; ++p) {
        double d2 = 0;
        for (int i = 0; i < D; ++i) {
          const double d = double(bf16_value(q_in[head * D + i])) -
                           bf16_value(ring_q[(head * K + p % K) * D + i]);
          d2 += d * d;
        }
        if (d2 < bd) bd = d2, bp = p;
        if (d2 < thr) newest = p;
      }
      const bool hit = bd < thr;
      SCOPED_TRACE("row " + std::to_string(r) + " head " + std::to_string(h));
      EXPECT_EQ(best[head].pos >= 0 && best[head].d2 < thr, hit);
      if (hit) {
        EXPECT_EQ(best[head].pos, bp);
        EXPECT_NEAR(best[head].d2, bd, 1e-4 * (1 + bd));
      }
      EXPECT_EQ(best[head].newest, newest);
      total_read += read[head];
    }
  EXPECT_LT(total_read, long(n) * Hq * K / 10) << "the bound pruned too little";
  const void* owned[] = {prm.ring.q,       prm.ring.lse,  prm.ring.pos,   prm.sketch.codes,
                         prm.sketch.scale, prm.sketch.c2, prm.sketch.err, prm.rows,
                         prm.q_ring_in,    prm.best,      prm.rows_read};
  for (const void* p : owned) cudaFree(const_cast<void*>(p));
}

}  // namespace
}  // namespace mactune::cuda
