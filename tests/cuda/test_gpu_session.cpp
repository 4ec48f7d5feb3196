// cuda::Session behaviour beyond the numerics (label gpu; Skipped without a GPU): graph
// replay, asynchronous steps and device timing, repeatable steps, synthetic prefill with
// forced quotas, and input errors.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/registry.h"

namespace mactune::cuda::testing {
namespace {

SessionOptions options(bool graph) {
  const AttendInstance& a = attend_instances().front();
  SessionOptions o;
  o.shape.batch = 4;
  o.shape.kv_heads = 2;
  o.shape.q_heads = 2 * std::min(4, a.config.group);
  o.shape.head_dim = a.config.head_dim;
  o.shape.kv_dtype = a.config.kv_dtype;
  o.shape.page_size = 16;
  o.mac.ring_capacity = 32;
  o.mac.band = 6;
  o.mac.min_context = 10;
  o.engine.graph = graph;
  o.engine.poison = true;
  o.max_context = 4096;
  return o;
}

// Three requests of 3000, 3100 and 3200 tokens of synthetic KV (different lengths: the forced
// quotas are per request), their ids in step order.
std::vector<int> add_prefilled(Session& s) {
  std::vector<int> ids;
  for (int r = 0; r < 3; ++r) {
    ids.push_back(s.add_request());
    s.prefill_synthetic(ids.back(), 3000 + 100 * r, 7 + r);
  }
  return ids;
}

// One step's inputs for every request of `ids`, in step order.
void next_batch(Inputs& in, const std::vector<int>& ids, std::vector<float>& q,
                std::vector<float>& k, std::vector<float>& v) {
  std::vector<float> q1, k1, v1;
  for (int id : ids) {
    in.next(id, q1, k1, v1);
    q.insert(q.end(), q1.begin(), q1.end());
    k.insert(k.end(), k1.begin(), k1.end());
    v.insert(v.end(), v1.begin(), v1.end());
  }
}

// A device buffer of floats for step_device (the test's own: the session allocates nothing).
struct DeviceFloats {
  float* p = nullptr;
  explicit DeviceFloats(std::size_t n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) != cudaSuccess) p = nullptr;
  }
  ~DeviceFloats() { cudaFree(p); }
  void upload(const std::vector<float>& h) {
    ASSERT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
};

// Inputs and outputs on the device (what a framework's CUDA tensors are) give the host step's
// results bit for bit, decisions included, eagerly and in a graph session alike.
TEST(SessionCuda, DeviceBuffersEqualHostSteps) {
  MACTUNE_REQUIRE_GPU();
  for (const bool graph : {false, true}) {
    Session host(options(false)), dev(options(graph));
    Inputs in(host.options().shape, 6, 23);
    const Problem& p = host.options().shape;
    const std::size_t qn = std::size_t(3) * p.q_heads * p.head_dim;
    const std::size_t kn = std::size_t(3) * p.kv_heads * p.head_dim;
    DeviceFloats dq(qn), dk(kn), dv(kn), dout(qn);
    ASSERT_TRUE(dq.p && dk.p && dv.p && dout.p);
    for (int r = 0; r < 3; ++r) {
      host.add_request();
      dev.add_request();
    }
    for (int t = 0; t < 40; ++t) {
      const std::vector<int> ids = t % 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{2, 0};
      std::vector<float> q, k, v;
      for (int id : ids) in.next(id, q, k, v);
      dq.upload(q);
      dk.upload(k);
      dv.upload(v);
      const Session::Result a = host.step(ids, q, k, v);
      if (t % 4 == 3) {  // host steps between device steps: the session switches paths
        const Session::Result& c = dev.step(ids, q, k, v);
        ASSERT_EQ(std::memcmp(a.out.data(), c.out.data(), a.out.size() * sizeof(float)), 0)
            << "host step " << t;
        continue;
      }
      const Session::Result& b = dev.step_device(ids, dq.p, dk.p, dv.p, dout.p);
      EXPECT_TRUE(b.out.empty());
      std::vector<float> got(a.out.size(), std::nanf(""));
      ASSERT_EQ(cudaMemcpy(got.data(), dout.p, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(std::memcmp(a.out.data(), got.data(), got.size() * sizeof(float)), 0)
          << "step " << t << (graph ? " (graph session)" : "");
      for (std::size_t h = 0; h < a.decisions.size(); ++h)
        ASSERT_TRUE(same_decision(a.decisions[h], b.decisions[h])) << "step " << t;
    }
  }
}

// The same steps eagerly and as graph replays give bit-identical results.
TEST(SessionCuda, GraphReplayEqualsEagerSteps) {
  MACTUNE_REQUIRE_GPU();
  Session eager(options(false)), graph(options(true));
  Inputs in(eager.options().shape, 6, 17);
  for (int r = 0; r < 3; ++r) {
    eager.add_request();
    graph.add_request();
  }
  for (int t = 0; t < 40; ++t) {
    const std::vector<int> ids = t % 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{2, 0};
    std::vector<float> q, k, v;
    for (int id : ids) in.next(id, q, k, v);
    const Session::Result a = eager.step(ids, q, k, v);
    const Session::Result& b = graph.step(ids, q, k, v);
    ASSERT_EQ(a.out.size(), b.out.size());
    ASSERT_EQ(std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)), 0)
        << "step " << t;
    for (std::size_t h = 0; h < a.decisions.size(); ++h)
      ASSERT_TRUE(same_decision(a.decisions[h], b.decisions[h])) << "step " << t;
  }
}

TEST(SessionCuda, AsyncStepsAreTimedOnTheDevice) {
  MACTUNE_REQUIRE_GPU();
  SessionOptions o = options(false);
  o.engine.time_phases = true;
  Session s(o);
  const int id = s.add_request();
  s.prefill_synthetic(id, 1000, 5);
  Inputs in(o.shape, 6, 3);
  std::vector<float> q, k, v;
  in.next(0, q, k, v);
  const int ids[] = {id};
  s.step_async(ids, q, k, v);
  EXPECT_THROW(s.step_async(ids, q, k, v), InputError);  // the first is not waited for
  const Session::Result& r = s.wait();
  EXPECT_EQ(s.length(id), 1001);
  EXPECT_GT(s.last_step_ms(), 0.0);
  const auto phases = s.last_phase_ms();
  ASSERT_EQ(phases.size(), 5u);  // rope, match, plan, attend, merge
  double sum = 0;
  for (const auto& [phase, ms] : phases) {
    EXPECT_GE(ms, 0.0) << name_of(phase);
    sum += ms;
  }
  EXPECT_LE(sum, s.last_step_ms() * 1.01 + 1e-3);
  EXPECT_EQ(r.out.size(), static_cast<std::size_t>(o.shape.q_heads) * o.shape.head_dim);
  EXPECT_GE(s.last_items(), o.shape.kv_heads);
  EXPECT_LE(s.last_items(), attend_capacity(o.shape.kv_heads, s.plan_budget(), o.engine.min_chunk));
  EXPECT_EQ(s.last_plan().items, s.last_items());
}

// advance = false: the same step again gives the same answer (nothing it reads moved).
TEST(SessionCuda, RepeatedStepWithoutAdvanceIsIdentical) {
  MACTUNE_REQUIRE_GPU();
  Session s(options(true));
  const int id = s.add_request();
  s.prefill_synthetic(id, 600, 11);
  Inputs in(s.options().shape, 6, 4);
  std::vector<float> q, k, v;
  in.next(0, q, k, v);
  const int ids[] = {id};
  const std::vector<float> first = s.step(ids, q, k, v, false).out;
  for (int i = 0; i < 3; ++i) {
    const Session::Result& again = s.step(ids, q, k, v, false);
    ASSERT_EQ(std::memcmp(first.data(), again.out.data(), first.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(s.length(id), 600);
}

// The identity page table (the GPU check's page-layout row) changes where pages live, not what
// attention reads: the same prefill and steps give the same outputs bit for bit.
TEST(SessionCuda, IdentityPageTableGivesTheSameAnswer) {
  MACTUNE_REQUIRE_GPU();
  SessionOptions permuted = options(false);
  SessionOptions identity = permuted;
  identity.engine.identity_pages = true;
  Session a(permuted), b(identity);
  const std::vector<int> ids = add_prefilled(a);
  ASSERT_EQ(add_prefilled(b), ids);
  Inputs in(permuted.shape, permuted.mac.band, 5);
  for (int t = 0; t < 3; ++t) {
    std::vector<float> q, k, v;
    next_batch(in, ids, q, k, v);
    const std::vector<float> got_a = a.step(ids, q, k, v).out;
    const std::vector<float> got_b = b.step(ids, q, k, v).out;
    ASSERT_EQ(got_a.size(), got_b.size());
    EXPECT_EQ(std::memcmp(got_a.data(), got_b.data(), got_a.size() * sizeof(float)), 0)
        << "step " << t;
  }
}

// match_mode = pruned decides as the scan (hit, position, first attended token) on the same
// prefill and steps, so the outputs are the same bit for bit; graphs replay the sketch kernel.
TEST(SessionCuda, PrunedMatchGivesTheScansAnswer) {
  MACTUNE_REQUIRE_GPU();
  SessionOptions scan = options(true);
  SessionOptions pruned = scan;
  pruned.engine.match_mode = MatchMode::pruned;
  Session a(scan), b(pruned);
  const std::vector<int> ids = add_prefilled(a);
  ASSERT_EQ(add_prefilled(b), ids);
  Inputs in(scan.shape, scan.mac.band, 9);
  long long hits = 0;
  for (int t = 0; t < 40; ++t) {
    std::vector<float> q, k, v;
    next_batch(in, ids, q, k, v);
    const Session::Result ra = a.step(ids, q, k, v);
    const Session::Result& rb = b.step(ids, q, k, v);
    ASSERT_EQ(ra.decisions.size(), rb.decisions.size());
    for (std::size_t h = 0; h < ra.decisions.size(); ++h) {
      const HeadDecision &x = ra.decisions[h], &y = rb.decisions[h];
      ASSERT_TRUE(x.eligible == y.eligible && x.hit == y.hit && x.p == y.p && x.start == y.start)
          << "step " << t << " head " << h << ": scan hit " << x.hit << " p " << x.p
          << ", pruned hit " << y.hit << " p " << y.p;
      hits += x.hit;
    }
    EXPECT_EQ(std::memcmp(ra.out.data(), rb.out.data(), ra.out.size() * sizeof(float)), 0)
        << "step " << t;
  }
  EXPECT_GT(hits, 0) << "no hit exercised";
}

// A new engine config (finer or coarser split-KV, another budget, graphs off) on the same
// prefilled session gives the same answer up to fp32 summation order.
TEST(SessionCuda, SetEngineKeepsTheCacheAndTheAnswer) {
  MACTUNE_REQUIRE_GPU();
  Session s(options(true));
  const int id = s.add_request();
  s.prefill_synthetic(id, 2000, 21);
  Inputs in(s.options().shape, 6, 5);
  std::vector<float> q, k, v;
  in.next(0, q, k, v);
  const int ids[] = {id};
  const std::vector<float> first = s.step(ids, q, k, v, false).out;
  const int items = s.last_items();
  EngineConfig e = s.options().engine;
  e.min_chunk = 16;
  e.ctas_per_sm = 8;
  e.graph = false;
  s.set_engine(e);
  const std::vector<float> again = s.step(ids, q, k, v, false).out;
  EXPECT_GT(s.last_items(), items);  // a finer split
  RelErr err;
  std::vector<double> want(first.begin(), first.end());
  err.add(again.data(), want.data(), static_cast<int>(again.size()));
  EXPECT_LT(err.rel(), 1e-5);
  e.ctas_per_sm = -1;
  EXPECT_THROW(s.set_engine(e), InputError);
  EXPECT_EQ(s.length(id), 2000);
}

// A synthetic prefill makes every ring entry valid: forced hits meet their quota exactly, the
// outputs are finite and the KV read shrinks to the band + lag.
TEST(SessionCuda, SyntheticPrefillWithForcedHitsMeetsTheQuota) {
  MACTUNE_REQUIRE_GPU();
  for (double rate : {0.0, 0.5, 1.0}) {
    SessionOptions o = options(false);
    o.mac.ring_capacity = 256;
    o.mac.band = 64;
    o.mac.min_context = 512;
    o.forced.enabled = true;
    o.forced.hit_rate = rate;
    o.forced.lag = {LagKind::uniform, 1, 64};
    Session s(o);
    const std::vector<int> ids = add_prefilled(s);
    Inputs in(o.shape, o.mac.band, 8);
    for (int t = 0; t < 4; ++t) {
      std::vector<float> q, k, v;
      for (int id : ids) in.next(id, q, k, v);
      const Session::Result& r = s.step(ids, q, k, v);
      for (float x : r.out) ASSERT_TRUE(std::isfinite(x));
      const int units = static_cast<int>(ids.size()) * o.shape.q_heads;
      EXPECT_EQ(r.stats.hit_heads, forced_quota(rate, units)) << "rate " << rate;
      if (rate == 1.0) {
        EXPECT_GT(r.stats.skip_ratio(), 0.9);
      } else if (rate == 0.0) {
        EXPECT_EQ(r.stats.skip_ratio(), 0.0);
      }
    }
  }
}

// The skip-ratio quota on the device, requests of different lengths: wherever every request
// can reach its share, the step skips exactly round(s x sum of kv_len) tokens, whole groups.
TEST(SessionCuda, SyntheticPrefillWithForcedSkipRatioIsExactToTheToken) {
  MACTUNE_REQUIRE_GPU();
  int exact = 0;
  for (double skip : {0.9, 0.95, 0.99}) {
    SessionOptions o = options(false);
    o.mac.ring_capacity = 256;
    o.mac.band = 16;
    o.forced.enabled = true;
    o.forced.quota = ForcedQuota::skip_ratio;
    o.forced.skip_ratio = skip;
    Session s(o);
    const std::vector<int> ids = add_prefilled(s);
    Inputs in(o.shape, o.mac.band, 8);
    for (int t = 0; t < 3; ++t) {
      std::vector<float> q, k, v;
      long long before = 0;
      bool reachable = true;
      for (int id : ids) {
        const int m = s.length(id);
        reachable = reachable && forced_skip_request(o.forced, m, before, o.shape.kv_heads,
                                                     o.mac.ring_capacity, o.mac.band)
                                     .reachable;
        before += m + 1;
        in.next(id, q, k, v);
      }
      const Session::Result& r = s.step(ids, q, k, v);
      for (float x : r.out) ASSERT_TRUE(std::isfinite(x));
      EXPECT_EQ(r.stats.groups_mixed, 0);
      if (!reachable) continue;
      ++exact;
      EXPECT_EQ(r.stats.kv_tokens_total - r.stats.kv_tokens_read,
                forced_skip_round(skip, r.stats.kv_tokens_total))
          << "skip " << skip << " step " << t;
    }
  }
  EXPECT_GE(exact, 6);  // 0.95 and 0.99 at every step (0.9 needs lags beyond K = 256)
}

TEST(SessionCuda, BadStepsAreInputErrors) {
  MACTUNE_REQUIRE_GPU();
  SessionOptions o = options(false);
  o.max_context = 8;
  Session s(o);
  const int id = s.add_request();
  const std::size_t nq = static_cast<std::size_t>(o.shape.q_heads) * o.shape.head_dim;
  const std::size_t nk = static_cast<std::size_t>(o.shape.kv_heads) * o.shape.head_dim;
  std::vector<float> q(nq, 0.5f), k(nk, 0.5f), v(nk, 0.5f);
  const int twice[] = {id, id};
  std::vector<float> q2(2 * nq, 0.5f), k2(2 * nk, 0.5f), v2(2 * nk, 0.5f);
  EXPECT_THROW(s.step(twice, q2, k2, v2), InputError);
  const int ids[] = {id};
  EXPECT_THROW(s.step(ids, q2, k, v), InputError);
  const int unknown[] = {3};
  EXPECT_THROW(s.step(unknown, q, k, v), InputError);
  for (int t = 0; t < 8; ++t) s.step(ids, q, k, v);
  EXPECT_THROW(s.step(ids, q, k, v), InputError);  // max_context reached
  SessionOptions gate = options(false);
  gate.mac.accept_eps = 0.5;
  EXPECT_THROW(Session{gate}, InputError);
  SessionOptions f32 = options(false);
  f32.shape.kv_dtype = DType::f32;
  EXPECT_THROW(Session{f32}, InputError);
}

TEST(SessionCuda, FingerprintNamesTheDevice) {
  MACTUNE_REQUIRE_GPU();
  const DeviceFingerprint f = device_fingerprint(0);
  EXPECT_EQ(f.backend, Backend::cuda);
  EXPECT_FALSE(f.name.empty());
  EXPECT_GT(f.compute_units, 0);
  EXPECT_GT(f.memory_mib, 0);
  EXPECT_EQ(f.arch.rfind("sm_", 0), 0u);
  EXPECT_NE(f.runtime.find("runtime"), std::string::npos);
}

}  // namespace
}  // namespace mactune::cuda::testing
