// The cost model: exact NNLS, coefficients recovered from synthetic rows, features equal to
// what the CPU engine accounts for the same step, held-out error, the predicted break-even,
// disagreements beyond the noise, and `predict` on contexts it did not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "tuner/decide/cost_model.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/model_io.h"
#include "tuner/decide/predict.h"
#include "tuner/measure/measure.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {
namespace {

StepSpec step(int batch, int context, double hit, int chunk = 256, bool mac = true) {
  StepSpec s;
  s.shape.batch = batch;
  s.shape.q_heads = 8;
  s.shape.kv_heads = 2;
  s.shape.head_dim = 64;
  s.shape.kv_dtype = DType::bf16;
  s.context = context;
  s.mac.ring_capacity = 256;
  s.mac.band = 64;
  s.mac.min_context = 512;
  s.forced.enabled = mac;
  s.forced.hit_rate = hit;
  s.forced.lag = {LagKind::uniform, 1, 32};
  s.mac_enabled = mac;
  s.limits = cpu_plan_limits(2, chunk);
  return s;
}

// A known cost: 5 us a step, 8 us more a MAC step, 0.02 ns a KV byte, 0.1 ns a ring byte, 1 us
// a group, 0.3 us an item.
const std::array<double, kTerms> kTrue{5e-6, 8e-6, 2e-11, 1e-10, 1e-6, 3e-7};

double true_time(const StepFeatures& f) {
  double t = 0;
  for (int i = 0; i < kTerms; ++i) t += kTrue[std::size_t(i)] * f.x[std::size_t(i)];
  return t;
}

std::vector<FitRow> synthetic_rows(double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, noise);
  std::vector<FitRow> rows;
  for (int b : {1, 2, 4, 8})
    for (int ctx : {1024, 4096, 16384})
      for (double h : {0.0, 0.5, 0.9, 1.0})
        for (int chunk : {64, 256, 1024})
          for (bool mac : {true, false}) {
            FitRow r;
            r.features = step_features(step(b, ctx, h, chunk, mac));
            r.seconds = true_time(r.features) * (1 + n(rng));
            r.rel_noise = 0.02;
            rows.push_back(r);
          }
  return rows;
}

TEST(CostModel, NnlsIsExactAndClampsNegativeCoefficientsToZero) {
  // b = 2 x0 + 3 x1 exactly.
  const std::vector<double> a{1, 0, 0, 1, 1, 1, 2, 1};
  const std::vector<double> b{2, 3, 5, 7};
  const auto c = nnls(a, 2, b);
  EXPECT_NEAR(c[0], 2, 1e-12);
  EXPECT_NEAR(c[1], 3, 1e-12);
  // Unconstrained, b = 4 x0 - 1 x1 would fit exactly; c >= 0 must give x1 = 0 and the best x0.
  const std::vector<double> b2{4, -1, 3, 7};
  const auto c2 = nnls(a, 2, b2);
  EXPECT_EQ(c2[1], 0.0);
  // With x1 = 0: min over x0 of (x0-4)^2 + (0+1)^2 + (x0-3)^2 + (2 x0-7)^2 -> x0 = 21/6.
  EXPECT_NEAR(c2[0], 21.0 / 6.0, 1e-12);
}

TEST(CostModel, RecoversKnownCoefficientsFromSyntheticRows) {
  const auto rows = synthetic_rows(0.0, 1);
  const CostModel m = fit_cost_model(rows);
  for (int i = 0; i < kTerms; ++i)
    EXPECT_NEAR(m.coef[std::size_t(i)] / kTrue[std::size_t(i)], 1.0, 1e-6) << term_name(Term(i));
  EXPECT_LT(cross_validated_error(rows).max, 1e-6);
}

TEST(CostModel, NoisyRowsGiveHeldOutErrorOfTheNoise) {
  const auto rows = synthetic_rows(0.03, 2);
  const CostModel m = fit_cost_model(rows);
  // The dominant term is recovered; the small ones (a few us a step) trade off inside the noise.
  EXPECT_NEAR(m.coef[int(Term::kv_bytes)] / kTrue[int(Term::kv_bytes)], 1.0, 0.05);
  const ErrorSummary e = cross_validated_error(rows);
  EXPECT_EQ(e.n, rows.size());
  // |N(0, 3%)| has median ~2%: held out, the error stays of that order, not far below it.
  EXPECT_GT(e.median, 0.01);
  EXPECT_LT(e.median, 0.04);
}

TEST(CostModel, FeaturesCountWhatTheKernelsRead) {
  const StepFeatures full = step_features(step(2, 4096, 0.5, 256, false));
  EXPECT_EQ(full.x[int(Term::fixed)], 1.0);
  EXPECT_EQ(full.stats.kv_bytes_read, 2LL * 2 * 4097 * 2 * 64 * 2);  // batch kv_heads tok 2D bf16
  EXPECT_EQ(full.x[int(Term::ring_bytes)], 0.0);
  EXPECT_EQ(full.x[int(Term::groups)], 4.0);
  EXPECT_GE(full.x[int(Term::items)], 4.0);
  const StepFeatures none = step_features(step(2, 4096, 0.0));
  const StepFeatures all = step_features(step(2, 4096, 1.0));
  EXPECT_EQ(none.stats.kv_bytes_read, full.stats.kv_bytes_read);
  EXPECT_GT(none.stats.ring_bytes_read, 0);  // the match scan
  EXPECT_EQ(all.stats.hit_heads, 16);
  EXPECT_GT(all.stats.skip_ratio(), 0.9);
  EXPECT_LT(all.x[int(Term::kv_bytes)], 0.1 * none.x[int(Term::kv_bytes)]);
}

// The features equal what the CPU engine accounts when it runs the same step in the tuner.
TEST(CostModel, FeaturesEqualTheEnginesAccounting) {
  auto backend = make_cpu_backend();
  // Four hit rates, and two skip ratios (hits and lags solved: kernels/forced.h).
  std::vector<ForcedHits> workloads;
  for (double hit : {0.0, 0.3, 0.9, 1.0}) {
    ForcedHits f;
    f.hit_rate = hit;
    f.lag = {LagKind::uniform, 1, 200};
    workloads.push_back(f);
  }
  for (double skip : {0.9, 0.95}) {
    ForcedHits f;
    f.quota = ForcedQuota::skip_ratio;
    f.skip_ratio = skip;
    f.coherence = Coherence::per_group;
    workloads.push_back(f);
  }
  // group_hits (kernels/stats.h): a group with a miss reads all of its KV, its hits demoted.
  for (bool group_hits : {false, true})
    for (const ForcedHits& w : workloads)
      for (bool mac : {true, false}) {
        const std::string what =
            quota_label(w) + (mac ? " mac" : " full") + (group_hits ? " group_hits" : "");
        TunePoint p;
        p.shape.batch = 3;
        p.shape.q_heads = 8;
        p.shape.kv_heads = 2;
        p.shape.head_dim = 64;
        p.shape.kv_dtype = DType::bf16;
        p.context = 2600;
        p.mac.ring_capacity = 256;
        p.mac.band = 64;
        p.mac.min_context = 512;
        p.mac.group_hits = group_hits;
        p.forced = w;
        p.forced.enabled = true;
        p.cpu.threads = 2;
        p.cpu.chunk_tokens = 128;
        p.cpu.block_rows = 16;
        auto c = backend->make_case(p, mac, 7);
        c->run();
        const StepStats engine = c->stats();
        StepSpec s = step(3, 2600, w.hit_rate, 128, mac);
        s.mac.group_hits = group_hits;
        s.forced = w;
        s.forced.enabled = mac;
        const StepStats model = step_features(s).stats;
        EXPECT_EQ(model.kv_tokens_read, engine.kv_tokens_read) << what;
        EXPECT_EQ(model.kv_bytes_read, engine.kv_bytes_read) << what;
        EXPECT_EQ(model.ring_bytes_read, engine.ring_bytes_read) << what;
        EXPECT_EQ(model.bytes_written, engine.bytes_written) << what;
        EXPECT_EQ(model.hit_heads, engine.hit_heads) << what;
        EXPECT_EQ(model.groups_mixed, engine.groups_mixed) << what;
        if (mac && w.quota == ForcedQuota::skip_ratio) {  // reachable here: exact to the token
          EXPECT_TRUE(skip_unreachable(p).empty()) << skip_unreachable(p);
          EXPECT_EQ(engine.kv_tokens_total - engine.kv_tokens_read,
                    forced_skip_round(w.skip_ratio, engine.kv_tokens_total))
              << what;
          EXPECT_GT(engine.hit_heads, 0) << what;
        }
      }
}

TEST(CostModel, PredictedBreakEvenIsTheCrossingOfTheModels) {
  CostModel mac, full;
  mac.coef = {5e-6, 15e-6, 2e-11, 1e-10, 1e-6, 3e-7};
  full.coef = mac.coef;
  const StepSpec s = step(4, 16384, 0.0);
  const auto be = predicted_break_even(mac, full, s, 0.001);
  ASSERT_TRUE(be);
  // Brute force: the smallest hit rate on a fine grid at which MAC is predicted faster.
  StepSpec f = s;
  f.mac_enabled = false;
  const double t_full = full.predict(step_features(f));
  double first = 2;
  for (int i = 0; i <= 1000 && first > 1; ++i) {
    StepSpec p = s;
    p.forced.hit_rate = i / 1000.0;
    if (mac.predict(step_features(p)) < t_full) first = i / 1000.0;
  }
  EXPECT_GT(first, 0.05);  // not trivially 0
  EXPECT_LT(first, 0.95);
  EXPECT_NEAR(*be, first, 0.0011);
  // A MAC that costs more than full attention even when it reads nothing: never.
  mac.coef[int(Term::mac_step)] = 1.0;
  EXPECT_FALSE(predicted_break_even(mac, full, s));
}

std::vector<ModelRow> model_rows(double spike_at_64k) {
  std::vector<ModelRow> rows;
  for (const Family fam : {Family::mac, Family::full})
    for (int b : {1, 4})
      for (int ctx : {4096, 16384, 65536})
        for (double h : {0.0, 0.5, 0.9, 1.0})
          for (int chunk : {256, 1024}) {
            ModelRow r;
            r.family = fam;
            r.params = "threads=2,chunk_tokens=" + std::to_string(chunk) + ",block_rows=16";
            r.launch = parse_launch(Backend::cpu, r.params);
            r.instance = std::string(name_of(r.family)) + "_cpu_test";
            r.workload.problem = step(b, ctx, h).shape;
            r.workload.context = ctx;
            r.workload.forced.hit_rate = h;
            r.workload.forced.lag = {LagKind::uniform, 1, 32};
            r.workload.mac = step(b, ctx, h).mac;
            DeviceFingerprint d;
            d.threads = 2;
            r.step = step_of(r.workload, r.family == Family::mac, plan_limits_of(d, r.params));
            r.fit.features = step_features(r.step);
            r.fit.seconds = true_time(r.fit.features) * (ctx == 65536 ? spike_at_64k : 1.0);
            r.fit.rel_noise = 0.02;
            rows.push_back(r);
          }
  return rows;
}

TEST(CostModel, DisagreementsAreThePointsBeyondTheNoise) {
  auto rows = model_rows(1.0);
  rows[5].fit.seconds *= 1.5;  // one point the model cannot explain
  DeviceFingerprint d;
  const DeviceModels m = fit_device_models(rows, d);
  const auto off = disagreements(m, rows);
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(m.mac.trimmed, 1u) << "the outlier is left out of the final fit";
  EXPECT_EQ(off[0].row, &rows[5]);
  EXPECT_NEAR(off[0].rel_err, 1 / 1.5 - 1, 1e-6) << "the fit without it is exact";
  EXPECT_NE(model_markdown(m, rows).find("1 measured points disagree"), std::string::npos);
}

TEST(CostModel, PredictsContextsItDidNotFit) {
  // The true cost is linear: fitted on 4K and 16K, 64K is predicted exactly.
  DeviceFingerprint d;
  d.threads = 2;
  PredictRequest req;
  req.contexts = {65536, 1 << 20};
  req.batches = {4};
  req.fit_contexts = {4096, 16384};
  req.params = "threads=2,chunk_tokens=256,block_rows=16";
  const Prediction p = predict(model_rows(1.0), d, req);
  EXPECT_EQ(p.models.mac_rows, 32u);
  EXPECT_EQ(p.models.full_rows, 32u);
  EXPECT_EQ(p.models.mac_held_out.n, 32u);
  ASSERT_EQ(p.points.size(), 8u);
  EXPECT_EQ(p.mac_unseen.n, 4u);  // 64K x 4 hit rates measured, 1M never
  EXPECT_LT(p.mac_unseen.max, 1e-6);
  EXPECT_LT(p.full_unseen.max, 1e-6);
  EXPECT_FALSE(p.points[4].measured_mac_s);  // 1M
  EXPECT_GT(p.points[4].full_s, 10 * p.points[0].full_s);
  // A 64K measured 30% slower than the line: the error on unseen points says so.
  const Prediction q = predict(model_rows(1.3), d, req);
  EXPECT_NEAR(q.full_unseen.median, 1 - 1 / 1.3, 0.01);
  const std::string md = prediction_markdown(q);
  EXPECT_NE(md.find("| 1048576 | 4 |"), std::string::npos);
  EXPECT_NE(md.find("did not see"), std::string::npos);
}

// Two decided buckets of one shape at two values of one axis (`with` sets it on a step), each
// with the model's own predicted break-even: the table's boundary between them is the model's.
struct BoundaryCase {
  std::vector<ModelRow> rows = model_rows(1.0);
  DeviceModels m;
  StepSpec s = step(4, 4096, 0.0);
  Decided d;
  std::function<StepSpec(int)> at;

  BoundaryCase(std::function<void(StepSpec&, int)> with, std::initializer_list<int> values) {
    DeviceFingerprint dev;
    dev.backend = Backend::cpu;
    dev.threads = 2;
    m = fit_device_models(rows, dev);
    s.forced.lag = {LagKind::uniform, 1, 32};
    at = [this, with](int v) {
      StepSpec x = s;
      with(x, v);
      return x;
    };
    d.device = dev;
    const Launch launch = parse_launch(Backend::cpu, "threads=2,chunk_tokens=256,block_rows=16");
    for (int v : values) {
      const StepSpec x = at(v);
      BucketDecision b;
      b.bucket = Bucket::of(x.shape, x.context);
      b.full.config = {"full_cpu_test", launch, std::nullopt};
      b.mac.config = {"mac_cpu_test", launch, s.mac};
      b.break_even.status = BreakEvenStatus::ok;
      b.break_even.hit_rate = be_at(v);
      d.decisions.push_back(b);
    }
  }
  double be_at(int v) const { return *predicted_break_even(m.mac, m.full, at(v), 0.005); }
  // Whether the model's break-even at v is nearer the upper bucket's than the lower's.
  bool nearer_upper(int v) const {
    const double lo = *d.decisions[0].break_even.hit_rate, hi = *d.decisions[1].break_even.hit_rate;
    return std::abs(be_at(v) - hi) < std::abs(be_at(v) - lo);
  }
};

// The table's context boundary between two buckets whose break-evens differ goes where the
// model's predicted break-even passes from nearer the lower one's to nearer the upper one's.
TEST(CostModel, ContextBoundariesGoWhereThePredictedDecisionChanges) {
  const BoundaryCase c([](StepSpec& x, int ctx) { x.context = ctx; }, {4096, 65536});
  ASSERT_GT(c.be_at(4096) - c.be_at(65536), 0.02)
      << "MAC's fixed costs weigh less at long contexts";
  const auto measured = make_table(c.d, "t.db");
  ASSERT_EQ(measured.entries.size(), 2u);
  EXPECT_EQ(measured.entries[0].context.hi, std::optional<std::int64_t>(65535));
  const auto t = make_table(c.d, "t.db", {&c.m, &c.rows});
  const std::int64_t boundary = t.entries[1].context.lo;
  EXPECT_EQ(t.entries[0].context.lo, 1);
  EXPECT_EQ(t.entries[0].context.hi, std::optional<std::int64_t>(boundary - 1));
  EXPECT_GT(boundary, 4096);
  EXPECT_LT(boundary, 65536);
  EXPECT_TRUE(c.nearer_upper(static_cast<int>(boundary)));
  EXPECT_FALSE(c.nearer_upper(static_cast<int>(boundary - boundary / 32)))
      << "bisected to 1/64 of the context";
  EXPECT_NE(t.entries[1].note.find("from the cost model"), std::string::npos);
}

// Likewise the batch boundary, between batch 1 and 16 at one context (MAC's fixed cost per
// step weighs less at a larger batch).
TEST(CostModel, BatchBoundariesGoWhereThePredictedDecisionChanges) {
  const BoundaryCase c([](StepSpec& x, int batch) { x.shape.batch = batch; }, {1, 16});
  ASSERT_GT(std::abs(c.be_at(1) - c.be_at(16)), 0.02) << c.be_at(1) << " vs " << c.be_at(16);
  const auto measured = make_table(c.d, "t.db");
  ASSERT_EQ(measured.entries.size(), 2u);
  EXPECT_EQ(measured.entries[0].batch.hi, std::optional<std::int64_t>(15));
  const auto t = make_table(c.d, "t.db", {&c.m, &c.rows});
  const std::int64_t boundary = t.entries[1].batch.lo;
  EXPECT_EQ(t.entries[0].batch.lo, 1);
  EXPECT_EQ(t.entries[0].batch.hi, std::optional<std::int64_t>(boundary - 1));
  EXPECT_GT(boundary, 1);
  EXPECT_LT(boundary, 16);
  EXPECT_TRUE(c.nearer_upper(static_cast<int>(boundary)));
  EXPECT_FALSE(c.nearer_upper(static_cast<int>(boundary - 1))) << "bisected to one batch";
  EXPECT_NE(t.entries[1].note.find("batch boundary"), std::string::npos) << t.entries[1].note;
}

// A stored point's planning limits come from its launch text read through the engine's field
// table: the CUDA knob under its name since schema v7 (chunk_tokens) or its old one, the CPU
// engine's threads and chunk_tokens, each engine's own default for what the text leaves out.
TEST(CostModel, PlanLimitsReadTheLaunchTextThroughTheEngineTable) {
  DeviceFingerprint gpu;
  gpu.backend = Backend::cuda;
  gpu.compute_units = 132;
  const std::string launch = "match=auto,merge=auto,chunk_tokens=64,ctas_per_sm=0,graph=false";
  EXPECT_EQ(plan_limits_of(gpu, launch).min_chunk, 64);
  EXPECT_EQ(plan_limits_of(gpu, "min_chunk=32").min_chunk, 32);
  EXPECT_EQ(plan_limits_of(gpu, "").min_chunk, cuda::EngineConfig{}.min_chunk);
  EXPECT_EQ(plan_limits_of(gpu, launch).workers, 132);
  DeviceFingerprint cpu;
  cpu.threads = 8;
  EXPECT_EQ(plan_limits_of(cpu, "threads=2,chunk_tokens=1024").min_chunk, 1024);
  EXPECT_EQ(plan_limits_of(cpu, "threads=0").min_chunk, cpu::EngineConfig{}.chunk_tokens);
  EXPECT_EQ(plan_limits_of(cpu, "threads=0").workers, 8);
  EXPECT_EQ(plan_limits_of(cpu, "threads=3").workers, 3);
  EXPECT_THROW(plan_limits_of(cpu, "no_such_knob=1"), InputError);
}

}  // namespace
}  // namespace mactune::tuner
