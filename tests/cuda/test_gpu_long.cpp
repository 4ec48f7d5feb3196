// Long work items against the fp64 reference (label gpu; Skipped without a GPU): contexts of
// a few thousand tokens with min_chunk above them, so one item spans every segment (dozens of
// tiles: the K/V ring refills many times, every built stage count runs its steady state, and
// the page table is walked far), on the production hd128 bf16 instances and one instance of
// every other stage count, page sizes 1, 7 and 16, every pick rule; the full baseline the
// same way; and balanced plans whose cuts fall inside long segments. The reference
// fast-forwards (appends only) through the early steps and attends the last ones.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/registry.h"

namespace mactune::cuda::testing {
namespace {

constexpr double kFraction = 0.5;  // as test_gpu_numerics.cpp
constexpr int kContext = 2400, kCompared = 16, kRing = 32;

Problem long_shape(const AttendConfig& a, int group, int page_size) {
  Problem p;
  p.batch = 2;
  p.kv_heads = 2;
  p.q_heads = 2 * group;
  p.head_dim = a.head_dim;
  p.kv_dtype = a.kv_dtype;
  p.page_size = page_size;
  return p;
}

Case long_case(const std::string& name, const AttendConfig& a, int page_size) {
  Case c;
  c.name = name;
  c.shape = long_shape(a, std::min(8, a.group), page_size);
  c.mac.ring_capacity = kRing;
  c.mac.band = 6;
  c.mac.tau = 0.45;
  c.mac.min_context = 10;
  c.mac.summary_dtype = DType::f32;
  c.requests = 2;
  c.fast_forward = kContext;
  c.steps = kContext + kRing + kCompared;
  c.engine.min_chunk = 1 << 20;  // one item a segment: ~kContext / tile_tokens tiles
  return c;
}

void expect_calibrated(const Case& c, const Outcome& o) {
  const double tol = kFraction * o.store.rel();
  ::testing::Test::RecordProperty("gpu_rel_err", std::to_string(o.gpu.rel()));
  EXPECT_GT(o.store.rel(), 0.0) << c.name;
  EXPECT_LE(o.gpu.rel(), tol) << c.name << ": rel err " << o.gpu.rel() << " vs storage error "
                              << o.store.rel() << " (worst head " << o.gpu.worst_head << ")";
  if (c.mac_enabled) {
    EXPECT_GT(o.hits, 0) << c.name << ": no hit exercised";
    EXPECT_LE(o.ring.rel(), tol) << c.name << ": ring summaries";
  }
}

struct LongParam {
  std::string instance;
  int page_size;
  PickRule pick;
};

void PrintTo(const LongParam& p, std::ostream* os) {
  *os << p.instance << " page " << p.page_size << " " << name_of(p.pick);
}

// The production instances (hd128, bf16) and the first instance of every other stage count;
// page sizes and pick rules rotate so every one of each appears.
std::vector<LongParam> long_params() {
  std::vector<LongParam> out;
  std::set<int> stages;
  const int pages[] = {1, 7, 16};
  const PickRule picks[] = {PickRule::nearest, PickRule::newest, PickRule::normalized};
  for (const AttendInstance& a : attend_instances()) {
    const bool production = a.config.head_dim == 128 && a.config.kv_dtype == DType::bf16;
    if (!production && stages.count(a.config.stages)) continue;
    stages.insert(a.config.stages);
    const std::size_t i = out.size();
    out.push_back({a.name, pages[i % 3], picks[(i / 3 + i) % 3]});
  }
  // Fewer instances than rules: the first one again until every page size and rule ran.
  while (!out.empty() && out.size() < 3) {
    const std::size_t i = out.size();
    out.push_back({out.front().instance, pages[i % 3], picks[i % 3]});
  }
  return out;
}

class LongItemsCuda : public ::testing::TestWithParam<LongParam> {};

TEST_P(LongItemsCuda, MatchesReference) {
  MACTUNE_REQUIRE_GPU();
  const LongParam& p = GetParam();
  const AttendInstance& a = *find_instance(attend_instances(), p.instance);
  Case c = long_case(p.instance + "_long", a.config, p.page_size);
  c.mac.pick = p.pick;
  c.engine.attend = a.name;
  expect_calibrated(c, run_against_reference(c));
}

INSTANTIATE_TEST_SUITE_P(Registry, LongItemsCuda, ::testing::ValuesIn(long_params()),
                         [](const auto& param_info) {
                           return param_info.param.instance + "_P" +
                                  std::to_string(param_info.param.page_size) + "_" +
                                  std::string(name_of(param_info.param.pick));
                         });

// The full baseline over long single items (hd128 bf16 instances, every page size).
TEST(LongItemsCuda, FullBaselineMatchesReference) {
  MACTUNE_REQUIRE_GPU();
  int ran = 0;
  for (const FullInstance& f : full_instances()) {
    if (f.config.head_dim != 128 || f.config.kv_dtype != DType::bf16) continue;
    for (int page : {1, 7, 16}) {
      Case c = long_case(f.name + "_long_P" + std::to_string(page), as_attend(f.config), page);
      c.mac_enabled = false;
      c.engine.full = f.name;
      expect_calibrated(c, run_against_reference(c));
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "no hd128 bf16 full instance in this build";
}

// Balanced plans cut long segments at multiples of min_chunk, and a small CTA budget gives each
// part several items: partial states of a group spread over several CTAs and entries.
TEST(LongItemsCuda, BalancedCutsInsideLongSegmentsMatchReference) {
  MACTUNE_REQUIRE_GPU();
  const AttendInstance& a = attend_instances().front();
  Case c = long_case("balanced_cuts", a.config, 16);
  c.engine.attend = a.name;
  c.engine.min_chunk = 192;
  c.engine.ctas_per_sm = 1;
  expect_calibrated(c, run_against_reference(c));
}

}  // namespace
}  // namespace mactune::cuda::testing
