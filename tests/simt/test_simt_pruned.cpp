// The CUDA session's pruned match (engine match_mode = pruned: detail/match_pruned.cuh and the
// sketch kernel of match_pruned.cu), run on the host by the simt interpreter:
//   - the sketch kernel writes exactly what the CPU engine's prune::quantize writes (codes,
//     scale, c2, err bit for bit), special rows included;
//   - the GPU tests' harness (queries that repeat or nearly repeat the session's own earlier
//     ones) against the fp64 reference, decisions exact: nearest with graphs, newest on pages of 7;
//   - whole steps after a synthetic prefill decide exactly as SyntheticOracle (the exhaustive
//     scan's decisions): nearest and newest, rings of 512 and 2048, several steps (the sketch of
//     entries the session itself wrote), a switch from the scan mid-run (the sketch rebuilt from
//     the ring), `normalized` (which scans);
//   - at hit 0 the pruned match reads a fraction of the bytes the scan reads.
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cpu/prune.h"
#include "kernels/cuda/launchers.h"
#include "kernels/error.h"
#include "simt_step_runner.h"

namespace mactune::simt::testing {
namespace {

using cuda::kPrunedMaxCapacity;
using cuda::launch_sketch;
using cuda::SketchParams;
using cuda::StepRow;

template <class T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* dev, std::size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Every entry of two slots' rings (random rows at several magnitudes, zeros, a NaN, an inf,
// subnormal-sized values), then one step's rows: the device sketch equals prune::quantize's.
TEST(SimtPruned, SketchKernelEqualsCpuQuantize) {
  constexpr int D = 128, Hq = 3, K = 16, slots = 2;
  const std::size_t entries = static_cast<std::size_t>(slots) * Hq * K;
  std::vector<bf16_t> q(entries * D);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::size_t e = 0; e < entries; ++e) {
    const float mag = std::ldexp(1.0f, static_cast<int>(e % 9) * 9 - 40);  // 2^-40 .. 2^32
    for (int d = 0; d < D; ++d) q[e * D + d] = float_to_bf16(nd(rng) * mag);
  }
  for (int d = 0; d < D; ++d) q[1 * D + d] = float_to_bf16(0.0f);
  q[2 * D + 5] = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  q[3 * D + 77] = float_to_bf16(-std::numeric_limits<float>::infinity());
  for (int d = 0; d < D; ++d) q[4 * D + d] = float_to_bf16(d % 3 == 0 ? 1e-39f : -3e-40f);

  auto check = [&](const SketchParams& p, const std::vector<std::size_t>& want_entries) {
    ASSERT_EQ(launch_sketch(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint8_t> codes = host_copy(p.codes, entries * D / 2);
    const std::vector<float> scale = host_copy(p.scale, entries);
    const std::vector<float> c2 = host_copy(p.c2, entries);
    const std::vector<float> err = host_copy(p.err, entries);
    for (std::size_t e : want_entries) {
      float x[D];
      for (int d = 0; d < D; ++d) x[d] = bf16_to_float(q[e * D + d]);
      std::uint8_t want[D / 2];
      const cpu::prune::Sketch s = cpu::prune::quantize(x, D, want);
      EXPECT_EQ(std::memcmp(&codes[e * D / 2], want, D / 2), 0) << "entry " << e;
      EXPECT_EQ(float_bits(scale[e]), float_bits(s.scale)) << "entry " << e;
      EXPECT_EQ(float_bits(c2[e]), float_bits(s.c2)) << "entry " << e;
      EXPECT_EQ(float_bits(err[e]), float_bits(s.err)) << "entry " << e;
    }
  };
  SketchParams p;
  p.ring_q = device_copy(q);
  p.codes = device_copy(std::vector<std::uint8_t>(entries * D / 2, 0));
  p.scale = device_copy(std::vector<float>(entries, -1.0f));
  p.c2 = device_copy(std::vector<float>(entries, -1.0f));
  p.err = device_copy(std::vector<float>(entries, -1.0f));
  p.q_heads = Hq;
  p.capacity = K;
  p.head_dim = D;
  p.kv_dtype = DType::bf16;
  p.slot = 0;
  p.slots = slots;
  std::vector<std::size_t> all(entries);
  for (std::size_t e = 0; e < entries; ++e) all[e] = e;
  check(p, all);

  // A step's rows: only slot m mod K of each (row, head) is rewritten.
  for (std::size_t e = 0; e < entries; ++e)
    for (int d = 0; d < D; ++d) q[e * D + d] = float_to_bf16(nd(rng));
  ASSERT_EQ(cudaMemcpy(const_cast<void*>(p.ring_q), q.data(), q.size() * sizeof(bf16_t),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  const std::vector<StepRow> rows = {{1, 37}, {0, 5}};  // slot 1 at m 37 (ring slot 5), slot 0
  p.rows = device_copy(rows);
  p.n = 2;
  std::vector<std::size_t> written;
  for (const StepRow& r : rows)
    for (int h = 0; h < Hq; ++h)
      written.push_back((static_cast<std::size_t>(r.slot) * Hq + h) * K + r.m % K);
  check(p, written);
}

// ---- The GPU tests' harness and criterion, as test_simt_step.cpp runs it for the scan.
void expect_calibrated(const cuda::testing::Case& c, const cuda::testing::Outcome& o) {
  EXPECT_LE(o.gpu.rel(), 0.5 * o.store.rel()) << c.name;
  EXPECT_GT(o.hits, 0) << c.name << ": no hit exercised";
  EXPECT_LT(o.hits, o.eligible) << c.name << ": no miss exercised";
  EXPECT_TRUE(reports().empty()) << reports().front().text;
}

TEST(SimtPruned, HarnessGqa4Page1NearestGraph) {
  cuda::testing::Case c = harness_case("pruned_gqa4_p1_nearest_graph", 4, 1, PickRule::nearest);
  c.engine.match_mode = MatchMode::pruned;
  c.engine.graph = true;
  expect_calibrated(c, cuda::testing::run_against_reference(c));
}

TEST(SimtPruned, HarnessGqa8Page7Newest) {
  cuda::testing::Case c = harness_case("pruned_gqa8_p7_newest", 8, 7, PickRule::newest);
  c.engine.match_mode = MatchMode::pruned;
  expect_calibrated(c, cuda::testing::run_against_reference(c));
}

// ---- Production shapes after a synthetic prefill.
SynthCase pruned_case(const std::string& name) {
  SynthCase c;
  c.name = name;
  c.engine.match_mode = MatchMode::pruned;
  return c;
}

void expect_clean(const SynthCase& c, const SynthOutcome& o) {
  EXPECT_TRUE(reports().empty()) << reports().front().text;
  std::printf("[ simt     ] %s: rel err %.2e, %lld/%lld heads hit, %lld mixed groups\n",
              c.name.c_str(), o.max_rel, o.hits, o.eligible, o.mixed_groups);
}

// Global bytes the step's match launches read.
std::uint64_t match_bytes(const SynthOutcome& o, bool* saw_pruned = nullptr) {
  std::uint64_t b = 0;
  for (const LaunchStats& l : o.launches)
    if (l.kernel.find("match") != std::string::npos) {
      b += l.global_read;
      if (saw_pruned && l.kernel.find("pruned") != std::string::npos) *saw_pruned = true;
    }
  return b;
}

// Half the heads repeat one of the newest 40 entries, over three steps: the later steps match
// entries this session wrote (the sketch the step keeps), the first the prefill's. tau 0.7
// puts the threshold (23) under a synthetic entry's |q|^2 (about 43), so a sketch that is not
// the entry's (say, the zero fill) rules the true hit out.
TEST(SimtPruned, Batch4Gqa4Ring512NearestMixedThreeSteps) {
  SynthCase c = pruned_case("pruned_b4_gqa4_k512_nearest");
  c.tau = 0.7;
  c.batch = 4;
  c.group = 4;
  c.ring = 512;
  c.band = 64;
  c.contexts = {600, 900};
  c.natural_hits = 0.5;
  c.steps = 3;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_LT(o.hits, o.eligible);
  bool pruned = false;
  match_bytes(o, &pruned);
  EXPECT_TRUE(pruned) << "the step did not run the pruned match";
}

TEST(SimtPruned, Batch4Gqa8Ring2048NewestMixed) {
  SynthCase c = pruned_case("pruned_b4_gqa8_k2048_newest");
  c.batch = 4;
  c.group = 8;
  c.ring = 2048;
  c.band = 128;
  c.contexts = {2100, 2500, 3001};
  c.natural_hits = 0.35;
  c.page_size = 7;
  c.pick = PickRule::newest;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_GT(o.mixed_groups, 0);
}

// Fresh queries: the bound rules out every candidate from its D/2 + 12 bytes of sketch, so the
// pruned match reads well under half of the scan's 2 D bytes a candidate.
TEST(SimtPruned, Hit0ReadsAFractionOfTheScansBytes) {
  SynthCase c = pruned_case("pruned_b4_gqa4_k512_hit0");
  c.batch = 4;
  c.group = 4;
  c.ring = 512;
  c.contexts = {700, 1001};
  const SynthOutcome pruned = run_synthetic(c);
  expect_clean(c, pruned);
  c.name = "scan_b4_gqa4_k512_hit0";
  c.engine.match_mode = MatchMode::scan;
  c.engine.match = "match_cuda_hd128_p0_bf16";  // the full scan (no probe)
  const SynthOutcome scan = run_synthetic(c);
  expect_clean(c, scan);
  EXPECT_EQ(pruned.hits, 0);
  const std::uint64_t bp = match_bytes(pruned), bs = match_bytes(scan);
  std::printf("[ simt     ] match bytes at hit 0: pruned %llu, scan %llu (%.3f)\n",
              static_cast<unsigned long long>(bp), static_cast<unsigned long long>(bs),
              static_cast<double>(bp) / static_cast<double>(bs));
  EXPECT_GT(bp, 0u);
  EXPECT_LT(static_cast<double>(bp), 0.4 * static_cast<double>(bs));
}

// The scan for two steps, then set_engine(pruned): the sketch is built from the ring as the
// scan left it (prefill and the session's own entries), then kept by the steps.
TEST(SimtPruned, SwitchFromTheScanMidRun) {
  SynthCase c = pruned_case("pruned_switch_b4_gqa4_k512");
  c.engine.match_mode = MatchMode::scan;
  c.batch = 4;
  c.group = 4;
  c.ring = 512;
  c.contexts = {600, 700};
  c.natural_hits = 0.5;
  c.steps = 4;
  c.switch_at = 2;
  c.switch_engine.match_mode = MatchMode::pruned;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  bool pruned = false;
  match_bytes(o, &pruned);
  EXPECT_TRUE(pruned) << "the last step did not run the pruned match";
}

// `normalized` compares unit vectors, which the sketch does not bound: the session scans.
TEST(SimtPruned, NormalizedPickScans) {
  SynthCase c = pruned_case("pruned_b2_gqa4_k512_normalized");
  c.batch = 2;
  c.group = 4;
  c.ring = 512;
  c.contexts = {600};
  c.natural_hits = 0.5;
  c.pick = PickRule::normalized;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  bool pruned = false;
  EXPECT_GT(match_bytes(o, &pruned), 0u);
  EXPECT_FALSE(pruned);
}

TEST(SimtPruned, RingsOverTheSurvivorListAreRefused) {
  SynthCase c = pruned_case("pruned_k8192");
  c.batch = 1;
  c.group = 4;
  c.kv_heads = 1;
  c.ring = 2 * kPrunedMaxCapacity;
  c.contexts = {600};
  try {
    cuda::Session s(synth_options(c));
    ADD_FAILURE() << "a ring of " << c.ring << " entries was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("match_mode = pruned"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("8192"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mactune::simt::testing
