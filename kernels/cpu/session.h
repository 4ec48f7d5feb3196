// The CPU decode engine: MAC-Attention (DESIGN.md section 1) and the full-attention baseline
// over a paged KV cache, batched, GQA, fp32 accumulation, KV stored as f32, f16 or bf16.
//
//   cpu::SessionOptions opt;
//   opt.shape = {.batch = 8, .q_heads = 32, .kv_heads = 8, .head_dim = 128};
//   cpu::Session s(opt);
//   const int id = s.add_request();
//   const auto& r = s.step({&id, 1}, q, k, v);   // r.out, r.decisions, r.groups, r.stats
//
// One step: RoPE and KV append; match of every eligible head over its ring (forced decisions
// in benchmark mode); a plan of work items over each group's span, split at cache_end(m);
// attention of all G heads of a group per item (one pass over each K/V row, heads masking
// below their own start); merge per head in plan order (ring summary, items below cache_end
// = the new ring entry, then the tail = the output); the ring write. Semantics equal
// ref::Session (kernels/reference.h) up to fp32 arithmetic.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/engine_config.h"
#include "kernels/cpu/instances.h"  // instances(), instance_name(): the engine's descriptions
#include "kernels/session.h"

namespace mactune::cpu {

using SessionOptions = mactune::SessionOptions<EngineConfig>;

// Returns "" when the options are valid for the CPU engine, else one sentence naming the bad
// value (head_dim 64/128/256, G = q_heads / kv_heads in 1..16, knobs in range, the ISA).
std::string validate(const SessionOptions& opt);

// Arena recycling, for a process that builds and drops sessions one after another (the tuner,
// the benchmarks): arenas freed by a PagedKv are kept, up to `bytes` in all, and handed to the
// next PagedKv whose arenas have the same size and dtype, instead of fresh memory. Fresh
// memory costs its page faults: the kernel zeroes every huge page on first touch, which on the
// 2-vCPU build VM was a third of a tune's wall time (perf, 2026-12-01). A recycled arena holds
// the finite values of its last owner (same dtype: rows past a request's length stay finite).
// The cache holds arenas of one size and dtype: taking another kind empties it. Off (0) by
// default: a library user's memory goes back to the OS when a session ends. Thread-safe.
void set_arena_cache_bytes(std::size_t bytes);
std::size_t arena_cache_held_bytes();  // what the cache holds now (counted as in use by the OS)

// One ring entry read back (tests, tools): pos = -1 when the slot holds nothing yet.
struct RingEntryView {
  int pos = -1;
  std::vector<float> q;  // [D] pre-RoPE query as stored (KV dtype)
  std::vector<float> o;  // [D] summary o as stored (summary dtype)
  float lse = 0.0f;      // natural log; -inf for an empty summary
};

// The CPU engine; it satisfies the session contract (kernels/session.h, DecodeSession).
class Session {
 public:
  using Engine = EngineConfig;
  using Result = StepResult;

  explicit Session(const SessionOptions& opt);  // bad options throw InputError naming the value
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  int add_request();  // the lowest free slot; throws InputError when all shape.batch are taken
  void release_request(int id);  // frees its KV pages for other requests
  int length(int id) const;      // tokens in its KV = the next position m

  // One decode step for requests[0..n) (distinct ids): pre-RoPE q [n, Hq, D], k and v
  // [n, Hkv, D], fp32. Appends KV at m = length(id), applies RoPE, runs MAC (or full
  // attention), writes the ring entry. advance = false does the same work and writes but
  // leaves every position (and the forced-hit step counter) where it was, so the same step
  // can be timed again and again. Buffers are reused across steps; the reference stays valid
  // until the next call.
  const Result& step(std::span<const int> requests, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, bool advance = true);
  // The same, writing the outputs into a caller buffer [n, Hq, D] instead of Result::out.
  const Result& step_into(std::span<const int> requests, std::span<const float> q,
                          std::span<const float> k, std::span<const float> v, std::span<float> out,
                          bool advance = true);

  // Benchmark setup without computing attention: the request's KV becomes `len` tokens of
  // random values (never zeros), and the ring holds entries for the last K positions (random
  // q, random summary o, an lse near ln(cache_end(p))); empty summaries where cache_end(p) = 0,
  // as the algorithm has them. Deterministic in seed.
  void prefill_synthetic(int id, int len, std::uint64_t seed);

  // Changes between steps, without touching the KV cache or the rings, so that one prefilled
  // session serves a whole sweep: the forced-hit mode (the step counter of its draws is kept),
  // and the launch parameters (a new thread count restarts the pool; a new ISA switches the
  // kernel table and the instance name). Invalid values throw InputError like the constructor.
  void set_forced(const ForcedHits& forced);
  void set_engine(const EngineConfig& engine);

  // "mac_cpu_avx2_hd128_bf16" / "full_cpu_avx2_hd128_bf16".
  std::string instance_name() const;
  const SessionOptions& options() const;
  std::string isa() const;  // the path that runs: "avx512", "avx2" or "generic"
  int threads() const;      // workers in the pool, the caller included

  // The ring entry in the slot of `pos` for (request, query head): its pos says whether it is
  // the entry of `pos` (the slot may hold an older position or nothing).
  RingEntryView ring_entry(int id, int head, int pos) const;
  // Post-RoPE key and value of (request, KV head, position) as stored, widened to float.
  void read_kv(int id, int kv_head, int pos, std::span<float> k, std::span<float> v) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

static_assert(DecodeSession<Session>);

}  // namespace mactune::cpu
