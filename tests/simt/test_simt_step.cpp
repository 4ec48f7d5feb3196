// The whole CUDA step (prepare -> match -> plan -> attend -> merge) of cuda::Session, run on the
// host by the simt interpreter: the session's own host code over the interpreter's CUDA runtime
// API, the production instances, the real launchers and device planner.
//   Harness*  the GPU tests' harness (tests/cuda/gpu_harness.h) and criterion, step by step
//             against the fp64 reference: small contexts, rings of 32, every pick rule, pages
//             1/7/16, probe and full scan, graphs, the full baseline
//   Synth*    after a synthetic prefill, against SyntheticOracle: batch 64, rings of 512 and
//             2048 (multi-pass match, multi-tile reductions), contexts >= 16K, hit 0 / mixed / 1,
//             forced hits and skip ratios, a uniform plan with more items than CTAs (tickets),
//             group_hits at hit 0 / mixed / 1
// Harness*GroupHits*: group_hits' demotion against the reference's, demoted groups counted.
// SimtBig* (label simt-big): long contexts that miss (every token of 16K-20K read).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/registry.h"
#include "simt_step_runner.h"

namespace mactune::simt::testing {
namespace {

using cuda::testing::Case;
using cuda::testing::Outcome;
using cuda::testing::run_against_reference;

// ---- The GPU tests' harness and criterion (test_gpu_numerics.cpp: rel err <= 0.5 e_store).
void expect_calibrated(const Case& c, const Outcome& o) {
  const double tol = 0.5 * o.store.rel();
  EXPECT_GT(o.store.rel(), 0.0) << c.name;
  EXPECT_LE(o.gpu.rel(), tol) << c.name << ": rel err " << o.gpu.rel() << " vs storage error "
                              << o.store.rel() << " (worst head " << o.gpu.worst_head << ")";
  if (c.mac_enabled) {
    EXPECT_GT(o.hits, 0) << c.name << ": no hit exercised";
    EXPECT_LE(o.ring.rel(), c.mac.summary_dtype == DType::bf16 ? std::max(tol, 4e-3) : tol)
        << c.name << ": ring summaries";
  }
  EXPECT_TRUE(reports().empty()) << reports().front().text;
}

TEST(SimtStep, HarnessGqa4Page1Nearest) {
  const Case c = harness_case("gqa4_p1_nearest", 4, 1, PickRule::nearest);
  expect_calibrated(c, run_against_reference(c));
}

TEST(SimtStep, HarnessGqa8Page7NewestProbe) {
  Case c = harness_case("gqa8_p7_newest_probe", 8, 7, PickRule::newest);
  c.engine.match = "match_cuda_hd128_p1_bf16";
  expect_calibrated(c, run_against_reference(c));
}

TEST(SimtStep, HarnessGqa8Page16NormalizedBf16SummaryGraph) {
  Case c = harness_case("gqa8_p16_normalized_graph", 8, 16, PickRule::normalized);
  c.mac.summary_dtype = DType::bf16;
  c.engine.graph = true;
  expect_calibrated(c, run_against_reference(c));
}

TEST(SimtStep, HarnessGqa4SubtractRectify) {
  Case c = harness_case("gqa4_subtract", 4, 16, PickRule::nearest);
  c.mac.rectify = Rectify::subtract;
  expect_calibrated(c, run_against_reference(c));
}

TEST(SimtStep, HarnessFullBaselineSmallChunks) {
  Case c = harness_case("full_gqa8_chunks", 8, 7, PickRule::nearest);
  c.mac_enabled = false;
  c.engine.min_chunk = 16;  // several items a group: partials merged from several CTAs
  c.steps = 40;
  expect_calibrated(c, run_against_reference(c));
}

// group_hits (DESIGN.md section 8): the demotion in the device planner against the reference's.
// GQA 4 with real matches (Inputs repeats a query with probability 0.55: most groups mixed);
// GQA 8 with forced per-head hits at 0.85 (0.85^8: a quarter of the groups keep theirs).
void expect_demoted(const Case& c, const Outcome& o) {
  expect_calibrated(c, o);
  std::printf("[ simt     ] %s: %lld/%lld heads hit, %lld groups demoted\n", c.name.c_str(), o.hits,
              o.eligible, o.demoted_groups);
  EXPECT_GT(o.demoted_groups, 0) << c.name << ": no group was partial";
  EXPECT_EQ(o.mixed_groups, 0) << c.name;
}

TEST(SimtStep, HarnessGqa4GroupHitsNearest) {
  Case c = harness_case("gqa4_group_hits_nearest", 4, 16, PickRule::nearest);
  c.mac.group_hits = true;
  expect_demoted(c, run_against_reference(c));
}

TEST(SimtStep, HarnessGqa8GroupHitsForcedNewest) {
  Case c = harness_case("gqa8_group_hits_forced_newest", 8, 7, PickRule::newest);
  c.mac.group_hits = true;
  c.forced.enabled = true;
  c.forced.hit_rate = 0.85;
  c.forced.lag = {LagKind::uniform, 1, 20};
  expect_demoted(c, run_against_reference(c));
}

// The CUDA step has no acceptance gate yet (the session refuses accept_eps < 1), so group_hits'
// second demotion, after the gate, is refused with it.
TEST(SimtStep, GroupHitsWithTheGateIsRefused) {
  SynthCase c;
  c.contexts = {300};
  c.group_hits = true;
  cuda::SessionOptions o = synth_options(c);
  EXPECT_NO_THROW(cuda::Session{o});
  o.mac.accept_eps = 0.5;
  EXPECT_THROW(cuda::Session{o}, InputError);
}

// ---- Production shapes after a synthetic prefill.
SynthCase synth(const std::string& name) {
  SynthCase c;
  c.name = name;
  return c;
}

void expect_clean(const SynthCase& c, const SynthOutcome& o) {
  EXPECT_TRUE(reports().empty()) << reports().front().text;
  ::testing::Test::RecordProperty("max_rel_err", std::to_string(o.max_rel));
  std::printf(
      "[ simt     ] %s: rel err %.2e, %lld/%lld heads hit, %lld mixed groups, plan %s %d "
      "items %d entries on %d CTAs\n",
      c.name.c_str(), o.max_rel, o.hits, o.eligible, o.mixed_groups,
      o.plan.kind == PlanKind::uniform ? "uniform" : "balanced", o.plan.items, o.plan.entries,
      o.grid);
}

// Batch 64, GQA 4, every head hits (forced, lag <= 32, band 128): 1024 items, a uniform plan of
// 1024 entries on 396 CTAs whose entries past the grid are claimed by ticket; every built attend
// instance. Two steps: the plan kernel must have zeroed the ticket counter in between.
TEST(SimtStep, SynthBatch64Gqa4Hit1TicketPath) {
  for (const cuda::AttendInstance& a : cuda::attend_instances()) {
    if (a.config.head_dim != 128 || a.config.kv_dtype != DType::bf16 || a.config.group < 4)
      continue;
    SynthCase c = synth("b64_gqa4_hit1_" + a.name);
    c.batch = 64;
    c.group = 4;
    c.ring = 64;
    c.band = 128;
    c.contexts = {300, 333, 410};
    c.forced.enabled = true;
    c.forced.hit_rate = 1.0;
    c.forced.lag = {LagKind::uniform, 1, 32};
    c.engine.attend = a.name;
    c.steps = 2;
    const SynthOutcome o = run_synthetic(c);
    expect_clean(c, o);
    EXPECT_EQ(o.hits, o.heads);
    EXPECT_EQ(o.plan.kind, PlanKind::uniform);
    EXPECT_GT(o.plan.entries, o.grid) << "the ticket path did not run";
  }
}

// Batch 4, GQA 8, ring 2048 (8 tiles a head of 16 passes each: multi-pass match, multi-tile
// reduction), a third of the heads repeat a ring entry: mixed groups, real matching, the probe.
TEST(SimtStep, SynthBatch4Gqa8Ring2048MixedProbe) {
  SynthCase c = synth("b4_gqa8_k2048_mixed_probe");
  c.batch = 4;
  c.group = 8;
  c.ring = 2048;
  c.band = 128;
  c.contexts = {2100, 2500, 3001};
  c.natural_hits = 0.35;
  c.page_size = 7;
  c.engine.match = "match_cuda_hd128_p1_bf16";
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_GT(o.mixed_groups, 0);
}

TEST(SimtStep, SynthBatch4Gqa4Ring512NewestFullScan) {
  SynthCase c = synth("b4_gqa4_k512_newest");
  c.batch = 4;
  c.group = 4;
  c.ring = 512;
  c.band = 64;
  c.contexts = {600, 900};
  c.pick = PickRule::newest;
  c.natural_hits = 0.5;
  c.engine.match = "match_cuda_hd128_p0_bf16";
  c.engine.match_candidates = 512;  // 4 tiles a head, 32 passes a CTA (16 heads alone get 1)
  c.steps = 2;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
}

// Batch 64, GQA 8, small contexts, fresh queries (hit 0), page size 1, normalized distances.
TEST(SimtStep, SynthBatch64Gqa8Hit0Page1Normalized) {
  SynthCase c = synth("b64_gqa8_hit0_p1_normalized");
  c.batch = 64;
  c.group = 8;
  c.ring = 32;
  c.contexts = {100, 130, 171};
  c.min_context = 64;
  c.page_size = 1;
  c.pick = PickRule::normalized;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.hits, 0);
  EXPECT_EQ(o.eligible, o.heads);
}

// A balanced plan whose dispatch entries hold several items, run back to back by one CTA (its
// shared memory reused from one item's epilogue to the next item's K/V ring): batch 4 x 8 KV
// heads at 400 and 1500 tokens, min_chunk 64, one CTA an SM (132 workers, 160 items). The
// planner's choice is asserted, so a change of policy that stops making such entries fails here.
TEST(SimtStep, SynthBalancedSeveralItemsAnEntry) {
  SynthCase c = synth("b4_gqa4_balanced_multi_item");
  c.batch = 4;
  c.group = 4;
  c.contexts = {400, 1500};
  c.engine.min_chunk = 64;
  c.engine.ctas_per_sm = 1;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.plan.kind, PlanKind::balanced);
  EXPECT_GT(o.plan.items, o.plan.entries) << "no dispatch entry holds several items";
}

// The ticket path at a small size (the mutation check's case for it): batch 16 x 8 KV heads at
// hit 1 on one CTA an SM, min_chunk 64: a uniform plan with more entries than the 132 CTAs; two
// steps, so the plan kernel must have zeroed the ticket counter in between.
TEST(SimtStep, SynthSmallTicketPathTwoSteps) {
  SynthCase c = synth("b16_gqa4_hit1_ticket");
  c.batch = 16;
  c.group = 4;
  c.ring = 64;
  c.band = 128;
  c.contexts = {300, 333};
  c.forced.enabled = true;
  c.forced.hit_rate = 1.0;
  c.forced.lag = {LagKind::uniform, 1, 32};
  c.engine.ctas_per_sm = 1;
  c.engine.min_chunk = 64;
  c.steps = 2;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.plan.kind, PlanKind::uniform);
  EXPECT_GT(o.plan.entries, o.grid) << "the ticket path did not run";
}

// Multi-pass match and multi-tile reductions at a small size (the mutation check's case): two
// requests of two KV heads, ring 2048 (4 tiles a head, 32 passes a CTA), repeated
// queries (hits and misses), two steps (the per-head tile counters reset in between).
TEST(SimtStep, SynthSmallRing2048TwoSteps) {
  SynthCase c = synth("b2_gqa4_k2048_two_steps");
  c.batch = 2;
  c.kv_heads = 2;
  c.group = 4;
  c.ring = 2048;
  c.band = 128;
  c.contexts = {2100, 2600};
  c.natural_hits = 0.5;
  c.engine.match = "match_cuda_hd128_p0_bf16";
  c.engine.match_candidates = 512;  // 4 tiles a head, 32 passes a CTA (16 heads alone get 1)
  c.steps = 2;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_LT(o.hits, o.heads);
}

// A context of 16K that hits (a few hundred tokens read a group); batch 2 at 16K-20K and the
// forced skip ratio at 16K-18K are simt-big.
TEST(SimtStep, SynthLongContextHit1) {
  SynthCase c = synth("b1_gqa8_16k_hit1");
  c.batch = 1;
  c.group = 8;
  c.contexts = {16384};
  c.forced.enabled = true;
  c.forced.hit_rate = 1.0;
  c.forced.lag = {LagKind::uniform, 1, 200};
  c.page_size = 7;
  c.steps = 2;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.hits, o.heads);
}

TEST(SimtStep, SynthForcedSkipRatio) {
  SynthCase c = synth("b8_gqa4_skip90");
  c.batch = 8;
  c.group = 4;
  c.contexts = {1200, 1500, 1999};
  c.forced.enabled = true;
  c.forced.quota = ForcedQuota::skip_ratio;
  // Reachable at every request: a hit at p skips p - r of m tokens, p < m, and the ring holds
  // the last K = 512 positions (0.97 is not: (1999 - 64) / 1999 < 0.97, so no head would hit).
  c.forced.skip_ratio = 0.9;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.stats.skip_ratio(), 0.85);
}

// group_hits at production shapes against SyntheticOracle (which demotes by its own code):
// hit 0 (nothing to demote), mixed (some groups partial: demoted, counted), hit 1 (every group
// keeps its hits), at GQA 4 and 8, both pick rules.
SynthCase group_hits_case(const std::string& name, int group, PickRule pick, double hits) {
  SynthCase c = synth(name);
  c.batch = 4;
  c.group = group;
  c.kv_heads = 4;
  c.ring = 256;
  c.band = 64;
  c.contexts = {400, 700};
  c.pick = pick;
  c.natural_hits = hits;
  c.group_hits = true;
  c.steps = 2;
  return c;
}

void expect_group_hits(const SynthCase& c, const SynthOutcome& o) {
  expect_clean(c, o);
  std::printf("[ simt     ] %s: %lld groups demoted\n", c.name.c_str(), o.demoted_groups);
  EXPECT_EQ(o.mixed_groups, 0) << c.name;
}

TEST(SimtStep, SynthGroupHitsGqa4Hit0Nearest) {
  const SynthCase c = group_hits_case("b4_gqa4_group_hits_hit0", 4, PickRule::nearest, 0.0);
  const SynthOutcome o = run_synthetic(c);
  expect_group_hits(c, o);
  EXPECT_EQ(o.hits, 0);
  EXPECT_EQ(o.demoted_groups, 0);
}

TEST(SimtStep, SynthGroupHitsGqa4MixedNearest) {
  const SynthCase c = group_hits_case("b4_gqa4_group_hits_mixed", 4, PickRule::nearest, 0.7);
  const SynthOutcome o = run_synthetic(c);
  expect_group_hits(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_GT(o.demoted_groups, 0);
}

TEST(SimtStep, SynthGroupHitsGqa8MixedNewestProbe) {
  SynthCase c = group_hits_case("b4_gqa8_group_hits_mixed_probe", 8, PickRule::newest, 0.9);
  c.engine.match = "match_cuda_hd128_p1_bf16";
  c.page_size = 7;
  const SynthOutcome o = run_synthetic(c);
  expect_group_hits(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_GT(o.demoted_groups, 0);
}

TEST(SimtStep, SynthGroupHitsGqa8Hit1Newest) {
  const SynthCase c = group_hits_case("b4_gqa8_group_hits_hit1", 8, PickRule::newest, 1.0);
  const SynthOutcome o = run_synthetic(c);
  expect_group_hits(c, o);
  EXPECT_EQ(o.hits, o.heads);
  EXPECT_EQ(o.demoted_groups, 0);
}

TEST(SimtBigStep, LongContextsHit1Batch2) {
  SynthCase c = synth("b2_gqa8_16k_20k_hit1");
  c.batch = 2;
  c.group = 8;
  c.contexts = {16384, 20000};
  c.forced.enabled = true;
  c.forced.hit_rate = 1.0;
  c.forced.lag = {LagKind::uniform, 1, 200};
  c.page_size = 7;
  c.steps = 2;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.hits, o.heads);
}

TEST(SimtBigStep, LongContextsForcedSkipRatio) {
  SynthCase c = synth("b3_gqa4_16k_skip95");
  c.batch = 3;
  c.group = 4;
  c.contexts = {16500, 17000, 18000};
  c.forced.enabled = true;
  c.forced.quota = ForcedQuota::skip_ratio;
  // Reachable at every request (kernels/forced.h, forced_skip_solve): a hit group skips between
  // kv_len - r - K and kv_len - r - 1 tokens (the ring holds the last K = 512 positions), so n
  // of the 8 groups skip a share in [n (kv_len - 576), n (kv_len - 65)] / (8 kv_len). At
  // 16.5K-18K, 0.9 falls between the ranges of 7 and 8 groups (no head hit); 0.97 is in 8's.
  c.forced.skip_ratio = 0.97;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_GT(o.hits, 0);
  EXPECT_GT(o.stats.skip_ratio(), 0.95);
}

// ---- simt-big: long contexts read in full.
TEST(SimtBigStep, LongContextsMissGqa4) {
  SynthCase c = synth("b4_gqa4_16k_hit0");
  c.batch = 4;
  c.group = 4;
  c.contexts = {16384, 17000, 18500, 20000};
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
  EXPECT_EQ(o.hits, 0);
}

TEST(SimtBigStep, LongContextsFullBaselineGqa8) {
  SynthCase c = synth("b2_gqa8_16k_full");
  c.batch = 2;
  c.group = 8;
  c.contexts = {16384, 18000};
  c.mac_enabled = false;
  const SynthOutcome o = run_synthetic(c);
  expect_clean(c, o);
}

}  // namespace
}  // namespace mactune::simt::testing
