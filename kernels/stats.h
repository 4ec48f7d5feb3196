// What a decode step decided and read: per-head decisions, per-group modes and the modeled
// bytes, shared by the fp64 reference, the CPU engine and the CUDA kernels.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/config.h"
#include "kernels/problem.h"

namespace mactune {

// One query head's decision at step m. start = first KV position attended freshly.
struct HeadDecision {
  bool eligible = false;       // m >= min_context (a match ran)
  bool hit = false;            // reuses ring[p] (after the acceptance gate)
  bool gate_rejected = false;  // matched, but the gate sent it back to a miss
  int p = -1;                  // matched position (hits only)
  float d2 = 0.0f;             // squared distance of the best candidate (eligible heads)
  int start = 0;               // cache_end(p) on a hit, 0 on a miss
};

// MacParams::group_hits: a KV group (its G heads' decisions) keeps its hits only if every
// eligible head of it hits; otherwise each hit becomes a plain miss (demote_to_miss), not a
// gate rejection: the group reads all of its KV anyway. The one rule of the fp64 reference, the
// CPU engine and the CUDA planner (host and device).
MACTUNE_HD inline bool group_keeps_hits(std::span<const HeadDecision> group) {
  for (const HeadDecision& d : group)
    if (d.eligible && !d.hit) return false;
  return true;
}
MACTUNE_HD inline void demote_to_miss(HeadDecision& d) {
  d.hit = false, d.p = -1, d.start = 0;
}

enum class GroupMode : std::uint8_t { all_hit, mixed, all_miss };

template <>
struct EnumNames<GroupMode> {
  static constexpr std::string_view what = "group mode";
  static constexpr EnumName<GroupMode> names[] = {{GroupMode::all_hit, "all-hit"},
                                                  {GroupMode::mixed, "mixed"},
                                                  {GroupMode::all_miss, "all-miss"}};
};

// One (request, KV head) group: it streams KV over [begin, kv_len), each head masking below
// its own start; the ring snapshot falls at cache_end.
struct GroupInfo {
  GroupMode mode = GroupMode::all_miss;
  bool eligible = false;
  int begin = 0;      // min over the group's heads of start
  int cache_end = 0;  // cache_end(m)
  int kv_len = 0;     // m + 1
  int tokens_read() const { return kv_len - begin; }
};

// Totals of one step (all groups and heads of the batch).
struct StepStats {
  long long kv_tokens_read = 0;     // sum over groups of kv_len - begin
  long long kv_tokens_total = 0;    // sum over groups of kv_len
  long long head_tokens_read = 0;   // sum over heads of kv_len - start
  long long head_tokens_total = 0;  // sum over heads of kv_len
  long long kv_bytes_read = 0;      // tokens read x 2 D sizeof(kv)
  long long ring_bytes_read = 0;    // ring q scanned by match + summaries of hits
  long long bytes_written = 0;      // outputs, ring entries, appended KV
  // Ring rows the match read in full (the CPU engine's; others leave it 0): every candidate
  // slot with match = scan, the rows the bound could not rule out with match = pruned.
  long long match_rows_read = 0;
  int eligible_heads = 0, hit_heads = 0, gate_rejections = 0, guard_fires = 0;
  int eligible_groups = 0, groups_all_hit = 0, groups_mixed = 0, groups_all_miss = 0;

  double skip_ratio() const {  // 1 - KV tokens read / sum of kv_len, per group
    return kv_tokens_total ? 1.0 - double(kv_tokens_read) / double(kv_tokens_total) : 0.0;
  }
  double head_skip_ratio() const {
    return head_tokens_total ? 1.0 - double(head_tokens_read) / double(head_tokens_total) : 0.0;
  }
  long long modeled_bytes() const { return kv_bytes_read + ring_bytes_read + bytes_written; }
};

// Ring candidates scanned by one eligible head at step m: positions [m - K, m) that exist.
inline int match_candidates(int m, int ring_capacity) {
  return m < ring_capacity ? m : ring_capacity;
}

// Builds the group modes and the step totals from per-head decisions of one request.
// decisions: [q_heads] of this request; appends kv_heads entries to `groups`.
inline void account_request(const Problem& shape, const MacParams& mac, int m,
                            const HeadDecision* decisions, std::vector<GroupInfo>& groups,
                            StepStats& s, bool writes_ring = true, int out_bytes_per_elem = 4) {
  const int G = shape.group_size();
  const int D = shape.head_dim;
  const int kv_len = m + 1;
  const long long kv_tok_bytes = 2LL * D * static_cast<long long>(dtype_size(shape.kv_dtype));
  const long long q_ring_bytes = static_cast<long long>(D) * dtype_size(shape.kv_dtype);
  const long long summary_bytes = static_cast<long long>(D) * dtype_size(mac.summary_dtype) + 4;
  for (int g = 0; g < shape.kv_heads; ++g) {
    GroupInfo gi;
    gi.kv_len = kv_len;
    gi.cache_end = cache_end(m, mac.band);
    gi.begin = kv_len;
    int hits = 0;
    for (int j = 0; j < G; ++j) {
      const HeadDecision& d = decisions[g * G + j];
      gi.eligible = gi.eligible || d.eligible;
      gi.begin = d.start < gi.begin ? d.start : gi.begin;
      hits += d.hit ? 1 : 0;
      s.head_tokens_read += kv_len - d.start;
      s.head_tokens_total += kv_len;
      if (d.eligible) {
        ++s.eligible_heads;
        s.ring_bytes_read += match_candidates(m, mac.ring_capacity) * q_ring_bytes;
      }
      if (d.hit) {
        ++s.hit_heads;
        s.ring_bytes_read += summary_bytes;
      }
      if (d.gate_rejected) ++s.gate_rejections;
    }
    gi.mode = hits == G ? GroupMode::all_hit : hits == 0 ? GroupMode::all_miss : GroupMode::mixed;
    if (gi.eligible) ++s.eligible_groups;
    (gi.mode == GroupMode::all_hit    ? s.groups_all_hit
     : gi.mode == GroupMode::all_miss ? s.groups_all_miss
                                      : s.groups_mixed) += 1;
    s.kv_tokens_read += gi.tokens_read();
    s.kv_tokens_total += kv_len;
    s.kv_bytes_read += gi.tokens_read() * kv_tok_bytes;
    s.bytes_written += kv_tok_bytes;  // the appended token
    groups.push_back(gi);
  }
  // Outputs (and ring entries) of every head.
  const long long per_head = static_cast<long long>(D) * out_bytes_per_elem +
                             (writes_ring ? q_ring_bytes + summary_bytes : 0);
  s.bytes_written += static_cast<long long>(shape.q_heads) * per_head;
}

}  // namespace mactune
