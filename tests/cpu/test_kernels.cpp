// The two CPU kernels on their own (kernel_api.h), every instance against the fp64 reference
// (ref::attend) on the same stored values: attend over both K layouts (tiled pages and
// row-major ones), ranges that start and end inside a tile, heads masked below their own start
// or left with no row, block sizes from 1 row to kMaxBlockRows, G from 1 to 16; dist2 plain
// and normalized. The instances are the ISA paths this CPU runs and the test-only 16-lane
// instance of isa_lanes.h, which carries the AVX-512 path's logic to any CPU. Also: the
// generic path's vector widening of bf16 and f16 against to_float, for every 16-bit pattern.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_api.h"
#include "kernels/cpu/storage.h"
#include "tests/cpu/harness.h"
#include "tests/cpu/isa_lanes.h"

namespace mactune::cpu::test {
namespace {

#include "kernels/cpu/generic_v.inl"

// The generic path widens bf16 and f16 in vectors (generic_v.inl): every 16-bit pattern, subnormal
// halves, infinities and NaN payloads included, gives the bits of the scalar to_float.
template <class T>
void expect_widening_is_exact() {
  std::vector<T> all(1 << 16);
  for (int i = 0; i < 1 << 16; ++i) all[i].bits = static_cast<std::uint16_t>(i);
  using V = GenericV<8, true>;
  for (int i = 0; i < 1 << 16; i += V::L) {
    float got[V::L];
    V::store(got, V::load_wide(&all[i]));
    for (int j = 0; j < V::L; ++j) {
      const float want = to_float(all[i + j]);
      std::uint32_t a, b;
      std::memcpy(&a, &got[j], 4);
      std::memcpy(&b, &want, 4);
      ASSERT_EQ(a, b) << "pattern 0x" << std::hex << i + j << ": " << got[j] << " vs " << want;
    }
  }
}

TEST(CpuGenericV, WidensEveryBf16AndF16PatternLikeToFloat) {
  expect_widening_is_exact<bf16_t>();
  expect_widening_is_exact<f16_t>();
}

struct Instance {
  const char* name;
  KernelSet (*set)(int head_dim, DType kv_dtype);
  Isa runs_on;  // the ISA this CPU needs for it
};

void PrintTo(const Instance& instance, std::ostream* os) {
  *os << instance.name;
}

const Instance kInstances[] = {
    {"generic", &generic::kernel_set, Isa::generic},
    {"avx2", &avx2::kernel_set, Isa::avx2},
    {"avx512", &avx512::kernel_set, Isa::avx512},
    {"lanes16", &lanes16::kernel_set, Isa::generic},
};

class CpuKernels : public ::testing::TestWithParam<Instance> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam().runs_on))
      GTEST_SKIP() << isa_unsupported_reason(GetParam().runs_on);
  }
};

TEST_P(CpuKernels, AttendMatchesFp64OnBothLayouts) {
  constexpr double kTol = 1e-5;
  const int groups[] = {1, 2, 3, 4, 5, 8, 16, 7, 6, 4};
  const int blocks[] = {16, 1, 40, 128, 5, 32, 64, 16};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int c = 0;
  double worst_o = 0, worst_lse = 0;
  for (const int D : {64, 128, 256})
    for (const DType dt : {DType::f32, DType::f16, DType::bf16})
      for (const int page : {1, 16, 24, 48}) {
        const int len = 203;
        PagedKv kv(1, D, dt, page);
        std::vector<std::byte*> table;
        kv.reserve(table, len);
        ref::KvHead stored;  // the oracle's copy: the values as stored
        stored.k.resize(std::size_t(len) * D);
        stored.v.resize(stored.k.size());
        std::vector<float> k(D), v(D);
        for (int j = 0; j < len; ++j) {
          for (int d = 0; d < D; ++d) k[d] = u(rng), v[d] = u(rng);
          kv.write(table, 0, j, k.data(), v.data());
          kv.read(table, 0, j, k.data(), v.data());
          std::copy(k.begin(), k.end(), stored.k.begin() + std::ptrdiff_t(j) * D);
          std::copy(v.begin(), v.end(), stored.v.begin() + std::ptrdiff_t(j) * D);
        }
        const KernelSet ks = GetParam().set(D, dt);
        ASSERT_NE(ks.attend, nullptr);
        // The whole range, then one that starts and ends inside a tile.
        for (const auto& [lo, hi] : {std::pair{0, len}, std::pair{19, len - 6}}) {
          const int G = groups[c % std::size(groups)];
          const int block_rows = blocks[c % std::size(blocks)];
          ++c;
          std::vector<float> q(std::size_t(G) * D);
          for (float& x : q) x = 0.4f * u(rng);
          // Head 0 from lo (or below it); the others from anywhere up to past hi (no row).
          std::vector<int> start(G);
          for (int h = 0; h < G; ++h)
            start[h] = h == 0 ? lo - 3 : lo + int(rng() % std::uint64_t(hi - lo + 4)) - 2;
          std::vector<float> o(q.size(), std::numeric_limits<float>::quiet_NaN());
          std::vector<float> lse(G, std::numeric_limits<float>::quiet_NaN());
          AttendArgs a;
          a.q = q.data();
          a.start = start.data();
          a.nh = G;
          a.kv = kv.view(table, 0);
          a.lo = lo;
          a.hi = hi;
          a.block_rows = block_rows;
          a.o = o.data();
          a.lse = lse.data();
          ks.attend(a);
          const std::string where = std::string(dtype_name(dt)) + " D " + std::to_string(D) +
                                    " page " + std::to_string(page) + " G " + std::to_string(G) +
                                    " block " + std::to_string(block_rows) + " rows [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + ")";
          for (int h = 0; h < G; ++h) {
            const std::string head =
                where + " head " + std::to_string(h) + " from " + std::to_string(start[h]);
            // The kernels' q is in the log2 domain: weights 2^(q.k) = e^(ln 2 q.k).
            const std::vector<double> qh(q.begin() + std::ptrdiff_t(h) * D,
                                         q.begin() + std::ptrdiff_t(h + 1) * D);
            const ref::State want =
                ref::attend(qh.data(), stored, D, std::max(start[h], lo), hi, std::log(2.0));
            if (want.empty()) {  // no row: the empty state
              EXPECT_EQ(lse[h], -std::numeric_limits<float>::infinity()) << head;
              for (int d = 0; d < D; ++d) ASSERT_EQ(o[std::size_t(h) * D + d], 0.0f) << head;
              continue;
            }
            const double e_o = rel_err(&o[std::size_t(h) * D], want.o.data(), D);
            const double e_lse = std::abs(lse[h] - want.lse) / std::max(1.0, std::abs(want.lse));
            ASSERT_LT(e_o, kTol) << head;  // NaN (a lane never written) fails too
            ASSERT_LT(e_lse, kTol) << head << ": lse " << lse[h] << " vs " << want.lse;
            worst_o = std::max(worst_o, e_o);
            worst_lse = std::max(worst_lse, e_lse);
          }
        }
        kv.release(table);
      }
  RecordProperty("worst_o_rel_err", std::to_string(worst_o));
  RecordProperty("worst_lse_rel_err", std::to_string(worst_lse));
  std::printf("worst relative error: o %.3g, lse %.3g over %d calls\n", worst_o, worst_lse, c);
}

TEST_P(CpuKernels, Dist2MatchesFp64PlainAndNormalized) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const int D : {64, 128, 256})
    for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const int slots = 37;
      std::vector<std::byte> ring(std::size_t(slots) * D * dtype_size(dt));
      std::vector<double> stored(std::size_t(slots) * D);
      for (int s = 0; s < slots; ++s)
        for (int d = 0; d < D; ++d) {  // slot 5 stays zero: its norm is 0, c = 1
          const std::size_t i = std::size_t(s) * D + d;
          store_from_float(dt, ring.data(), i, s == 5 ? 0.0f : u(rng));
          stored[i] = load_as_float(dt, ring.data(), i);
        }
      std::vector<float> q(D);
      for (float& x : q) x = static_cast<float>(round_to(dt, 1.3 * u(rng)));
      const KernelSet ks = GetParam().set(D, dt);
      ASSERT_NE(ks.dist2, nullptr);
      for (const bool normalized : {false, true}) {
        std::vector<float> d2(slots, std::numeric_limits<float>::quiet_NaN());
        DistArgs a;
        a.q = q.data();
        a.ring_q = ring.data();
        a.slots = slots;
        a.normalized = normalized;
        a.d2 = d2.data();
        ks.dist2(a);
        for (int s = 0; s < slots; ++s) {
          const double* x = &stored[std::size_t(s) * D];
          double n2 = 0, e = 0;
          for (int d = 0; d < D; ++d) n2 += x[d] * x[d];
          const double scale = normalized && n2 > 0 ? std::sqrt(D / n2) : 1.0;
          for (int d = 0; d < D; ++d) e += (q[d] - scale * x[d]) * (q[d] - scale * x[d]);
          ASSERT_NEAR(d2[s], e, 1e-5 * (e + D))
              << dtype_name(dt) << " D " << D << " slot " << s << (normalized ? " normalized" : "");
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Instances, CpuKernels, ::testing::ValuesIn(kInstances),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace mactune::cpu::test
