// Trace replay: sessions driven over a trace's positions, errors against exact attention.
#include "replay/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "kernels/cpu/session.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/error.h"
#include "kernels/reference.h"
#include "kernels/rope.h"

namespace mactune::replay {

ReplayEngine default_replay_engine() {
  return ReplayEngine::cpu;
}

MacParams ReplaySettings::replay_defaults() {
  MacParams p;
  p.min_context = 0;
  return p;
}

std::string ReplaySettings::engine_label() const {
  return std::string(name_of(engine)) + (baseline ? ":full" : "");
}

// ---- Error statistics.

namespace {

// numpy.percentile(..., method="linear") of sorted values.
double percentile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

ErrorStats error_stats(std::vector<double> values) {
  ErrorStats s;
  s.count = static_cast<long long>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0.0;
  long long over = 0;
  for (double x : values) {
    sum += x;
    over += x > 0.1 ? 1 : 0;
  }
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = percentile_sorted(values, 0.50);
  s.p99 = percentile_sorted(values, 0.99);
  s.max = values.back();
  s.frac_gt_0_1 = static_cast<double>(over) / static_cast<double>(values.size());
  return s;
}

double ErrorStats::get(std::string_view metric) const {
  if (metric == "mean") return mean;
  if (metric == "p50") return p50;
  if (metric == "p99") return p99;
  if (metric == "max") return max;
  if (metric == "frac_gt_0.1") return frac_gt_0_1;
  input_error("unknown error metric '", metric, "' (expected mean, p50, p99, max or frac_gt_0.1)");
}

// ---- Exact attention.

namespace {

template <class A, class B>
double rel_l2(const A* o, const B* x, int n) {
  double num = 0.0, den = 0.0;
  for (int i = 0; i < n; ++i) {
    const double d = static_cast<double>(o[i]) - static_cast<double>(x[i]);
    num += d * d;
    den += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

int worker_count(int threads, int work) {
  cpu::check_worker_threads(threads);
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(threads > 0 ? threads : hw, work));
}

}  // namespace

ExactAttention exact_attention(const TraceLayer& L, double rope_theta, DType kv_dtype,
                               int threads) {
  const int T = L.steps, Hq = L.q_heads, Hkv = L.kv_heads, D = L.head_dim, G = Hq / Hkv;
  const std::size_t uD = static_cast<std::size_t>(D);
  // f16 holds at most 65504: a larger K or V would be stored as inf, and every error NaN.
  if (kv_dtype == DType::f16)
    for (const auto* part : {&L.k_pre, &L.v})
      for (std::size_t i = 0; i < part->size(); ++i)
        if (std::fabs((*part)[i]) > 65504.0f) {
          const std::size_t row = std::size_t(Hkv) * uD;
          input_error("layer ", L.layer, ": ", part == &L.v ? "v" : "k_pre", " holds ", (*part)[i],
                      " at [", i / row, ", ", i % row / uD, ", ", i % uD,
                      "], beyond f16's range (65504) of --kv-dtype f16 (use f32 or bf16)");
        }
  // Stored KV as a session holds it: RoPE in double, then rounded to the KV dtype.
  std::vector<ref::KvHead> kv(static_cast<std::size_t>(Hkv));
  std::vector<double> rot(uD);
  for (int t = 0; t < T; ++t) {
    const RopeAngles ang = rope_angles(D, t, rope_theta);
    for (int g = 0; g < Hkv; ++g) {
      apply_rope(L.k_row(t) + std::size_t(g) * uD, rot.data(), D, ang);
      for (std::size_t i = 0; i < uD; ++i) {
        kv[g].k.push_back(round_to(kv_dtype, rot[i]));
        kv[g].v.push_back(round_to(kv_dtype, L.v_row(t)[std::size_t(g) * uD + i]));
      }
    }
  }
  ExactAttention ex;
  ex.layer = L.layer;
  ex.kv_dtype = kv_dtype;
  ex.out.assign(std::size_t(T) * Hq * uD, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto work = [&](int first_row, int stride) {  // rows t = first_row, first_row + stride, ...
    std::vector<double> q(uD);
    for (int t = first_row; t < T; t += stride) {
      const RopeAngles ang = rope_angles(D, t, rope_theta);
      for (int h = 0; h < Hq; ++h) {
        apply_rope(L.q_row(t) + std::size_t(h) * uD, q.data(), D, ang);
        const ref::State s = ref::attend(q.data(), kv[std::size_t(h / G)], D, 0, t + 1, scale);
        std::copy(s.o.begin(), s.o.end(), &ex.out[(std::size_t(t) * Hq + h) * uD]);
      }
    }
  };
  const int n = worker_count(threads, T);
  // Nothing to stop: a worker that started runs its rows and returns.
  std::vector<std::thread> pool = cpu::start_threads(
      n - 1, [&](int w) { work(w, n); }, [] {}, "threads", threads > 0 ? threads : n);
  work(0, n);
  for (std::thread& th : pool) th.join();
  if (L.has_o_ref()) {
    ex.max_rel_err_vs_ref = 0.0;
    for (std::size_t pair = 0; pair < std::size_t(T) * Hq; ++pair)
      ex.max_rel_err_vs_ref =
          std::max(ex.max_rel_err_vs_ref, rel_l2(&ex.out[pair * uD], &L.o_ref[pair * uD], D));
  }
  return ex;
}

// ---- Replay.

void LayerRun::pool(const LayerRun& o) {
  MACTUNE_CHECK(o.layer == layer, "pooling runs of layers ", layer, " and ", o.layer);
  steps += o.steps, eligible_steps += o.eligible_steps;
  eligible_heads += o.eligible_heads, hit_heads += o.hit_heads;
  gate_rejections += o.gate_rejections, guard_fires += o.guard_fires;
  eligible_groups += o.eligible_groups, groups_all_hit += o.groups_all_hit;
  groups_mixed += o.groups_mixed;
  kv_tokens_read += o.kv_tokens_read, kv_tokens_total += o.kv_tokens_total;
  head_tokens_read += o.head_tokens_read, head_tokens_total += o.head_tokens_total;
  rel_err.insert(rel_err.end(), o.rel_err.begin(), o.rel_err.end());
  // vs-ref errors pool only while every trace has o_ref: a partial pool would mislead.
  const bool both_ref = !rel_err_vs_ref.empty() && !o.rel_err_vs_ref.empty();
  if (both_ref)
    rel_err_vs_ref.insert(rel_err_vs_ref.end(), o.rel_err_vs_ref.begin(), o.rel_err_vs_ref.end());
  else
    rel_err_vs_ref.clear();
  full_vs_ref_max = both_ref ? std::max(full_vs_ref_max, o.full_vs_ref_max) : -1;
  if (instance != o.instance) instance = instance.empty() ? o.instance : "mixed";
}

Fidelity summarize(const LayerRun& r) {
  auto ratio = [](long long a, long long b) { return b ? double(a) / double(b) : 0.0; };
  Fidelity f;
  f.layer = r.layer;
  f.steps = r.steps;
  f.eligible_steps = r.eligible_steps;
  f.hit_rate = ratio(r.hit_heads, r.eligible_heads);
  f.group_all_hit_rate = ratio(r.groups_all_hit, r.eligible_groups);
  f.group_mixed_rate = ratio(r.groups_mixed, r.eligible_groups);
  f.skip_ratio = r.kv_tokens_total ? 1.0 - ratio(r.kv_tokens_read, r.kv_tokens_total) : 0.0;
  f.head_skip_ratio =
      r.head_tokens_total ? 1.0 - ratio(r.head_tokens_read, r.head_tokens_total) : 0.0;
  f.gate_reject_rate = ratio(r.gate_rejections, r.eligible_heads);
  f.guard_fires = r.guard_fires;
  f.rel_err = error_stats(r.rel_err);
  if (!r.rel_err_vs_ref.empty()) f.rel_err_vs_ref = error_stats(r.rel_err_vs_ref);
  f.full_vs_ref_max = r.full_vs_ref_max;
  f.instance = r.instance;
  return f;
}

namespace {

// Feeds every position of the layer to `session` (one request) and accounts each step.
// `step(q, k, v)` returns the session's Result (outputs float or double).
template <class Step>
LayerRun drive(const TraceLayer& L, const ExactAttention& full, const MacParams& mac,
               bool mac_enabled, Step&& step) {
  const int Hq = L.q_heads, Hkv = L.kv_heads, D = L.head_dim;
  const std::size_t uD = static_cast<std::size_t>(D);
  LayerRun run;
  run.layer = L.layer;
  run.full_vs_ref_max = full.max_rel_err_vs_ref;
  run.rel_err.reserve(std::size_t(L.steps) * Hq);
  if (L.has_o_ref()) run.rel_err_vs_ref.reserve(std::size_t(L.steps) * Hq);
  for (int m = 0; m < L.steps; ++m) {
    const auto& res = step(std::span(L.q_row(m), std::size_t(Hq) * uD),
                           std::span(L.k_row(m), std::size_t(Hkv) * uD),
                           std::span(L.v_row(m), std::size_t(Hkv) * uD));
    MACTUNE_CHECK(res.out.size() == std::size_t(Hq) * uD && res.decisions.size() == std::size_t(Hq),
                  "session returned ", res.out.size(), " outputs at step ", m);
    ++run.steps;
    if (m < mac.min_context) continue;
    ++run.eligible_steps;
    const StepStats& s = res.stats;
    run.eligible_heads += s.eligible_heads, run.hit_heads += s.hit_heads;
    run.gate_rejections += s.gate_rejections, run.guard_fires += s.guard_fires;
    run.eligible_groups += s.eligible_groups, run.groups_all_hit += s.groups_all_hit;
    run.groups_mixed += s.groups_mixed;
    run.kv_tokens_read += s.kv_tokens_read, run.kv_tokens_total += s.kv_tokens_total;
    run.head_tokens_read += s.head_tokens_read, run.head_tokens_total += s.head_tokens_total;
    for (int h = 0; h < Hq; ++h) {
      MACTUNE_CHECK(res.decisions[std::size_t(h)].eligible == mac_enabled, "step ", m, " head ", h,
                    ": eligibility disagrees with m >= min_context");
      const auto* o = &res.out[std::size_t(h) * uD];
      run.rel_err.push_back(rel_l2(o, &full.out[(std::size_t(m) * Hq + h) * uD], D));
      if (L.has_o_ref()) run.rel_err_vs_ref.push_back(rel_l2(o, L.o_ref_row(m) + h * uD, D));
    }
  }
  return run;
}

}  // namespace

LayerRun replay_layer(const TraceLayer& L, double rope_theta, const ExactAttention& full,
                      const ReplaySettings& st) {
  MACTUNE_CHECK(full.layer == L.layer && full.kv_dtype == st.kv_dtype &&
                    full.out.size() == std::size_t(L.steps) * L.q_heads * L.head_dim,
                "exact attention of another layer or KV dtype");
  Problem shape;
  shape.batch = 1;
  shape.q_heads = L.q_heads;
  shape.kv_heads = L.kv_heads;
  shape.head_dim = L.head_dim;
  shape.kv_dtype = st.kv_dtype;
  require_valid(st.mac);
  const int id = 0;
  const std::span<const int> ids(&id, 1);
  if (st.engine == ReplayEngine::ref) {
    ref::Session session(shape, st.mac, rope_theta, !st.baseline);
    MACTUNE_CHECK(session.add_request() == id, "first request id");
    ref::Session::Result res;
    LayerRun run = drive(L, full, st.mac, !st.baseline,
                         [&](auto q, auto k, auto v) -> const ref::Session::Result& {
                           res = session.step(ids, q, k, v);
                           return res;
                         });
    run.instance = st.baseline ? "full_ref_fp64" : "mac_ref_fp64";
    return run;
  }
  cpu::SessionOptions opt;
  opt.shape = shape;
  opt.mac = st.mac;
  opt.mac_enabled = !st.baseline;
  opt.rope_theta = rope_theta;
  opt.max_context = std::max(L.steps, 1);
  opt.engine.threads = st.threads;
  cpu::Session session(opt);
  MACTUNE_CHECK(session.add_request() == id, "first request id");
  LayerRun run = drive(L, full, st.mac, !st.baseline,
                       [&](auto q, auto k, auto v) -> const cpu::Session::Result& {
                         return session.step(ids, q, k, v);
                       });
  run.instance = session.instance_name();
  return run;
}

void require_distinct_layers(const std::vector<int>& layers) {
  std::set<int> seen;
  for (int l : layers) MACTUNE_REQUIRE(seen.insert(l).second, "layer ", l, " is listed twice");
}

void require_eligible_steps(int steps, int layer, int min_context, const std::string& source) {
  MACTUNE_REQUIRE(min_context < steps, source, ": layer ", layer, " has ", steps,
                  " steps, none at or past --min-context ", min_context,
                  ": no step would be measured (error over 0 pairs)");
}

void require_replayable(const DecodeTrace& trace, int layer, const ReplaySettings& st) {
  cpu::check_worker_threads(st.threads);       // both engines' exact attention uses them
  if (st.engine == ReplayEngine::ref) return;  // the fp64 reference runs any valid shape
  cpu::SessionOptions opt;
  opt.shape = trace.problem(layer, st.kv_dtype);
  opt.mac = st.mac;
  opt.mac_enabled = !st.baseline;
  opt.engine.threads = st.threads;
  const std::string why = cpu::validate(opt);
  if (!why.empty())
    input_error(trace.source(), ": layer ", layer, ": ", why, " (--engine ref replays any shape)");
}

std::vector<ReplayPoint> replay_trace(const DecodeTrace& trace, const std::vector<int>& layers,
                                      const std::vector<ReplaySettings>& settings,
                                      const ReplayCallback& on_point) {
  require_distinct_layers(layers);
  for (int layer : layers)
    for (const ReplaySettings& st : settings) {
      require_replayable(trace, layer, st);
      require_eligible_steps(trace.steps(layer), layer, st.mac.min_context, trace.source());
    }
  std::vector<ReplayPoint> points;
  for (int layer : layers) {
    const TraceLayer L = trace.load_layer(layer);
    std::vector<ExactAttention> exact;  // one per KV dtype in use
    for (const ReplaySettings& st : settings) {
      auto it = std::find_if(exact.begin(), exact.end(),
                             [&](const ExactAttention& e) { return e.kv_dtype == st.kv_dtype; });
      if (it == exact.end()) {
        exact.push_back(exact_attention(L, trace.rope_theta(), st.kv_dtype, st.threads));
        it = exact.end() - 1;
      }
      const auto t0 = std::chrono::steady_clock::now();
      const LayerRun run = replay_layer(L, trace.rope_theta(), *it, st);
      ReplayPoint pt{st, summarize(run),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
      if (on_point) on_point(trace, pt);
      points.push_back(std::move(pt));
    }
  }
  return points;
}

}  // namespace mactune::replay
