// Kernel parameter blocks of a CUDA decode step. Each kernel takes one of these by value as a
// `const __grid_constant__` argument. Everything that changes from step to step (positions,
// the step counter, decisions, the plan) lives in device memory, so a captured graph replays
// correctly; these blocks hold only pointers and per-session constants. Plain C++ (no CUDA
// headers): host code fills them.
//
// Layouts (elements; 16-bit types stored as bf16_t / f16_t bits):
//   KV pools      [pages, kv_heads, page_size, D] via the strides below; page_table maps
//                 (request slot, position / page_size) to a page
//   ring q        [slots, q_heads, K, D] in the KV dtype (pre-RoPE queries q~)
//   ring o        [slots, q_heads, K, D] in the summary dtype; ring lse [slots, q_heads, K] f32
//   ring pos      [slots, K] int32: the position each slot holds (-1: none)
//   ring sketch   (match_mode = pruned) codes [slots, q_heads, K, D/2] bytes, scale, c2, err
//                 [slots, q_heads, K] f32: each entry's 4-bit copy (kernels/cpu/prune.h)
#pragma once

#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/forced.h"
#include "kernels/plan.h"
#include "kernels/problem.h"
#include "kernels/stats.h"

namespace mactune::cuda {

// One row of a step's batch: the request slot it runs for and its position m (kv_len = m + 1).
struct StepRow {
  std::int32_t slot = 0;
  std::int32_t m = 0;
};

// Per-step values the host uploads with the inputs (device memory, read by the kernels).
struct StepHeader {
  std::uint64_t step = 0;  // step counter: the forced-hit draws are functions of it
};

struct KvCache {
  void* k = nullptr;
  void* v = nullptr;
  long long stride_page = 0, stride_head = 0, stride_token = 0;  // elements
  const std::int32_t* page_table = nullptr;                      // [slots, pages_per_request]
  std::int32_t pages_per_request = 0;
  std::int32_t page_size = 0;
};

struct RingBuffers {
  void* q = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  std::int32_t* pos = nullptr;
  std::int32_t capacity = 0;  // K
  DType summary_dtype = DType::f32;
};

// Best candidate of one match tile (or of a whole head after the reduction).
struct MatchPartial {
  float d2;             // smallest fully evaluated squared distance (+inf: none)
  std::int32_t pos;     // its position (-1: none); ties go to the older position
  std::int32_t newest;  // newest position with d2 < threshold (-1: none)
  float bound;          // probe: smallest first-half lower bound of a skipped candidate
};

// prepare: RoPE of q and k (angles in double, as the reference), q~ rounded to the KV dtype,
// and the new K/V token appended at position m of each row.
struct PrepareParams {
  const StepRow* rows = nullptr;
  const float* q_in = nullptr;  // [n, q_heads, D] pre-RoPE
  const float* k_in = nullptr;  // [n, kv_heads, D] pre-RoPE
  const float* v_in = nullptr;  // [n, kv_heads, D]
  void* q_ring_out = nullptr;   // [n, q_heads, D] q~ in the KV dtype
  float* q_rot_out = nullptr;   // [n, q_heads, D] post-RoPE queries
  KvCache kv;
  std::int32_t q_heads = 0, kv_heads = 0, head_dim = 0;
  DType kv_dtype = DType::bf16;
  double rope_theta = 10000.0;
};

struct MatchParams {
  RingBuffers ring;
  const StepRow* rows = nullptr;
  const void* q_ring_in = nullptr;    // [n, q_heads, D] this step's q~
  MatchPartial* partials = nullptr;   // [n, q_heads, tiles]
  std::uint32_t* counters = nullptr;  // [n, q_heads] zero between launches (the last tile resets)
  MatchPartial* best = nullptr;       // [n, q_heads] the reduced scan of each eligible head
  std::int32_t n = 0, q_heads = 0;
  std::int32_t candidates_per_cta = 0, tiles = 0;
  float threshold = 0.0f;  // 2 D (1 - tau)^2 (0 when tau >= 1: nothing can hit)
  PickRule pick = PickRule::nearest;
  std::int32_t min_context = 0;
};

// The planner also turns each head's reduced scan into its decision (MAC): eligibility, the
// pick rule, the forced-hit override (kernels/forced.h) and start = cache_end(p).
struct PlanParams {
  const StepHeader* header = nullptr;
  const StepRow* rows = nullptr;
  const MatchPartial* match_best = nullptr;  // [n, q_heads] (MAC)
  HeadDecision* decisions = nullptr;         // [n, q_heads] written here; null: full attention
  RingBuffers ring;                          // pos and lse: validity of a forced hit's entry
  float threshold = 0.0f;
  PickRule pick = PickRule::nearest;
  std::int32_t min_context = 0;
  ForcedHits forced;
  bool group_hits = false;                // a group with an eligible miss misses in every head
  GroupSpan* spans = nullptr;             // [n, kv_heads]
  WorkItem* items = nullptr;              // [capacity]
  GroupItems* merge_plan = nullptr;       // [n, kv_heads]
  DispatchEntry* dispatch = nullptr;      // [capacity]
  PlanChoice* choice = nullptr;           // device scalar: kind, chunk, items, entries, makespan
  std::int32_t* error = nullptr;          // device scalar, set when the plan overflows
  std::uint32_t* work_counter = nullptr;  // the attend kernel's ticket counter, zeroed here
  std::int32_t n = 0, q_heads = 0, kv_heads = 0, group = 0, band = 0;
  PlanLimits limits;  // attend_limits(budget, min_chunk)
  std::int32_t capacity = 0;
};

struct AttendParams {
  KvCache kv;
  const StepRow* rows = nullptr;
  const float* q_rot = nullptr;             // [n, q_heads, D]
  const HeadDecision* decisions = nullptr;  // per-head starts (attend); unused by full
  const WorkItem* items = nullptr;          // [capacity]
  const DispatchEntry* dispatch = nullptr;  // [capacity]: entry e = items [first, last)
  const PlanChoice* choice = nullptr;       // device scalar: choice->entries entries
  std::uint32_t* work_counter = nullptr;    // tickets for entries past the grid (plan zeroes it)
  float* partial_o = nullptr;               // [capacity, group, D] normalized
  float* partial_lse = nullptr;             // [capacity, group] natural log
  std::int32_t q_heads = 0, kv_heads = 0, group = 0;
  float q_scale = 0.0f;  // 1/sqrt(D) * log2(e): scores come out in the exp2 domain
};

struct MergeParams {
  RingBuffers ring;
  const StepRow* rows = nullptr;
  const void* q_ring_in = nullptr;          // [n, q_heads, D] this step's q~ (for the ring)
  const HeadDecision* decisions = nullptr;  // null: full attention (no prefix, no ring write)
  const GroupItems* merge_plan = nullptr;
  const float* partial_o = nullptr;
  const float* partial_lse = nullptr;
  float* out = nullptr;                 // [n, q_heads, D]
  std::int32_t* guard_fired = nullptr;  // [n, q_heads] subtract mode: 1 when the guard fired
  std::int32_t n = 0, q_heads = 0, kv_heads = 0, group = 0, band = 0;
  Rectify rectify = Rectify::forward;
  float subtract_guard = 1e-4f;
};

// Synthetic prefill of one request slot: random KV over [0, len) (never zero) and valid ring
// entries for its last K positions.
// The pruned match (detail/match_pruned.cuh): each ring entry's 4-bit sketch, as
// kernels/cpu/prune.h quantize() writes it, kept current by the sketch kernel after each ring
// write (launch_sketch).
inline constexpr int kPrunedMaxCapacity = 4096;  // ring capacity a CTA's survivor list holds

struct PrunedSketch {
  const std::uint8_t* codes = nullptr;  // [slots, q_heads, K, D/2]
  const float* scale = nullptr;         // [slots, q_heads, K]
  const float* c2 = nullptr;
  const float* err = nullptr;
};

struct PrunedMatchParams {
  RingBuffers ring;  // q [slots, q_heads, K, D] (16-bit KV dtype), pos [slots, K], lse
  PrunedSketch sketch;
  const StepRow* rows = nullptr;
  const void* q_ring_in = nullptr;    // [n, q_heads, D] this step's q~
  MatchPartial* best = nullptr;       // [n, q_heads]
  std::int32_t* rows_read = nullptr;  // [n, q_heads] rows read in full (optional)
  std::int32_t n = 0, q_heads = 0;
  float threshold = 0.0f;  // 2 D (1 - tau)^2 in fp32, as MatchParams (the scan compares in fp32)
  std::int32_t min_context = 0;
};

// Writes the sketch of ring entries from their stored q~: with `rows`, slot m mod K of every
// (row, query head) of the step (after the merge wrote it); without, every entry of the request
// slots [slot, slot + slots) (a prefill, or a switch to the pruned match).
struct SketchParams {
  const void* ring_q = nullptr;  // [slots, q_heads, K, D] in kv_dtype
  std::uint8_t* codes = nullptr;
  float* scale = nullptr;
  float* c2 = nullptr;
  float* err = nullptr;
  const StepRow* rows = nullptr;
  std::int32_t n = 0;
  std::int32_t slot = 0, slots = 0;
  std::int32_t q_heads = 0, capacity = 0, head_dim = 0;
  DType kv_dtype = DType::bf16;
};

struct SyntheticParams {
  KvCache kv;
  RingBuffers ring;  // ring.q == nullptr: no ring (full attention)
  std::int32_t slot = 0, len = 0, q_heads = 0, kv_heads = 0, head_dim = 0, band = 0;
  DType kv_dtype = DType::bf16;
  std::uint64_t seed = 0;
};

}  // namespace mactune::cuda
