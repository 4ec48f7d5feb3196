// Work planning of a decode step: split each (request, KV head) group's span into work items and
// say which worker runs which. One algorithm and one policy for both engines: the CPU engine
// runs it on the host, the CUDA engine inside its step (one CTA, kernels/cuda/plan_kernel.cu),
// and kernels/plan_model.h replays its schedule on the host. Every function here is integer
// arithmetic callable on the host and the device, so all three get bit-identical plans.
//
// Items of a group never straddle cache_end(m): the items below it form the new ring entry
// (merged in order), the items above it are the tail. A group has two segments, [begin,
// cache_end) and [cache_end, kv_len); an item is a piece of one segment.
//
// Two plans are made and the one with the smaller predicted makespan is kept (cost of an item =
// item_cost + tokens x token_cost, workers all equal):
//   uniform   every segment in ceil(len / chunk) equal pieces; "big" pieces (of segments longer
//             than chunk / 2) are handed out first, then the small ones. The chunk is the best
//             of 2 x max_waves candidates under a list-scheduling estimate that is exact for two
//             classes of equal items. Best when there is little work per worker.
//   balanced  the segments laid end to end on a cost axis (each starts with its item_cost) and
//             cut into parts of equal cost, one dispatch entry per part; cuts inside a segment
//             fall on multiples of min_chunk tokens. Best when each worker has many items' worth.
// Dispatch: entries are ranges of items run in order by one worker. Worker c < workers starts
// with entry c; a worker that finishes takes the next unclaimed entry (first_claim/next_claim:
// an atomic ticket on the GPU, the pool's cursor on the CPU). Why not the three alternatives
// alone: docs/cuda-kernels.md "Load balance".
#pragma once

#include <cstdint>

#include "kernels/config.h"

namespace mactune {

// One (request, KV head) group of a decode step.
struct GroupSpan {
  std::int32_t batch_index = 0;  // row of the request in the step's batch
  std::int32_t kv_head = 0;
  std::int32_t begin = 0;      // first position any head of the group reads: min_h start_h
  std::int32_t cache_end = 0;  // cache_end(m): the ring snapshot boundary, begin <= cache_end
  std::int32_t kv_len = 0;     // m + 1
};

// All G heads of one group over [kv_begin, kv_end): one CPU task's or one CTA's unit of work.
struct WorkItem {
  std::int32_t group = 0;  // index into the GroupSpan array
  std::int32_t batch_index = 0;
  std::int32_t kv_head = 0;
  std::int32_t kv_begin = 0;
  std::int32_t kv_end = 0;
};

// Merge plan of one group: items [first, split) lie below cache_end and, merged in order
// (after the ring summary on a hit), give the new ring entry; items [split, last) are the
// tail, merged after it into the output. Heads mask below their own start, so an item wholly
// below a head's start yields an empty partial for that head.
struct GroupItems {
  std::int32_t first = 0, split = 0, last = 0;
};

// Items [first, last), run in order by one worker.
struct DispatchEntry {
  std::int32_t first = 0, last = 0;
};

// What the planner may use and what work costs: cost units are any one unit (KV-token
// equivalents by default); only the ratio of the two costs matters.
struct PlanLimits {
  std::int32_t workers = 1;           // items that run at once: resident CTAs, or CPU threads
  std::int32_t max_waves = 8;         // uniform plans: candidates for 1..max_waves waves
  std::int32_t parts_per_worker = 1;  // balanced plans: parts = workers x this
  std::int32_t min_chunk = 128;       // no item shorter than this unless its segment is
  std::int32_t token_cost = 1;        // one KV position of one group (all G heads)
  std::int32_t item_cost = 128;       // one item's start, partial state and merge
};

// The planning policy of each engine: the numbers are here, nowhere else.
//   CUDA: workers = resident attend CTAs (occupancy x SMs); an item costs 128 token-equivalents
//   (the MAC reference's persistent kernel plans with 128; a lease calibrates it, see
//   docs/gpu-results.md); 8 candidate wave counts (the plan kernel's 32 warps search 16 chunks).
//   CPU: one part per thread is fragile when a thread is descheduled (a shared machine), so
//   16 parts a thread, claimed dynamically by the pool: a late thread leaves at most 1/16 of
//   its share to the others; an item (a kernel call) costs about 64 tokens.
MACTUNE_HD inline PlanLimits cuda_plan_limits(std::int32_t resident_ctas, std::int32_t min_chunk) {
  PlanLimits l;
  l.workers = resident_ctas < 1 ? 1 : resident_ctas;
  l.max_waves = 8;
  l.parts_per_worker = 1;
  l.min_chunk = min_chunk < 1 ? 1 : min_chunk;
  l.item_cost = 128;
  return l;
}
MACTUNE_HD inline PlanLimits cpu_plan_limits(std::int32_t threads, std::int32_t chunk_tokens) {
  PlanLimits l;
  l.workers = threads < 1 ? 1 : threads;
  l.max_waves = 8;
  l.parts_per_worker = 16;
  l.min_chunk = chunk_tokens < 1 ? 1 : chunk_tokens;
  l.item_cost = 64;
  return l;
}

enum class PlanKind : std::int32_t { uniform = 0, balanced = 1 };

struct PlanChoice {
  PlanKind kind = PlanKind::balanced;
  std::int32_t chunk = 0;     // uniform: the chunk; balanced: 0
  std::int32_t items = 0;     // -1: the arrays were too small
  std::int32_t entries = 0;   // dispatch entries
  std::int64_t makespan = 0;  // predicted, in cost units
};

// ---- The dispatch rule (the attend kernel, the CPU pool and plan_model.h all apply it).

MACTUNE_HD inline std::int32_t first_claim(std::int32_t worker) {
  return worker;
}
MACTUNE_HD inline std::int32_t next_claim(std::int32_t workers, std::int32_t ticket) {
  return workers + ticket;
}

// ---- Capacities of the fixed-size arrays a plan is written into.

MACTUNE_HD inline std::int32_t plan_parts(const PlanLimits& l) {
  return l.workers * l.parts_per_worker;
}
// Items of any plan of n groups: uniform <= max_waves x workers + 2n (the small segments are
// one item each), balanced <= 2n + parts - 1.
MACTUNE_HD inline std::int32_t plan_capacity(std::int32_t n, const PlanLimits& l) {
  const std::int64_t u = static_cast<std::int64_t>(l.max_waves) * l.workers + 2ll * n;
  const std::int64_t b = 2ll * n + plan_parts(l);
  const std::int64_t c = u > b ? u : b;
  return c > (1 << 30) ? (1 << 30) : static_cast<std::int32_t>(c);
}

// ---- Segments and equal pieces.

MACTUNE_HD inline std::int32_t segment_begin(const GroupSpan& g, int seg) {
  return seg == 0 ? g.begin : g.cache_end;
}
MACTUNE_HD inline std::int32_t segment_len(const GroupSpan& g, int seg) {
  return seg == 0 ? g.cache_end - g.begin : g.kv_len - g.cache_end;
}
// Pieces of a segment at `chunk`: ceil(len / chunk), but never pieces under min_chunk tokens.
MACTUNE_HD inline std::int64_t pieces_of(std::int32_t len, std::int32_t chunk,
                                         std::int32_t min_chunk) {
  if (len <= 0) return 0;
  const std::int64_t k = (static_cast<std::int64_t>(len) + chunk - 1) / chunk;
  const std::int64_t most = len / min_chunk;
  return k < most ? k : (most > 1 ? most : 1);
}
// Piece i of k of a segment of `len` tokens starts this many tokens in (k equal pieces).
MACTUNE_HD inline std::int32_t piece_start(std::int32_t len, std::int64_t k, std::int64_t i) {
  return static_cast<std::int32_t>(i * len / k);
}
// A segment's pieces are big when they are longer than half the chunk: every piece of a
// segment longer than the chunk is, a segment at most half the chunk is one small piece.
MACTUNE_HD inline bool big_segment(std::int32_t len, std::int32_t chunk) {
  return 2ll * len > chunk;
}
MACTUNE_HD inline std::int64_t item_cost_of(std::int32_t tokens, const PlanLimits& l) {
  return l.item_cost + static_cast<std::int64_t>(tokens) * l.token_cost;
}
MACTUNE_HD inline std::int32_t longest_segment(const GroupSpan& g) {
  const std::int32_t a = segment_len(g, 0), b = segment_len(g, 1);
  return a > b ? a : b;
}

// ---- Uniform plans.

// Items of a group at chunk `chunk` (family 0: all; family 1: the big ones only). Both do not
// grow with the chunk, so the smallest chunk whose plan fits a budget is a binary search.
MACTUNE_HD inline std::int64_t group_items(const GroupSpan& g, std::int32_t chunk,
                                           std::int32_t min_chunk, int family) {
  std::int64_t n = 0;
  for (int seg = 0; seg < 2; ++seg) {
    const std::int32_t len = segment_len(g, seg);
    if (family == 0 || big_segment(len, chunk)) n += pieces_of(len, chunk, min_chunk);
  }
  return n;
}

// What the estimate needs of a uniform plan: sums and maxima over the groups.
struct UniformStats {
  std::int64_t big_items = 0, big_max = 0;      // big pieces, and the longest (tokens)
  std::int64_t small_items = 0, small_max = 0;  // small pieces (one a segment), the longest
  MACTUNE_HD void add(const GroupSpan& g, std::int32_t chunk, std::int32_t min_chunk) {
    for (int seg = 0; seg < 2; ++seg) {
      const std::int32_t len = segment_len(g, seg);
      if (len <= 0) continue;
      const std::int64_t k = pieces_of(len, chunk, min_chunk), longest = (len + k - 1) / k;
      if (big_segment(len, chunk)) {
        big_items += k;
        big_max = longest > big_max ? longest : big_max;
      } else {
        small_items += k;
        small_max = longest > small_max ? longest : small_max;
      }
    }
  }
  MACTUNE_HD void merge(const UniformStats& o) {
    big_items += o.big_items;
    small_items += o.small_items;
    big_max = o.big_max > big_max ? o.big_max : big_max;
    small_max = o.small_max > small_max ? o.small_max : small_max;
  }
};

// Makespan of list scheduling the big items (each taken as the longest) and then the small ones
// (likewise) on `workers` equal workers: exact for two classes of equal items. The big items
// fill floor(F / M) waves; then M - k workers are free at t0 and k at t1 = t0 + P; the small
// items take the earliest Ns of the slots t0 + iQ (M - k of each) and t1 + jQ (k of each).
MACTUNE_HD inline std::int64_t uniform_estimate(const UniformStats& s, const PlanLimits& l) {
  const std::int64_t M = l.workers, F = s.big_items, Ns = s.small_items;
  const std::int64_t P = l.item_cost + s.big_max * l.token_cost;
  const std::int64_t Q = l.item_cost + s.small_max * l.token_cost;
  const std::int64_t k = F % M, t0 = (F / M) * P, t1 = t0 + P;
  const std::int64_t big_end = F == 0 ? 0 : (k ? t1 : t0);
  if (Ns == 0) return big_end;
  const std::int64_t a = M - k;
  std::int64_t lo = 0, hi = (Ns + a - 1) / a;  // A-slot index of the Ns-th slot
  while (lo < hi) {
    const std::int64_t i = lo + (hi - lo) / 2, T = t0 + i * Q;
    const std::int64_t n = a * (i + 1) + (k && T >= t1 ? k * ((T - t1) / Q + 1) : 0);
    if (n >= Ns)
      hi = i;
    else
      lo = i + 1;
  }
  std::int64_t start = t0 + lo * Q;
  if (k) {
    lo = 0;
    hi = (Ns + k - 1) / k;
    while (lo < hi) {
      const std::int64_t j = lo + (hi - lo) / 2, T = t1 + j * Q;
      if (k * (j + 1) + a * ((T - t0) / Q + 1) >= Ns)
        hi = j;
      else
        lo = j + 1;
    }
    const std::int64_t tb = t1 + lo * Q;
    start = tb < start ? tb : start;
  }
  const std::int64_t small_end = start + Q;
  return small_end > big_end ? small_end : big_end;
}

// Candidate c of a uniform plan (c in [0, 2 max_waves)): family c % 2 (0: all items fit w
// waves, 1: the big items do), w = c / 2 + 1. The chunk range to search in.
struct ChunkRange {
  std::int32_t lo = 1, hi = 1;
  int family = 0;
  std::int64_t budget = 0;
};
MACTUNE_HD inline ChunkRange candidate_range(int c, std::int32_t longest, const PlanLimits& l) {
  ChunkRange r;
  r.family = c % 2;
  r.budget = static_cast<std::int64_t>(c / 2 + 1) * l.workers;
  r.lo = l.min_chunk;
  // Family 1 reaches past the longest segment: there every segment is one item and the chunk
  // only moves the big/small line.
  const std::int64_t hi = r.family == 0 ? longest : 2ll * longest;
  r.hi = hi > (1 << 30) ? (1 << 30) : static_cast<std::int32_t>(hi);
  if (r.hi < r.lo) r.hi = r.lo;
  return r;
}

// ---- Balanced plans: equal-cost parts of the segments laid end to end.

MACTUNE_HD inline std::int64_t segment_cost(std::int32_t len, const PlanLimits& l) {
  return len <= 0 ? 0 : item_cost_of(len, l);
}
MACTUNE_HD inline std::int64_t group_cost(const GroupSpan& g, const PlanLimits& l) {
  return segment_cost(segment_len(g, 0), l) + segment_cost(segment_len(g, 1), l);
}
// Boundary k (1 <= k < parts) of a plan of total cost W lies at floor(k W / parts).
MACTUNE_HD inline std::int64_t boundary_at(std::int64_t k, std::int64_t total, std::int64_t parts) {
  return k * total / parts;
}
// The first boundary at or after cost position x (in [1, parts]).
MACTUNE_HD inline std::int64_t first_boundary(std::int64_t x, std::int64_t total,
                                              std::int64_t parts) {
  if (total <= 0) return parts;
  const std::int64_t k = (x * parts + total - 1) / total;  // smallest k with k W >= x parts
  return k < 1 ? 1 : (k > parts ? parts : k);
}
// Where a boundary at cost offset `o` of a segment (len tokens) cuts it, in tokens: the nearest
// of its start (0), its end (len) and the positions min_chunk x j tokens in that leave at least
// min_chunk tokens on either side (ties to the earlier one).
MACTUNE_HD inline std::int32_t snap_cut(std::int64_t o, std::int32_t len, const PlanLimits& l) {
  const std::int64_t cost = segment_cost(len, l), q = l.min_chunk;
  std::int32_t best = 0;
  std::int64_t dist = o;
  if (cost - o < dist) {
    dist = cost - o;
    best = len;
  }
  const std::int64_t jmax = (len - q) / q, step = q * l.token_cost;
  if (jmax >= 1) {
    std::int64_t j = o > l.item_cost ? (o - l.item_cost + step / 2) / step : 1;
    j = j < 1 ? 1 : (j > jmax ? jmax : j);
    for (std::int64_t jj = (j > 1 ? j - 1 : 1); jj <= j + 1 && jj <= jmax; ++jj) {
      const std::int64_t at = l.item_cost + jj * step, d = at > o ? at - o : o - at;
      if (d < dist || (d == dist && jj * q < best)) {
        dist = d;
        best = static_cast<std::int32_t>(jj * q);
      }
    }
  }
  return best;
}

// Pieces of a segment that starts at cost position `at` in a balanced plan: one plus the
// distinct interior cuts of the boundaries falling in it (cuts do not decrease with k).
// With `out` set, also writes its items from `item` on and, for each of its boundaries k,
// dispatch[k].first = the first item of part k.
MACTUNE_HD inline std::int32_t balanced_segment(const GroupSpan& g, int seg, std::int32_t gi,
                                                std::int64_t at, std::int64_t total,
                                                std::int64_t parts, const PlanLimits& l,
                                                std::int32_t item, WorkItem* out,
                                                DispatchEntry* dispatch) {
  const std::int32_t len = segment_len(g, seg), base = segment_begin(g, seg);
  if (len <= 0) return 0;
  const std::int64_t end = at + segment_cost(len, l);
  const std::int64_t k0 = first_boundary(at, total, parts), k1 = first_boundary(end, total, parts);
  std::int32_t pieces = 1, prev = 0;  // the current piece starts `prev` tokens in
  for (std::int64_t k = k0; k < k1; ++k) {
    const std::int32_t t = snap_cut(boundary_at(k, total, parts) - at, len, l);
    if (t > prev && t < len) {
      if (out != nullptr)
        out[item + pieces - 1] = WorkItem{gi, g.batch_index, g.kv_head, base + prev, base + t};
      prev = t;
      ++pieces;
    }
    if (dispatch != nullptr)
      dispatch[k].first = item + (t == 0 ? 0 : (t == len ? pieces : pieces - 1));
  }
  if (out != nullptr)
    out[item + pieces - 1] = WorkItem{gi, g.batch_index, g.kv_head, base + prev, base + len};
  return pieces;
}

// Items of a group in a balanced plan (both segments), written when `out` is set.
MACTUNE_HD inline std::int32_t balanced_group(const GroupSpan& g, std::int32_t gi, std::int64_t at,
                                              std::int64_t total, std::int64_t parts,
                                              const PlanLimits& l, std::int32_t item, WorkItem* out,
                                              DispatchEntry* dispatch, GroupItems* mp) {
  const std::int32_t a = balanced_segment(g, 0, gi, at, total, parts, l, item, out, dispatch);
  const std::int32_t b = balanced_segment(g, 1, gi, at + segment_cost(segment_len(g, 0), l), total,
                                          parts, l, item + a, out, dispatch);
  if (mp != nullptr) *mp = GroupItems{item, item + a, item + a + b};
  return a + b;
}

// Items of a group in a uniform plan at `chunk`, written from `item` on; its big items are
// dispatched at big_at, big_at + 1, ... and its small ones at small_at, ...
MACTUNE_HD inline void uniform_group(const GroupSpan& g, std::int32_t gi, std::int32_t chunk,
                                     std::int32_t min_chunk, std::int32_t item, std::int32_t big_at,
                                     std::int32_t small_at, WorkItem* out, DispatchEntry* dispatch,
                                     GroupItems* mp) {
  mp->first = item;
  for (int seg = 0; seg < 2; ++seg) {
    if (seg == 1) mp->split = item;
    const std::int32_t len = segment_len(g, seg), base = segment_begin(g, seg);
    const std::int64_t k = pieces_of(len, chunk, min_chunk);
    const bool big = big_segment(len, chunk);
    for (std::int64_t i = 0; i < k; ++i) {
      out[item] = WorkItem{gi, g.batch_index, g.kv_head, base + piece_start(len, k, i),
                           base + piece_start(len, k, i + 1)};
      dispatch[big ? big_at++ : small_at++] = DispatchEntry{item, item + 1};
      ++item;
    }
  }
  mp->last = item;
}

// The cost of dispatch entry e and the balanced plan's predicted makespan: the largest part,
// times the rounds of parts each worker takes.
MACTUNE_HD inline std::int64_t entry_cost(const DispatchEntry& e, const WorkItem* items,
                                          const PlanLimits& l) {
  std::int64_t c = 0;
  for (std::int32_t i = e.first; i < e.last; ++i)
    c += item_cost_of(items[i].kv_end - items[i].kv_begin, l);
  return c;
}
MACTUNE_HD inline std::int64_t balanced_makespan(std::int64_t largest_part, const PlanLimits& l) {
  return largest_part * ((plan_parts(l) + l.workers - 1) / l.workers);
}

}  // namespace mactune
