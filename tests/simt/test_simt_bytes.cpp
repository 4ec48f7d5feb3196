// Global bytes each kernel of a step moves, counted by the simt runtime per device allocation,
// against the traffic the cost model (tuner/decide/cost_model.h: its kv_bytes and ring_bytes terms
// are StepStats) and profiler/dram (modeled read = kv_bytes_read + ring_bytes_read) assume: the
// attend/full kernel reads exactly the planned KV tokens (no tile read twice, nothing past the
// spans), match reads exactly the ring queries of the eligible heads, merge the hits' summaries.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "simt_step_runner.h"

namespace mactune::simt::testing {
namespace {

// Bytes a kernel (by name prefix) read from / wrote to the given allocation serials.
struct Traffic {
  std::uint64_t read = 0, written = 0;
};
Traffic traffic(const SynthOutcome& o, const std::string& kernel,
                std::initializer_list<int> allocs) {
  Traffic t;
  for (const LaunchStats& l : o.launches) {
    if (l.kernel.rfind(kernel, 0) != 0) continue;
    for (const AllocationBytes& a : l.by_allocation)
      for (int s : allocs)
        if (a.serial == o.first_alloc + s) {
          t.read += a.read;
          t.written += a.written;
        }
  }
  return t;
}

void print_launches(const std::string& name, const SynthOutcome& o) {
  std::printf("[ bytes    ] %s\n", name.c_str());
  for (const LaunchStats& l : o.launches)
    std::printf("[ bytes    ]   %-28s read %12llu  written %10llu  (cp.async %llu, atomics %llu)\n",
                l.kernel.c_str(), static_cast<unsigned long long>(l.global_read),
                static_cast<unsigned long long>(l.global_written),
                static_cast<unsigned long long>(l.cp_async_read),
                static_cast<unsigned long long>(l.atomic_ops));
  std::printf("[ bytes    ]   modeled: kv read %lld, ring read %lld, written %lld\n",
              o.stats.kv_bytes_read, o.stats.ring_bytes_read, o.stats.bytes_written);
}

// Session allocation order (session.cpp): K pool, V pool, page table, then (MAC) ring q, ring o,
// ring lse, ring pos, ...
constexpr int kK = 0, kV = 1, kRingQ = 3, kRingO = 4, kRingLse = 5;

SynthCase bytes_case(const std::string& name) {
  SynthCase c;
  c.name = name;
  c.batch = 4;
  c.group = 4;
  c.ring = 128;
  c.band = 64;
  c.contexts = {700, 1001, 1337};
  c.page_size = 16;
  return c;
}

TEST(SimtBytes, FullAttentionReadsEveryTokenOnce) {
  SynthCase c = bytes_case("full");
  c.mac_enabled = false;
  const SynthOutcome o = run_synthetic(c);
  print_launches(c.name, o);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_EQ(allocation_bytes(o.first_alloc + kK), allocation_bytes(o.first_alloc + kV));
  const Traffic kv = traffic(o, "full_kernel", {kK, kV});
  EXPECT_EQ(static_cast<long long>(kv.read), o.stats.kv_bytes_read);
  EXPECT_EQ(kv.written, 0u);
  // The appended token: 2 D bytes per group (prepare).
  const Traffic app = traffic(o, "prepare_kernel", {kK, kV});
  EXPECT_EQ(app.written, static_cast<std::uint64_t>(c.batch) * c.kv_heads * 128 * 2 * 2);
}

TEST(SimtBytes, MacHit0ReadsEveryTokenAndTheRing) {
  SynthCase c = bytes_case("mac_hit0");
  c.engine.match = "match_cuda_hd128_p0_bf16";
  const SynthOutcome o = run_synthetic(c);
  print_launches(c.name, o);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_EQ(o.hits, 0);
  EXPECT_EQ(static_cast<long long>(traffic(o, "attend_kernel", {kK, kV}).read),
            o.stats.kv_bytes_read);
  // Every candidate's q~ row once (full scan), nothing else of the ring's queries.
  EXPECT_EQ(static_cast<long long>(traffic(o, "match_kernel", {kRingQ}).read),
            o.stats.ring_bytes_read);
  EXPECT_EQ(traffic(o, "merge_kernel", {kRingO, kRingLse}).read, 0u);
}

TEST(SimtBytes, MacHit1ReadsTheBandAndTheSummaries) {
  SynthCase c = bytes_case("mac_hit1");
  c.engine.match = "match_cuda_hd128_p0_bf16";
  c.forced.enabled = true;
  c.forced.hit_rate = 1.0;
  c.forced.lag = {LagKind::uniform, 1, 64};
  const SynthOutcome o = run_synthetic(c);
  print_launches(c.name, o);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_EQ(o.hits, o.heads);
  const long long kv = static_cast<long long>(traffic(o, "attend_kernel", {kK, kV}).read);
  EXPECT_EQ(kv, o.stats.kv_bytes_read);
  EXPECT_GT(o.stats.skip_ratio(), 0.8);
  const long long ring_q = static_cast<long long>(traffic(o, "match_kernel", {kRingQ}).read);
  const long long summary_o = static_cast<long long>(traffic(o, "merge_kernel", {kRingO}).read);
  const long long summary_lse = static_cast<long long>(traffic(o, "merge_kernel", {kRingLse}).read);
  // The model: every candidate's q~ (match) and each hit's summary, D x 4 + 4 bytes (merge).
  EXPECT_EQ(ring_q + summary_o + o.stats.hit_heads * 4, o.stats.ring_bytes_read);
  EXPECT_EQ(summary_o, o.stats.hit_heads * 128 * 4);
  // Every lane of the head's warp loads the same lse: counted per thread here (32 x 4 bytes), one
  // broadcast sector on a GPU.
  EXPECT_EQ(summary_lse, o.stats.hit_heads * 32 * 4);
}

// The probe reads half a row of every candidate whose first half already exceeds the threshold:
// fewer ring bytes than the model's full scan, never more.
TEST(SimtBytes, ProbeReadsAtMostTheModeledRing) {
  SynthCase c = bytes_case("mac_probe");
  c.engine.match = "match_cuda_hd128_p1_bf16";
  const SynthOutcome o = run_synthetic(c);
  print_launches(c.name, o);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const long long ring_q = static_cast<long long>(traffic(o, "match_kernel", {kRingQ}).read);
  EXPECT_LE(ring_q, o.stats.ring_bytes_read);
  EXPECT_GE(ring_q, o.stats.ring_bytes_read / 2);
}

}  // namespace
}  // namespace mactune::simt::testing
