// Teacher-forced replay of a decode trace through MAC-Attention, with the exact full attention
// alongside: what MAC does to a real model's query stream (hit rate, KV skip ratio) and what it
// costs in output error.
//
// Every position m = 0 .. T-1 of a layer is one decode step of one request: its q, k, v are fed
// to a session (the CPU engine, or the fp64 reference), which appends the KV, matches, attends
// and writes its ring entry. For every eligible (step, head) pair (m >= min_context) the output
// o is compared with
//   o_full: exact full attention over [0, m] in fp64 on the same stored KV (post-RoPE keys and
//           values rounded to the KV dtype, as the session stores them), so rel_err is the error
//           MAC itself adds;
//   o_ref:  the model's own output from the trace (when it has one), so rel_err_vs_ref also
//           holds the KV dtype's rounding: what a serving engine would see.
// Both as ||o - x|| / ||x||, reported as a distribution (mean, p50, p99, max, share > 0.1):
// on real streams a tiny median can sit beside a p99 above 1.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/problem.h"
#include "replay/trace.h"

namespace mactune::replay {

enum class ReplayEngine { cpu, ref };
}  // namespace mactune::replay
template <>
struct mactune::EnumNames<mactune::replay::ReplayEngine> {
  using S = replay::ReplayEngine;
  static constexpr std::string_view what = "engine";
  static constexpr EnumName<S> names[] = {{S::cpu, "cpu"}, {S::ref, "ref"}};
};
namespace mactune::replay {
// The engine replays use unless told otherwise: the CPU engine.
ReplayEngine default_replay_engine();

struct ReplaySettings {
  MacParams mac = replay_defaults();
  DType kv_dtype = DType::f32;  // KV cache (and ring q) storage
  ReplayEngine engine = default_replay_engine();
  int threads = 0;  // CPU engine worker threads (0 = all); also used for the exact attention
  // Run the engine's plain full attention (no match, no ring) instead of MAC: checks the
  // engine (and the trace's RoPE base) against o_ref at the engine's precision.
  bool baseline = false;

  // MacParams defaults, except min_context = 0: in a trace every position is a decode step.
  static MacParams replay_defaults();
  // "cpu", "ref", or "cpu:full" / "ref:full" for a baseline run (the database's engine column).
  std::string engine_label() const;
};

// Distribution of per-pair relative errors. Percentiles interpolate linearly between order
// statistics (numpy's default), so they compare with numpy-based tools.
struct ErrorStats {
  long long count = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
  double frac_gt_0_1 = 0;                     // share of pairs off by more than 10%
  double get(std::string_view metric) const;  // "mean" | "p50" | "p99" | "max" | "frac_gt_0.1"
};
ErrorStats error_stats(std::vector<double> values);

// The exact fp64 full attention of one layer: [steps, q_heads, head_dim]. Computed once per
// (layer, KV dtype) and shared by every setting replayed on it.
struct ExactAttention {
  int layer = 0;
  DType kv_dtype = DType::f32;
  std::vector<double> out;
  double max_rel_err_vs_ref = -1;  // of o_full against o_ref, over all pairs (-1: no o_ref)
};
ExactAttention exact_attention(const TraceLayer& layer, double rope_theta, DType kv_dtype,
                               int threads = 0);

// Raw outcome of replaying one layer (or several traces of it, pooled).
struct LayerRun {
  int layer = 0;
  long long steps = 0, eligible_steps = 0;
  long long eligible_heads = 0, hit_heads = 0, gate_rejections = 0, guard_fires = 0;
  long long eligible_groups = 0, groups_all_hit = 0, groups_mixed = 0;
  long long kv_tokens_read = 0, kv_tokens_total = 0;      // per KV group, eligible steps
  long long head_tokens_read = 0, head_tokens_total = 0;  // per query head, eligible steps
  std::vector<double> rel_err;                            // per eligible (step, head), vs o_full
  std::vector<double> rel_err_vs_ref;                     // the same vs o_ref; empty without o_ref
  double full_vs_ref_max = -1;  // o_full vs o_ref (a wrong RoPE base shows here)
  std::string instance;         // the code path that ran, e.g. mac_cpu_avx2_hd64_f32

  void pool(const LayerRun& other);  // adds another trace's run of the same layer
};

// The reported figures of one layer under one setting (the JSON entry of `layers`).
struct Fidelity {
  int layer = 0;
  long long steps = 0, eligible_steps = 0;
  double hit_rate = 0;            // hits / eligible (step, head) decisions
  double group_all_hit_rate = 0;  // all-hit groups / eligible groups
  double group_mixed_rate = 0;    // mixed groups / eligible groups
  double skip_ratio = 0;          // 1 - KV tokens read / sum of kv_len, per KV group
  double head_skip_ratio = 0;     // the same per query head
  double gate_reject_rate = 0;    // acceptance-gate rejections / eligible decisions
  long long guard_fires = 0;      // subtract mode: entries dropped by the removal guard
  ErrorStats rel_err;
  std::optional<ErrorStats> rel_err_vs_ref;
  double full_vs_ref_max = -1;
  std::string instance;
};
Fidelity summarize(const LayerRun& run);

// Replays one layer under one setting. `full` must be exact_attention() of the same layer and
// KV dtype. Deterministic for a given engine and settings.
LayerRun replay_layer(const TraceLayer& layer, double rope_theta, const ExactAttention& full,
                      const ReplaySettings& settings);

// Throws InputError naming the trace file and layer when `settings` cannot replay that layer
// (the CPU engine runs head_dim 64, 128 and 256 only): checked before any tensor is read.
void require_replayable(const DecodeTrace& trace, int layer, const ReplaySettings& settings);
// InputError when a layer is listed twice (it would be replayed twice).
void require_distinct_layers(const std::vector<int>& layers);
// InputError when no step of a layer of `steps` positions reaches min_context (its error would
// be measured over no pair at all).
void require_eligible_steps(int steps, int layer, int min_context, const std::string& source);

// One trace, several layers, several settings: the driver behind `mactune replay`.
struct ReplayPoint {
  ReplaySettings settings;
  Fidelity fidelity;
  double seconds = 0;  // wall time of the replay (not of the exact attention)
};
// Called as each point finishes (print it, store it): an interrupted run keeps what it has.
using ReplayCallback = std::function<void(const DecodeTrace&, const ReplayPoint&)>;
std::vector<ReplayPoint> replay_trace(const DecodeTrace& trace, const std::vector<int>& layers,
                                      const std::vector<ReplaySettings>& settings,
                                      const ReplayCallback& on_point = {});

// {"trace", "sha256", "rope_theta", "engine", "layers": [{settings..., layer, steps, hit_rate,
// group_all_hit_rate, skip_ratio, head_skip_ratio, rel_err {mean, p50, p99, max, frac_gt_0.1},
// rel_err_vs_ref {...}, ...}]}, pretty-printed.
std::string replay_json(const DecodeTrace& trace, const std::vector<ReplayPoint>& points);

}  // namespace mactune::replay
