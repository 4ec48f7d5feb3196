// The session contract: what every decode engine (cpu::Session, cuda::Session) offers, so the
// tuner, the profiler, replay and a serving engine drive any of them through one API.
//
//   mactune::cpu::SessionOptions opt;          // = SessionOptions<cpu::EngineConfig>
//   opt.shape = {.batch = 8, .q_heads = 32, .kv_heads = 8, .head_dim = 128};
//   mactune::cpu::Session s(opt);
//   const int id = s.add_request();
//   s.prefill_synthetic(id, 4096, seed);       // or real steps
//   const mactune::StepResult& r = s.step({&id, 1}, q, k, v);   // r.out, r.decisions, r.stats
//
// Synthetic inputs for benchmarks and traces come from one generator (below), so a tuner point
// and a profiled loop of the same shape and seed run over the same data.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/forced.h"
#include "kernels/phase.h"
#include "kernels/problem.h"
#include "kernels/rope.h"
#include "kernels/stats.h"

namespace mactune {

// Everything a session is built from; `Engine` is the backend's launch configuration
// (cpu::EngineConfig, cuda::EngineConfig).
template <class Engine>
struct SessionOptions {
  Problem shape;  // shape.batch = request slots the session holds
  MacParams mac;
  bool mac_enabled = true;  // false: the full-attention baseline (no match, no ring)
  double rope_theta = kDefaultRopeTheta;
  ForcedHits forced;  // benchmark mode (kernels/forced.h): exact hit quota, real scan still runs
  Engine engine;
  int max_context = 1 << 17;    // KV capacity per request (tokens); steps past it throw InputError
  PhaseSink* phases = nullptr;  // hooks: step, rope, append, match, plan, attend, merge, ring_write
};

// What one decode step of n requests returns.
struct StepResult {
  std::vector<float> out;               // [n, q_heads, head_dim] (empty after step_into)
  std::vector<HeadDecision> decisions;  // [n, q_heads]
  std::vector<GroupInfo> groups;        // [n, kv_heads]
  StepStats stats;
};

// The part of the contract a loop of steps needs: step(requests, q, k, v, advance) over
// pre-RoPE q [n, Hq, D] and the new k, v [n, Hkv, D] (fp32), and the instance name.
template <class S>
concept StepSession = requires(S& s, std::span<const int> ids, std::span<const float> x) {
  { s.step(ids, x, x, x, true) } -> std::same_as<const StepResult&>;
  { std::as_const(s).instance_name() } -> std::convertible_to<std::string>;
};

// The whole contract. step(..., advance = false) does the same work and writes, but leaves
// every position (and the forced-hit step counter) where it was, so one step can be timed
// again and again. prefill_synthetic(id, len, seed) makes `len` tokens of random KV (never
// zeros) and valid ring entries for the last K positions, deterministic in seed. set_forced
// and set_engine change a live session without touching its KV or rings.
template <class S>
concept DecodeSession = StepSession<S> &&
    requires(S& s, const S& cs, int id, std::span<const int> ids, std::span<const float> x,
             std::span<float> out, std::uint64_t seed, const ForcedHits& forced,
             const typename S::Engine& engine) {
  { cs.options() } -> std::same_as<const SessionOptions<typename S::Engine>&>;
  { s.add_request() } -> std::same_as<int>;
  s.release_request(id);
  { cs.length(id) } -> std::same_as<int>;
  s.prefill_synthetic(id, id, seed);
  { s.step_into(ids, x, x, x, out, true) } -> std::same_as<const StepResult&>;
  s.set_forced(forced);
  s.set_engine(engine);
};

// ---- Synthetic inputs: one generator for every benchmark and trace.
//
// Values are +-U[0.25, 1): random signs, magnitudes bounded away from zero (no element, and so
// no q or k vector, is near zero), drawn by std::mt19937_64 from the seed. This is what the
// tuner has always measured with: every point stored in a database keeps meaning the same data.

struct StepInputs {
  std::vector<int> ids;        // the requests, in step order
  std::vector<float> q, k, v;  // [n, q_heads, D], [n, kv_heads, D] x 2
};

// The pre-RoPE q and the new k, v of one step of `n` requests of `shape`, from `seed`.
inline StepInputs synthetic_step(const Problem& shape, int n, std::uint64_t seed) {
  StepInputs in;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  auto fill = [&](std::vector<float>& x, int heads) {
    x.resize(static_cast<std::size_t>(n) * heads * shape.head_dim);
    for (float& e : x) e = (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  };
  fill(in.q, shape.q_heads);
  fill(in.k, shape.kv_heads);
  fill(in.v, shape.kv_heads);
  return in;
}

// The seed of step `step` of a loop seeded with `seed` (step 0 is `seed` itself).
constexpr std::uint64_t step_seed(std::uint64_t seed, int step) {
  return step == 0 ? seed : detail::splitmix64(seed ^ (0x9e3779b97f4a7c15ull * unsigned(step)));
}

// Adds `n` requests to `session`, each prefilled with `context` tokens of synthetic KV (its
// own seed, derived from `seed`), and draws the first step's q, k, v from `seed`.
template <DecodeSession S>
StepInputs prefilled_step(S& session, int n, int context, std::uint64_t seed) {
  StepInputs in = synthetic_step(session.options().shape, n, seed);
  for (int i = 0; i < n; ++i) {
    in.ids.push_back(session.add_request());
    session.prefill_synthetic(in.ids.back(), context,
                              seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1));
  }
  return in;
}

}  // namespace mactune
