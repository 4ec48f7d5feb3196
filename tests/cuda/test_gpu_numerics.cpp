// Every built CUDA instance against the fp64 reference (label gpu; Skipped without a GPU).
//
// Tolerance: the reference run at the KV dtype is the oracle; the same reference at f32 gives
// the error the dtype's storage itself costs (e_store). The kernels split q and the softmax
// weights into two 16-bit halves on the tensor cores and accumulate in fp32, so they must add
// well under that: ||gpu - ref|| / ||ref|| <= kFraction x e_store over the run (and every
// output written, every decision equal to the reference's).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/registry.h"

namespace mactune::cuda::testing {
namespace {

constexpr double kFraction = 0.5;

Problem shape_for(int head_dim, DType kv, int group, int page_size) {
  Problem p;
  p.batch = 3;
  p.kv_heads = 2;
  p.q_heads = 2 * group;
  p.head_dim = head_dim;
  p.kv_dtype = kv;
  p.page_size = page_size;
  return p;
}

MacParams small_ring(DType summary) {
  MacParams m;
  m.ring_capacity = 32;  // the window Inputs draws repeats from (24 steps) fits
  m.band = 6;
  m.tau = 0.45;
  m.min_context = 10;
  m.summary_dtype = summary;
  return m;
}

void expect_calibrated(const Case& c, const Outcome& o) {
  const double tol = kFraction * o.store.rel();
  ::testing::Test::RecordProperty("gpu_rel_err", std::to_string(o.gpu.rel()));
  ::testing::Test::RecordProperty("bf16_store_rel_err", std::to_string(o.store.rel()));
  EXPECT_GT(o.store.rel(), 0.0) << c.name << ": the calibration run saw no dtype error";
  EXPECT_LE(o.gpu.rel(), tol) << c.name << ": rel err " << o.gpu.rel() << " vs storage error "
                              << o.store.rel() << " (worst head " << o.gpu.worst_head << ")";
  if (c.mac_enabled) {
    EXPECT_GT(o.hits, 0) << c.name << ": no hit exercised";
    const double ring_tol = c.mac.summary_dtype == DType::bf16 ? std::max(tol, 4e-3) : tol;
    EXPECT_LE(o.ring.rel(), ring_tol) << c.name << ": ring summaries";
  }
}

// ---- attend (with the first match and merge instances that run the shape).

struct AttendParam {
  std::string instance;
  int group, page_size;
  DType summary;
};

void PrintTo(const AttendParam& p, std::ostream* os) {
  *os << p.instance << " G " << p.group << " page " << p.page_size << " summary "
      << dtype_name(p.summary);
}

std::vector<AttendParam> attend_params() {
  std::vector<AttendParam> out;
  for (const AttendInstance& a : attend_instances()) {
    std::vector<int> groups{1, a.config.group};
    if (a.config.group >= 4) groups.insert(groups.begin() + 1, a.config.group / 2 + 1);
    int i = 0;
    for (int g : groups)
      out.push_back({a.name, g, i % 2 ? 7 : 16, i++ % 2 ? DType::bf16 : DType::f32});
  }
  return out;
}

class AttendCuda : public ::testing::TestWithParam<AttendParam> {};

TEST_P(AttendCuda, MatchesReference) {
  MACTUNE_REQUIRE_GPU();
  const AttendParam& p = GetParam();
  const AttendInstance& a = *find_instance(attend_instances(), p.instance);
  Case c;
  c.name = p.instance + "_G" + std::to_string(p.group);
  c.shape = shape_for(a.config.head_dim, a.config.kv_dtype, p.group, p.page_size);
  c.mac = small_ring(p.summary);
  c.engine.attend = a.name;
  expect_calibrated(c, run_against_reference(c));
}

INSTANTIATE_TEST_SUITE_P(Registry, AttendCuda, ::testing::ValuesIn(attend_params()),
                         [](const auto& param_info) {
                           return param_info.param.instance + "_G" +
                                  std::to_string(param_info.param.group) + "_P" +
                                  std::to_string(param_info.param.page_size) + "_S" +
                                  std::string(dtype_name(param_info.param.summary));
                         });

// ---- full (the baseline: plain attention, no ring).

class FullCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(FullCuda, MatchesReference) {
  MACTUNE_REQUIRE_GPU();
  const FullInstance& f = *find_instance(full_instances(), GetParam());
  for (int g : {1, f.config.group}) {
    Case c;
    c.name = f.name + "_G" + std::to_string(g);
    c.shape = shape_for(f.config.head_dim, f.config.kv_dtype, g, 16);
    c.mac = small_ring(DType::f32);
    c.mac_enabled = false;
    c.engine.full = f.name;
    expect_calibrated(c, run_against_reference(c));
  }
}

std::vector<std::string> full_names() {
  std::vector<std::string> n;
  for (const auto& f : full_instances()) n.push_back(f.name);
  return n;
}
INSTANTIATE_TEST_SUITE_P(Registry, FullCuda, ::testing::ValuesIn(full_names()),
                         [](const auto& param_info) { return param_info.param; });

// ---- match (every pick rule; with the first attend instance that runs the shape).

struct MatchParam {
  std::string instance;
  PickRule pick;
};

void PrintTo(const MatchParam& p, std::ostream* os) {
  *os << p.instance << " " << name_of(p.pick);
}

std::vector<MatchParam> match_params() {
  std::vector<MatchParam> out;
  for (const MatchInstance& m : match_instances())
    for (PickRule r : {PickRule::nearest, PickRule::newest, PickRule::normalized})
      out.push_back({m.name, r});
  return out;
}

class MatchCuda : public ::testing::TestWithParam<MatchParam> {};

TEST_P(MatchCuda, DecisionsEqualReference) {
  MACTUNE_REQUIRE_GPU();
  const MatchInstance& m = *find_instance(match_instances(), GetParam().instance);
  Case c;
  c.name = m.name + "_" + std::string(name_of(GetParam().pick));
  c.shape = shape_for(m.config.head_dim, m.config.kv_dtype, 4, 16);
  c.mac = small_ring(DType::f32);
  c.mac.pick = GetParam().pick;
  c.engine.match = m.name;
  bool runnable = false;
  for (const AttendInstance& a : attend_instances()) runnable |= a.can_implement(c.shape).empty();
  if (!runnable) GTEST_SKIP() << "no built attend instance runs " << c.name << "'s shape";
  expect_calibrated(c, run_against_reference(c));
}

INSTANTIATE_TEST_SUITE_P(Registry, MatchCuda, ::testing::ValuesIn(match_params()),
                         [](const auto& param_info) {
                           return param_info.param.instance + "_" +
                                  std::string(name_of(param_info.param.pick));
                         });

// ---- options of the step, on the first attend instance.

Case default_case(const std::string& name) {
  const AttendInstance& a = attend_instances().front();
  Case c;
  c.name = name;
  c.shape = shape_for(a.config.head_dim, a.config.kv_dtype, std::min(4, a.config.group), 16);
  c.mac = small_ring(DType::f32);
  c.engine.attend = a.name;
  return c;
}

TEST(StepCuda, SubtractRectifyMatchesReference) {
  MACTUNE_REQUIRE_GPU();
  Case c = default_case("subtract");
  c.mac.rectify = Rectify::subtract;
  expect_calibrated(c, run_against_reference(c));
}

// Many small work items a group (min_chunk 8, below the 64-token tile), partial tiles,
// page size 1: the split-KV merge across items and the page table at its finest.
TEST(StepCuda, ManySmallItemsMatchReference) {
  MACTUNE_REQUIRE_GPU();
  Case c = default_case("small_items");
  c.shape.page_size = 1;
  c.engine.min_chunk = 8;
  c.engine.ctas_per_sm = 64;  // a large budget: as many items as the chunk allows
  expect_calibrated(c, run_against_reference(c));
}

// One item a group (the chunk covers every segment): the no-split path.
TEST(StepCuda, OneItemPerSegmentMatchesReference) {
  MACTUNE_REQUIRE_GPU();
  Case c = default_case("one_item");
  c.engine.min_chunk = 1 << 20;
  expect_calibrated(c, run_against_reference(c));
}

TEST(StepCuda, ForcedHitsEqualReferenceDecisions) {
  MACTUNE_REQUIRE_GPU();
  for (Coherence coh : {Coherence::per_head, Coherence::per_group}) {
    Case c = default_case(std::string("forced_") + std::string(name_of(coh)));
    c.forced.enabled = true;
    c.forced.hit_rate = 0.6;
    c.forced.coherence = coh;
    c.forced.lag = {LagKind::uniform, 1, 20};
    expect_calibrated(c, run_against_reference(c));
  }
}

// group_hits: the plan kernel demotes every partial group (real matches at GQA 4; forced
// per-head hits at the instance's widest group, so some groups keep all their hits).
TEST(StepCuda, GroupHitsDemotePartialGroupsAsTheReference) {
  MACTUNE_REQUIRE_GPU();
  Case matched = default_case("group_hits");
  matched.mac.group_hits = true;
  Case forced = default_case("group_hits_forced");
  forced.shape = shape_for(forced.shape.head_dim, forced.shape.kv_dtype,
                           attend_instances().front().config.group, 7);
  forced.mac.group_hits = true;
  forced.mac.pick = PickRule::newest;
  forced.forced.enabled = true;
  forced.forced.hit_rate = 0.85;
  forced.forced.lag = {LagKind::uniform, 1, 20};
  for (const Case& c : {matched, forced}) {
    const Outcome o = run_against_reference(c);
    expect_calibrated(c, o);
    EXPECT_GT(o.demoted_groups, 0) << c.name << ": no group was partial";
    EXPECT_EQ(o.mixed_groups, 0) << c.name;
  }
}

TEST(StepCuda, MinContextAboveTheRunMeansFullAttention) {
  MACTUNE_REQUIRE_GPU();
  Case c = default_case("never_eligible");
  c.mac.min_context = 1 << 20;
  const Outcome o = run_against_reference(c);
  EXPECT_EQ(o.eligible, 0);
  EXPECT_LE(o.gpu.rel(), kFraction * o.store.rel());
}

}  // namespace
}  // namespace mactune::cuda::testing
