// cpu::Session against the fp64 reference over ISA x dtype x head_dim x G x page size: MAC
// (hits, misses, mixed groups, ring entries) and the full-attention baseline, each on a batch
// of three requests of different lengths, with outputs poisoned before every step. Every ISA
// path this host runs is checked, not only the widest that `auto` picks; a path it cannot run
// is skipped with the reason (the CPU lacks it, or MACTUNE_CPU_ISA caps it).
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>
#include <tuple>

#include "kernels/cpu/isa.h"
#include "tests/cpu/harness.h"

namespace mactune::cpu::test {
namespace {

struct Case {
  Isa isa;
  DType dtype;
  int head_dim, group, page;
};

std::string capitalized(std::string_view s) {
  std::string out(s);
  out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string case_name(const Case& c) {
  const std::string d = capitalized(dtype_name(c.dtype));
  return capitalized(isa_name(c.isa)) + "_Hd" + std::to_string(c.head_dim) + "_G" +
         std::to_string(c.group) + "_P" + std::to_string(c.page) + "_" + d;
}

SessionOptions options_for(const Case& c, bool mac) {
  SessionOptions o;
  o.shape.batch = 3;
  o.shape.kv_heads = 2;
  o.shape.q_heads = 2 * c.group;
  o.shape.head_dim = c.head_dim;
  o.shape.kv_dtype = c.dtype;
  o.shape.page_size = c.page;
  o.mac.ring_capacity = 24;
  o.mac.band = 8;
  o.mac.min_context = 20;
  o.mac_enabled = mac;
  o.engine.chunk_tokens = 8;                   // several items per group: merges in order
  o.engine.block_rows = c.page == 1 ? 5 : 16;  // blocks that straddle pages and items
  o.engine.threads = 2;
  o.max_context = 256;
  o.engine.isa = isa_name(c.isa);
  return o;
}

using Param = std::tuple<Isa, DType, int, int, int>;  // ISA, dtype, head_dim, G, page size
Case to_case(const Param& t) {
  return Case{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t)};
}

class OnEveryIsa : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const Isa isa = std::get<0>(GetParam());
    if (!isa_supported(isa)) GTEST_SKIP() << isa_unsupported_reason(isa);
  }
};
class MacCpu : public OnEveryIsa {};
class FullCpu : public OnEveryIsa {};

// Every tensor is checked against the reference at the same storage dtype, which models the
// KV, ring-q and summary rounding exactly: what remains is fp32 arithmetic, hence 1e-5 for
// every dtype (test_features.cpp calibrates this against what the dtype itself costs).
TEST_P(MacCpu, MatchesReference) {
  const Case c = to_case(GetParam());
  RunPlan plan;
  plan.steps = 72;
  plan.seed = 7 + c.head_dim + c.group;
  const RunSummary s = run_against_reference(options_for(c, true), plan);
  EXPECT_EQ(Session(options_for(c, true)).isa(), isa_name(c.isa));
  EXPECT_GT(s.hits, s.head_steps / 10) << "too few hits to test reuse";
  EXPECT_GT(s.misses_eligible, s.head_steps / 10) << "too few eligible misses";
  if (c.group > 1) {
    EXPECT_GT(s.mixed_groups, 0);
  }
}

TEST_P(FullCpu, EqualsFullAttention) {
  const Case c = to_case(GetParam());
  RunPlan plan;
  plan.steps = 48;
  plan.seed = 3 + c.page;
  const RunSummary s = run_against_reference(options_for(c, false), plan);
  EXPECT_EQ(s.hits, 0);
}

const auto kCases = ::testing::Combine(
    ::testing::ValuesIn(kAllIsas), ::testing::Values(DType::f32, DType::f16, DType::bf16),
    ::testing::Values(64, 128, 256), ::testing::Values(1, 3, 4, 16), ::testing::Values(1, 16, 64));

INSTANTIATE_TEST_SUITE_P(Grid, MacCpu, kCases,
                         [](const auto& i) { return case_name(to_case(i.param)); });
INSTANTIATE_TEST_SUITE_P(Grid, FullCpu, kCases,
                         [](const auto& i) { return case_name(to_case(i.param)); });

}  // namespace
}  // namespace mactune::cpu::test
