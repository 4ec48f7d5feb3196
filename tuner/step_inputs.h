// The inputs of one tuner point's step, shared by every backend: each request prefilled to the
// point's context (its own seed), and one random pre-RoPE q, k, v for the new token. Random and
// never zero, and the same for both sides of a point (MAC and its baseline get the same seed),
// so their outputs and times compare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "tuner/grid.h"

namespace mactune::tuner {

struct StepInputs {
  std::vector<int> ids;        // the requests, in step order
  std::vector<float> q, k, v;  // [batch, q_heads, D], [batch, kv_heads, D] x 2
};

// Adds p.shape.batch requests to `session` (a cpu::Session or cuda::Session), prefills each
// with synthetic KV of p.context tokens, and draws the step's q, k, v from `seed`.
template <class Session>
StepInputs prepare_step(Session& session, const TunePoint& p, std::uint64_t seed) {
  StepInputs in;
  const int n = p.shape.batch;
  for (int i = 0; i < n; ++i) {
    in.ids.push_back(session.add_request());
    session.prefill_synthetic(in.ids.back(), p.context,
                              seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i + 1));
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.25f, 1.0f);
  auto fill = [&](std::vector<float>& x, int heads) {
    x.resize(static_cast<std::size_t>(n) * heads * p.shape.head_dim);
    for (float& e : x) e = (rng() & 1 ? 1.0f : -1.0f) * u(rng);
  };
  fill(in.q, p.shape.q_heads);
  fill(in.k, p.shape.kv_heads);
  fill(in.v, p.shape.kv_heads);
  return in;
}

}  // namespace mactune::tuner
