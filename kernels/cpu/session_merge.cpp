// cpu::Session: the phases after attention: the acceptance gate, the per-head merge in plan
// order (ring summary, items below cache_end = the new entry, the tail = the output), and the
// ring write.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/session_impl.h"
#include "kernels/state.h"

namespace mactune::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::size_t sz(long long x) {
  return static_cast<std::size_t>(x);
}

}  // namespace

// Acceptance gate: a hit is kept only if the reused prefix carries less than accept_eps of
// the softmax mass. A rejected head becomes a miss: its prefix [0, cache_end(p)) is attended
// now and merged in front of the fresh part already computed, so no work is thrown away.
void Session::Impl::gate(std::span<const int> requests) {
  PhaseScope ph(opt.phases, Phase::attend, name);
  const int n = static_cast<int>(requests.size());
  gate_slot.assign(sz(n) * sz(Hq), -1);
  struct Task {
    int b, h, lo, hi;
  };
  std::vector<Task> tasks;
  std::vector<int> first_task;  // [rejected + 1]
  // The start of every hit before the gate (-1: not a hit): the prefix a head that stops being
  // a hit must now attend.
  std::vector<int> hit_start(sz(n) * sz(Hq), -1);
  for (int b = 0; b < n; ++b)
    for (int h = 0; h < Hq; ++h) {
      HeadDecision& d = result.decisions[sz(b) * sz(Hq) + sz(h)];
      if (!d.hit) continue;
      hit_start[sz(b) * sz(Hq) + sz(h)] = d.start;
      const int g = h / G, j = h % G;
      const GroupItems& mp = merge_plan[sz(b) * sz(Hkv) + sz(g)];
      double fresh = kNegInf;  // lse of [cache_end(p), kv_len): all of the head's items
      for (int i = mp.first; i < mp.last; ++i) {
        const double l = part_lse[sz(i) * sz(G) + sz(j)];
        if (!(l > kNegInf)) continue;
        const double hi = std::max(fresh, l), lo = std::min(fresh, l);
        fresh = hi + std::log1p(std::exp(lo - hi));
      }
      const Ring& ring = request(ids[sz(b)]).ring;
      const double reused = ring.lse[ring.index(h, ring_slot(d.p, ring.capacity))];
      const double alpha = 1.0 / (1.0 + std::exp(fresh - reused));
      if (alpha < mac.accept_eps) continue;
      d = HeadDecision{true, false, true, -1, d.d2, 0};
      starts[sz(b) * sz(Hq) + sz(h)] = 0;
    }
  // group_hits: a rejection makes its group partial, and the group's other hits misses too.
  if (mac.group_hits) demote_partial_groups(n);
  for (int b = 0; b < n; ++b)
    for (int h = 0; h < Hq; ++h) {
      const int old_start = hit_start[sz(b) * sz(Hq) + sz(h)];
      if (old_start < 0 || result.decisions[sz(b) * sz(Hq) + sz(h)].hit) continue;
      gate_slot[sz(b) * sz(Hq) + sz(h)] = static_cast<int>(first_task.size());
      first_task.push_back(static_cast<int>(tasks.size()));
      for (int lo = 0; lo < old_start; lo += chunk)
        tasks.push_back({b, h, lo, std::min(old_start, lo + chunk)});
    }
  first_task.push_back(static_cast<int>(tasks.size()));
  const int rejected = static_cast<int>(first_task.size()) - 1;
  if (rejected == 0) return;
  std::vector<float> task_o(tasks.size() * sz(D)), task_lse(tasks.size());
  const int zero = 0;
  pool->run(static_cast<int>(tasks.size()), [&](int t, int) {
    const Task& task = tasks[sz(t)];
    AttendArgs a;
    a.q = &q_rot[(sz(task.b) * sz(Hq) + sz(task.h)) * sz(D)];
    a.start = &zero;
    a.nh = 1;
    a.kv = kv.view(slots[sz(ids[sz(task.b)])].pages, task.h / G);
    a.lo = task.lo;
    a.hi = task.hi;
    a.block_rows = opt.engine.block_rows;
    a.o = &task_o[sz(t) * sz(D)];
    a.lse = &task_lse[sz(t)];
    kernels.attend(a);
  });
  gate_o.assign(sz(rejected) * sz(D), 0.0f);
  gate_lse.assign(sz(rejected), kNegInf);
  for (int r = 0; r < rejected; ++r)
    for (int t = first_task[sz(r)]; t < first_task[sz(r) + 1]; ++t)
      merge_into(&gate_o[sz(r) * sz(D)], gate_lse[sz(r)], &task_o[sz(t) * sz(D)], task_lse[sz(t)],
                 D);
}

void Session::Impl::merge(std::span<const int> requests, float* out) {
  PhaseScope ph(opt.phases, Phase::merge, name);
  const int n = static_cast<int>(requests.size());
  entry_o.resize(sz(n) * sz(Hq) * sz(D));
  entry_lse.resize(sz(n) * sz(Hq));
  const bool gated = opt.mac_enabled && mac.accept_eps < 1.0;
  pool->run(n * Hkv, [&](int task, int worker) {
    PhaseScope on_worker(worker_sink(worker), Phase::merge, name);
    const int b = task / Hkv, g = task % Hkv, m = m_of[sz(b)];
    const GroupItems& mp = merge_plan[sz(task)];
    const Ring& ring = slots[sz(ids[sz(b)])].ring;
    for (int j = 0; j < G; ++j) {
      const std::size_t head = sz(b) * sz(Hq) + sz(g * G + j);
      const HeadDecision& d = result.decisions[head];
      float* res = out + head * sz(D);
      float res_lse = kNegInf;
      auto merge_items = [&](float* o, float& lse, int first, int last) {
        for (int i = first; i < last; ++i)
          merge_into(o, lse, &part_o[(sz(i) * sz(G) + sz(j)) * sz(D)],
                     part_lse[sz(i) * sz(G) + sz(j)], D);
      };
      if (!opt.mac_enabled) {
        merge_items(res, res_lse, mp.first, mp.last);
        continue;
      }
      // The reused prefix: the ring summary of a hit, or a rejected hit's fresh prefix.
      float* e = &entry_o[head * sz(D)];
      float& e_lse = entry_lse[head];
      e_lse = kNegInf;
      std::fill(e, e + D, 0.0f);
      if (d.hit) {
        const std::size_t i = ring.index(g * G + j, ring_slot(d.p, ring.capacity));
        load_floats(mac.summary_dtype, ring.o_at(g * G + j, ring_slot(d.p, ring.capacity)), e, D);
        e_lse = ring.lse[i];
      } else if (gated && gate_slot[head] >= 0) {
        std::memcpy(e, &gate_o[sz(gate_slot[head]) * sz(D)], sz(D) * sizeof(float));
        e_lse = gate_lse[sz(gate_slot[head])];
      }
      if (mac.rectify == Rectify::forward) {
        merge_items(e, e_lse, mp.first, mp.split);  // the new ring entry
        std::memcpy(res, e, sz(D) * sizeof(float));
        res_lse = e_lse;
        merge_items(res, res_lse, mp.split, mp.last);  // + the tail = the output
      } else {
        std::memcpy(res, e, sz(D) * sizeof(float));
        res_lse = e_lse;
        merge_items(res, res_lse, mp.first, mp.last);
        if (cache_end(m, mac.band) > 0) {  // entry = output (-) tail
          float* tail = &merge_tmp[sz(worker) * 2 * sz(D)];
          float tail_lse = kNegInf;
          merge_items(tail, tail_lse, mp.split, mp.last);
          guard_fires[sz(worker)] += remove_into(e, e_lse, res, res_lse, tail, tail_lse, D,
                                                 static_cast<float>(mac.subtract_guard))
                                         ? 1
                                         : 0;
        } else {
          std::fill(e, e + D, 0.0f);
          e_lse = kNegInf;
        }
      }
    }
  });
}

// Ring writes come last: the slot of m may hold candidate m - K, read by this step's merge.
void Session::Impl::ring_write(std::span<const int> requests) {
  PhaseScope ph(opt.phases, Phase::ring_write, name);
  const int n = static_cast<int>(requests.size());
  for (int b = 0; b < n; ++b) {
    Ring& ring = slots[sz(ids[sz(b)])].ring;
    const int m = m_of[sz(b)], slot = ring_slot(m, ring.capacity);
    for (int h = 0; h < Hq; ++h) {
      const std::size_t head = sz(b) * sz(Hq) + sz(h);
      ring.pos[ring.index(h, slot)] = m;
      ring.lse[ring.index(h, slot)] = entry_lse[head];
      ring.write_q(h, slot, &q_round[head * sz(D)]);
      store_floats(mac.summary_dtype, &entry_o[head * sz(D)], ring.o_at(h, slot), D);
    }
  }
}

}  // namespace mactune::cpu
