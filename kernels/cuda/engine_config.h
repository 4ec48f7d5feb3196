// The CUDA instances and launch parameters of a session: what the tuner sweeps under
// `kernels.cuda`, what a dispatch table carries. Instance names are canonical (config.h); ""
// ("auto" in every text form) takes the first built instance that can run the shape. Launch
// parameters are not part of instance names. Plain C++ (no CUDA headers): the tuner reads
// CUDA specs in any build.
#pragma once

#include <string>
#include <vector>

#include "kernels/fields.h"
#include "kernels/match_mode.h"

namespace mactune::cuda {

struct EngineConfig {
  std::string attend;   // attend instance (MAC)
  std::string full;     // full-attention instance (mac_enabled = false)
  std::string match;    // match instance (MAC)
  std::string merge;    // merge instance
  int min_chunk = 128;  // smallest KV chunk of a work item (tokens)
  int ctas_per_sm = 0;  // split-KV budget per SM; 0 = the attend (or full) kernel's occupancy
  // Ring candidates per match CTA; 0 = launch math (match_candidates_per_cta).
  int match_candidates = 0;
  bool graph = false;  // run each step as a CUDA graph, captured once per batch size
  // How the match reads the ring, as the CPU engine's match_mode: `scan` (the match instance)
  // or `pruned` (detail/match_pruned.cuh: a 4-bit sketch of each entry, kept current after
  // every ring write, bounds each candidate; rows are read in full only where the bound cannot
  // rule them out). The same decisions either way; pick `normalized` always scans.
  MatchMode match_mode = MatchMode::scan;
  // Harness switches, not tuning knobs (so not in the field table): events between the step's
  // kernels (last_phase_ms()), NaN-poisoned outputs and partials (tests), an identity page
  // table instead of the fixed permutation of pages over the pool (the GPU check's page
  // layouts), the device.
  bool time_phases = false;
  bool poison = false;
  bool identity_pages = false;
  int device = 0;
  bool operator==(const EngineConfig&) const = default;
};

}  // namespace mactune::cuda

template <>
struct mactune::FieldTable<mactune::cuda::EngineConfig> {
  static const std::vector<Field<cuda::EngineConfig>>& fields() {
    using E = cuda::EngineConfig;
    static const std::vector<Field<E>> t = {
        field<&E::attend>("attend", "attend", "attend instance (MAC)").instance().selects(),
        field<&E::full>("full", "full", "full-attention instance").instance().selects(),
        field<&E::match>("match", "match", "match instance").instance(),
        field<&E::merge>("merge", "merge", "merge instance").instance(),
        // The CPU engine's name for the same planner limit (PlanLimits::min_chunk); min_chunk,
        // this row's name until 0.x, is read as an alias (specs, params, flags, Python).
        field<&E::min_chunk>("chunk_tokens", "min_chunk", "minimum KV tokens per work item")
            .range(1)
            .alias("min_chunk"),
        field<&E::ctas_per_sm>("ctas_per_sm", "ctas_per_sm", "split-KV CTAs per SM (0: occupancy)")
            .range(0, 64),
        field<&E::match_candidates>("match_candidates", "match_candidates",
                                    "ring candidates per match CTA (0: launch math)")
            .range(0, 1 << 20),
        field<&E::graph>("graph", "graph", "run each step as a CUDA graph"),
        field<&E::match_mode>("match_mode", "match_mode",
                              "scan (every ring row) or pruned (rows a bound cannot rule out)"),
    };
    return t;
  }
};
