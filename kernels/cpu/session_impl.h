// Private: the state behind cpu::Session (session.cpp: setup and requests; session_step.cpp:
// the decode step). Not installed for users; include session.h instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_api.h"
#include "kernels/cpu/session.h"
#include "kernels/cpu/storage.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/plan.h"
#include "kernels/rope.h"

namespace mactune::cpu {

struct Session::Impl {
  explicit Impl(const SessionOptions& o);

  struct Request {
    bool active = false;
    int len = 0;
    std::vector<std::byte*> pages;  // page table
    Ring ring;                      // allocated on first use of the slot (MAC only)
  };

  SessionOptions opt;
  std::string name;  // canonical instance name, passed to the phase hooks
  Problem shape;
  MacParams mac;
  int Hq, Hkv, G, D;
  Isa isa;
  KernelSet kernels;
  float q_scale;                   // 1/sqrt(D) * log2(e): scores leave the kernel in log2 units
  std::vector<double> inv_freq;    // [D/2] RoPE inverse frequencies, as rope_angles computes them
  std::optional<ThreadPool> pool;  // optional: set_engine() may restart it
  PagedKv kv;
  std::vector<Request> slots;
  std::uint64_t steps = 0;  // step counter of the forced-hit draws (advancing steps only)

  // ---- Step scratch, reused across steps.
  Result result;
  std::vector<int> ids;              // [n] request ids of the step
  std::vector<int> m_of;             // [n] position of the new token
  std::vector<long long> kv_before;  // [n] sum of kv_len over the rows before (forced skip)
  std::vector<float> q_rot;          // [n, Hq, D] post-RoPE, times q_scale
  std::vector<float> q_round;        // [n, Hq, D] pre-RoPE, rounded to the KV dtype
  std::vector<float> k_rot;          // [n, Hkv, D] post-RoPE keys
  RopeAngles rope;                   // [D/2] angles of the request being rotated
  std::vector<int> starts;           // [n, Hq] first position each head attends
  std::vector<float> d2;             // [threads, K] the scan's distances
  std::vector<std::int32_t> dots;    // [threads, K] the pruned match's integer dots
  std::vector<std::uint8_t> keeps;   // [threads, K] the bound's verdicts (SketchArgs::keep)
  std::vector<std::int8_t> q_codes;  // [threads, D] the pruned match's int8 query
  std::vector<float> q_perm;         // [threads, D] its q in dist2_some's order (q_kernel)
  bool pruned = false;               // opt.engine.match_mode == MatchMode::pruned
  struct Candidate {                 // a row the pruned match's bound did not rule out
    int slot, p;
    double lb;  // lower bound on its d2 (prune::lower_bound)
  };
  std::vector<std::vector<Candidate>> candidates;  // [threads][...]
  std::vector<int> pick_slot;                      // [threads] dist2_some's one-slot list
  std::vector<long long> rows_read;                // [threads] ring rows read in full
  std::vector<float> qn;              // [threads, D] normalized query (pick = normalized)
  std::vector<GroupSpan> spans;       // [n, Hkv]
  std::vector<WorkItem> items;        // the plan
  std::vector<WorkItem> plan_arrays;  // the planner's fixed-size arrays (capacity)
  std::vector<GroupItems> merge_plan;
  std::vector<DispatchEntry> dispatch;  // pool task e runs items [first, last)
  int chunk = 0;
  std::vector<float> part_o;     // [items, G, D] partial states
  std::vector<float> part_lse;   // [items, G]
  std::vector<int> gate_slot;    // [n, Hq] index into gate_o/gate_lse, -1 if not rejected
  std::vector<float> gate_o;     // [rejected, D] state over [0, cache_end(p)) of a rejected hit
  std::vector<float> gate_lse;   // [rejected]
  std::vector<float> entry_o;    // [n, Hq, D] new ring entries
  std::vector<float> entry_lse;  // [n, Hq]
  std::vector<float> merge_tmp;  // [threads, 2 D]
  std::vector<int> guard_fires;  // [threads]

  void configure_engine();  // pool, kernels, name and per-thread scratch from opt.engine
  // The sink for a task's own span on a pool worker: workers other than the caller (whose phase
  // span already covers its share) report each task, so a trace has a track per thread.
  PhaseSink* worker_sink(int worker) const { return worker == 0 ? nullptr : opt.phases; }
  Request& request(int id);
  const Request& request(int id) const;
  void step(std::span<const int> requests, std::span<const float> q, std::span<const float> k,
            std::span<const float> v, float* out, bool advance);

 private:
  void check_step(std::span<const int> requests, std::span<const float> q, std::span<const float> k,
                  std::span<const float> v);
  void rope_and_append(std::span<const int> requests, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v);
  void match(std::span<const int> requests);
  void decide_head(const Request& r, int b, int n, int h, int worker);
  // The match of head h at step m over its ring: the exhaustive scan, or the pruned match
  // (prune.h), which decides as the scan does. Set d.hit, d.p and d.d2.
  void match_scan(const Ring& ring, int h, int m, const float* q, HeadDecision& d, int worker);
  void match_pruned(const Ring& ring, int h, int m, const float* q, HeadDecision& d, int worker);
  void plan(int n);
  void attend();
  void attend_item(int i);  // one work item into its partial state
  void gate(std::span<const int> requests);
  void demote_partial_groups(int n);  // group_hits: misses for every head of a partial group
  void merge(std::span<const int> requests, float* out);
  void ring_write(std::span<const int> requests);
};

}  // namespace mactune::cpu
