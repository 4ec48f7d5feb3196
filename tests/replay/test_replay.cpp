// Replay of the shipped decode traces: exact attention against the model's o_ref, tau >= 1,
// expected_replay.jsonl (an independent float64 implementation of DESIGN.md section 1),
// determinism, min_context and pooling.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "replay_fixtures.h"

namespace mactune::replay {
namespace {

using testing::loaded_trace;
using testing::name_number;

const char* const kTraces[] = {"code_1k.safetensors", "text_1k.safetensors",
                               "code_1k_theta5e5.safetensors", "text_1k_theta5e5.safetensors"};

// ---- Full attention recomputed from a trace reproduces o_ref.

class ExactAttentionVsORef : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactAttentionVsORef, Fp64WithinRoundoff) {
  const auto& t = loaded_trace(GetParam());
  ASSERT_TRUE(t.layer.has_o_ref());
  // o_ref is fp64 attention rounded once to f32; our KV is the f32-rounded post-RoPE key.
  EXPECT_LT(t.exact.max_rel_err_vs_ref, 1e-5);
  EXPECT_GT(t.exact.max_rel_err_vs_ref, 0.0);  // it is a recomputation, not a copy
}

TEST_P(ExactAttentionVsORef, WrongRopeBaseIsVisible) {
  // The same stream with the other model's RoPE base: o_full no longer matches o_ref. This is
  // the diagnostic `replay` prints (full_vs_ref_max), so it must be able to fail.
  const auto& t = loaded_trace(GetParam());
  const double wrong = t.trace.rope_theta() == 10000.0 ? 500000.0 : 10000.0;
  TraceLayer head = t.layer;  // 128 steps keep it fast
  head.steps = 128;
  head.q_pre.resize(std::size_t(128) * head.q_heads * head.head_dim);
  head.k_pre.resize(std::size_t(128) * head.kv_heads * head.head_dim);
  head.v.resize(head.k_pre.size());
  head.o_ref.resize(head.q_pre.size());
  EXPECT_GT(exact_attention(head, wrong, DType::f32).max_rel_err_vs_ref, 1e-3);
  EXPECT_LT(exact_attention(head, t.trace.rope_theta(), DType::f32).max_rel_err_vs_ref, 1e-5);
}

std::string trace_case_name(const ::testing::TestParamInfo<const char*>& p) {
  const std::string s = p.param;
  return s.substr(0, s.find('.'));
}
TEST_P(ExactAttentionVsORef, CpuEngineFullAttentionFp32) {
  // The CPU engine's full-attention baseline (f32 KV, f32 accumulation) against the model's
  // o_ref and against the fp64 exact attention: the 1e-5 in fp32.
  const auto& t = loaded_trace(GetParam());
  ReplaySettings st;
  st.engine = ReplayEngine::cpu;
  st.baseline = true;
  const Fidelity f = summarize(replay_layer(t.layer, t.trace.rope_theta(), t.exact, st));
  EXPECT_EQ(f.rel_err.count, 1024 * 8);
  EXPECT_EQ(f.hit_rate, 0.0);
  EXPECT_EQ(f.skip_ratio, 0.0);
  ASSERT_TRUE(f.rel_err_vs_ref);
  EXPECT_LE(f.rel_err_vs_ref->max, 1e-5);
  EXPECT_LE(f.rel_err.max, 1e-5);
  EXPECT_GT(f.rel_err.max, 0.0);  // f32 arithmetic really ran
  EXPECT_EQ(f.instance.rfind("full_cpu_", 0), 0u) << f.instance;
}

INSTANTIATE_TEST_SUITE_P(Traces, ExactAttentionVsORef, ::testing::ValuesIn(kTraces),
                         trace_case_name);

// ---- tau >= 1: no hit, no skip, the output is full attention.

struct EngineCase {
  ReplayEngine engine;
  double tau;
  double max_err;  // roundoff of the engine's arithmetic
};
void PrintTo(const EngineCase& c, std::ostream* os) {
  *os << name_of(c.engine) << " tau " << c.tau;
}

class TauDisablesHits : public ::testing::TestWithParam<EngineCase> {};

TEST_P(TauDisablesHits, Code1k) {
  const auto& t = loaded_trace("code_1k.safetensors");
  ReplaySettings st;
  st.engine = GetParam().engine;
  st.mac.tau = GetParam().tau;
  st.mac.band = 64;  // the setting with the most hits otherwise
  const Fidelity f = summarize(replay_layer(t.layer, t.trace.rope_theta(), t.exact, st));
  EXPECT_EQ(f.steps, 1024);
  EXPECT_EQ(f.rel_err.count, 1024 * 8);
  EXPECT_EQ(f.hit_rate, 0.0);
  EXPECT_EQ(f.group_all_hit_rate, 0.0);
  EXPECT_EQ(f.skip_ratio, 0.0);
  EXPECT_EQ(f.head_skip_ratio, 0.0);
  EXPECT_LE(f.rel_err.max, GetParam().max_err);
  ASSERT_TRUE(f.rel_err_vs_ref);
  EXPECT_LE(f.rel_err_vs_ref->max, 1e-5);  // f32 full attention reproduces o_ref
}

std::vector<EngineCase> tau_cases() {
  std::vector<EngineCase> c = {{ReplayEngine::ref, 1.0, 1e-13}, {ReplayEngine::ref, 1.5, 1e-13}};
  if (default_replay_engine() == ReplayEngine::cpu)
    c.push_back({ReplayEngine::cpu, 1.0, 1e-5});  // f32 accumulation over 1024 tokens: ~3e-6
  return c;
}

std::string tau_case_name(const ::testing::TestParamInfo<EngineCase>& p) {
  return std::string(name_of(p.param.engine)) + "_tau" + name_number(p.param.tau);
}
INSTANTIATE_TEST_SUITE_P(Engines, TauDisablesHits, ::testing::ValuesIn(tau_cases()), tau_case_name);

// ---- expected_replay.jsonl.

struct ExpectedLine {
  nlohmann::json j;
  ReplayEngine engine;
};
void PrintTo(const ExpectedLine& e, std::ostream* os) {
  *os << name_of(e.engine) << " " << e.j["trace"].get<std::string>() << " K " << e.j["K"] << " r "
      << e.j["r"] << " tau " << e.j["tau"];
}

std::vector<nlohmann::json> expected_lines() {
  std::ifstream in(testing::trace_path("expected_replay.jsonl"));
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The fp64 reference is ~0.4 s a line here: a subset covering every trace, both bands and all
// four taus. The CPU engine (f32) takes every line.
std::vector<ExpectedLine> expected_cases() {
  const std::tuple<std::string, int, double> ref_subset[] = {
      {"code_1k.safetensors", 256, 0.45},         {"code_1k.safetensors", 64, 0.75},
      {"text_1k.safetensors", 256, 0.75},         {"text_1k.safetensors", 64, 0.3},
      {"code_1k_theta5e5.safetensors", 256, 0.6}, {"code_1k_theta5e5.safetensors", 64, 0.45},
      {"text_1k_theta5e5.safetensors", 256, 0.3}, {"text_1k_theta5e5.safetensors", 64, 0.6}};
  std::vector<ExpectedLine> cases;
  for (const nlohmann::json& j : expected_lines()) {
    for (const auto& [trace, r, tau] : ref_subset)
      if (j["trace"] == trace && j["r"] == r && std::abs(j["tau"].get<double>() - tau) < 1e-9)
        cases.push_back({j, ReplayEngine::ref});
    if (default_replay_engine() == ReplayEngine::cpu) cases.push_back({j, ReplayEngine::cpu});
  }
  return cases;
}

class ExpectedReplay : public ::testing::TestWithParam<ExpectedLine> {};

// README tolerance: rates within 0.01 (f32 decisions at the threshold may flip), error
// percentiles within a few percent; an absolute floor for values at roundoff level (p50 of
// hits whose reused prefix holds no mass: 1e-10 in float64, ~1e-8 with f32 storage).
void expect_close_err(const ErrorStats& got, const nlohmann::json& want, const std::string& what) {
  for (const char* k : {"mean", "p50", "p99", "max"}) {
    const double w = want[k];
    EXPECT_NEAR(got.get(k), w, 0.03 * std::abs(w) + 1e-6) << what << "." << k;
  }
  const double frac = want["frac_gt_0.1"];
  EXPECT_NEAR(got.frac_gt_0_1, frac, 0.03 * frac + 2.0 / 8192) << what << ".frac_gt_0.1";
}

TEST_P(ExpectedReplay, MatchesIndependentFloat64) {
  const nlohmann::json& j = GetParam().j;
  const auto& t = loaded_trace(j["trace"].get<std::string>(), j["layer"].get<int>());
  ReplaySettings st;
  st.engine = GetParam().engine;
  st.mac.ring_capacity = j["K"];
  st.mac.band = j["r"];
  st.mac.tau = j["tau"];
  st.mac.min_context = j["min_context"];
  st.mac.pick = parse_enum<PickRule>(j["pick"].get<std::string>());
  const Fidelity f = summarize(replay_layer(t.layer, t.trace.rope_theta(), t.exact, st));
  EXPECT_EQ(f.steps, j["steps"].get<long long>());
  EXPECT_EQ(f.instance.rfind(st.engine == ReplayEngine::ref ? "mac_ref" : "mac_cpu_", 0), 0u)
      << f.instance;
  // The reference computes d^2 in double from the same f32 queries: identical decisions.
  const double rate_tol = st.engine == ReplayEngine::ref ? 1e-12 : 0.01;
  EXPECT_NEAR(f.hit_rate, j["hit_rate"], rate_tol);
  EXPECT_NEAR(f.group_all_hit_rate, j["group_all_hit_rate"], rate_tol);
  EXPECT_NEAR(f.skip_ratio, j["skip_ratio"], rate_tol);
  EXPECT_NEAR(f.head_skip_ratio, j["head_skip_ratio"], rate_tol);
  expect_close_err(f.rel_err, j["rel_err"], "rel_err");
  ASSERT_TRUE(f.rel_err_vs_ref);
  expect_close_err(*f.rel_err_vs_ref, j["rel_err_vs_ref"], "rel_err_vs_ref");
}

std::string expected_case_name(const ::testing::TestParamInfo<ExpectedLine>& p) {
  const nlohmann::json& j = p.param.j;
  std::string trace = j["trace"].get<std::string>();
  trace = trace.substr(0, trace.find('.'));
  return std::string(name_of(p.param.engine)) + "_" + trace + "_K" +
         std::to_string(j["K"].get<int>()) + "_r" + std::to_string(j["r"].get<int>()) + "_tau" +
         name_number(j["tau"].get<double>());
}
INSTANTIATE_TEST_SUITE_P(Lines, ExpectedReplay, ::testing::ValuesIn(expected_cases()),
                         expected_case_name);

// ---- Determinism, min_context, pooling.

TEST(Replay, DeterministicRef_Text1k_K512_r64_tau0p6) {
  const auto& t = loaded_trace("text_1k.safetensors");
  ReplaySettings st;
  st.engine = ReplayEngine::ref;
  st.mac.band = 64;
  st.mac.tau = 0.6;
  const LayerRun a = replay_layer(t.layer, t.trace.rope_theta(), t.exact, st);
  const LayerRun b = replay_layer(t.layer, t.trace.rope_theta(), t.exact, st);
  EXPECT_EQ(a.hit_heads, b.hit_heads);
  EXPECT_EQ(a.kv_tokens_read, b.kv_tokens_read);
  EXPECT_EQ(a.rel_err, b.rel_err);  // bit for bit
}

TEST(Replay, MinContextCountsOnlyEligibleSteps_Code1k_Min600) {
  const auto& t = loaded_trace("code_1k.safetensors");
  ReplaySettings st;
  st.engine = ReplayEngine::ref;
  st.mac.min_context = 600;
  const Fidelity f = summarize(replay_layer(t.layer, t.trace.rope_theta(), t.exact, st));
  EXPECT_EQ(f.steps, 1024);
  EXPECT_EQ(f.eligible_steps, 1024 - 600);
  EXPECT_EQ(f.rel_err.count, (1024 - 600) * 8);
  // The ring is warm when MAC starts, so hits happen from the first eligible step on.
  EXPECT_GT(f.hit_rate, 0.5);
  // Skip over eligible steps only: sum of kv_len over m = 600..1023 per group.
  const double total = 2.0 * (1024.0 * 1025.0 / 2 - 600.0 * 601.0 / 2);
  const LayerRun run = replay_layer(t.layer, t.trace.rope_theta(), t.exact, st);
  EXPECT_EQ(static_cast<double>(run.kv_tokens_total), total);
}

TEST(Replay, PoolingEqualsConcatenation) {
  LayerRun a, b;
  a.layer = b.layer = 3;
  a.steps = 10, b.steps = 20;
  a.eligible_heads = 8, b.eligible_heads = 24;
  a.hit_heads = 4, b.hit_heads = 6;
  a.kv_tokens_read = 50, a.kv_tokens_total = 100, b.kv_tokens_read = 10, b.kv_tokens_total = 100;
  a.rel_err = {0.5, 0.1}, b.rel_err = {0.2};
  a.rel_err_vs_ref = {0.5, 0.1}, b.rel_err_vs_ref = {};
  a.pool(b);
  const Fidelity f = summarize(a);
  EXPECT_EQ(f.steps, 30);
  EXPECT_DOUBLE_EQ(f.hit_rate, 10.0 / 32.0);
  EXPECT_DOUBLE_EQ(f.skip_ratio, 1.0 - 60.0 / 200.0);
  EXPECT_EQ(f.rel_err.count, 3);
  EXPECT_FALSE(f.rel_err_vs_ref);  // one trace had no o_ref: no partial vs-ref figures
  b.layer = 4;
  EXPECT_THROW(a.pool(b), Error);
}

TEST(ErrorStats, NumpyLinearPercentiles) {
  // numpy.percentile([0.3, 0.1, 0.2, 0.5, 0.4, 2.0], [50, 99]) = [0.35, 1.925]
  const ErrorStats s = error_stats({0.3, 0.1, 0.2, 0.5, 0.4, 2.0});
  EXPECT_EQ(s.count, 6);
  EXPECT_NEAR(s.p50, 0.35, 1e-15);
  EXPECT_NEAR(s.p99, 1.925, 1e-12);
  EXPECT_DOUBLE_EQ(s.max, 2.0);
  EXPECT_NEAR(s.mean, 3.5 / 6, 1e-15);
  EXPECT_DOUBLE_EQ(s.frac_gt_0_1, 5.0 / 6);  // 0.1 itself is not more than 10% off
  EXPECT_DOUBLE_EQ(s.get("p99"), s.p99);
  EXPECT_THROW(s.get("p95"), InputError);
  EXPECT_EQ(error_stats({}).count, 0);
}

}  // namespace
}  // namespace mactune::replay
