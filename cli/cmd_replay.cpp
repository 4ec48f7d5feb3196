// `mactune replay`: teacher-forced replay of a decode trace through MAC-Attention, with the
// exact full attention alongside. One table row per (layer, setting) as it finishes; --json and
// --db are written as each point finishes, so an interrupted run keeps what it measured.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/field_flags.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "kernels/file_io.h"
#include "kernels/host_memory.h"
#include "kernels/output_paths.h"
#include "replay/fidelity_store.h"
#include "replay/replay.h"

namespace mactune::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::vector<int> layers;
  // The library's defaults, written nowhere else: every MAC setting (MacParams' own but
  // min_context 0, replay::ReplaySettings::replay_defaults), the KV dtype, the engine, threads.
  replay::ReplaySettings base;
  // The swept settings start as one value each, the default's.
  std::vector<int> ring_capacities{base.mac.ring_capacity};
  std::vector<int> bands{base.mac.band};
  std::vector<double> taus{base.mac.tau};
  std::optional<double> rope_theta;
  std::string json, db;
  FieldFlags flags;  // the MAC settings' flags, from MacParams' field table
};

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

void print_header() {
  std::printf("%5s %5s %4s %6s  %6s %7s %6s %6s  %9s %9s %9s %9s %6s  %9s\n", "layer", "K", "r",
              "tau", "hit", "grp_all", "skip", "hskip", "err_mean", "err_p50", "err_p99", "err_max",
              ">10%", "ref_p99");
}

void print_row(const replay::ReplayPoint& pt) {
  const replay::Fidelity& f = pt.fidelity;
  const MacParams& m = pt.settings.mac;
  std::printf("%5d %5d %4d %6s  %6.4f %7.4f %6.4f %6.4f  %9.3e %9.3e %9.3e %9.3e %5.2f%%  %9s\n",
              f.layer, m.ring_capacity, m.band, fmt("%.4g", m.tau).c_str(), f.hit_rate,
              f.group_all_hit_rate, f.skip_ratio, f.head_skip_ratio, f.rel_err.mean, f.rel_err.p50,
              f.rel_err.p99, f.rel_err.max, 100.0 * f.rel_err.frac_gt_0_1,
              f.rel_err_vs_ref ? fmt("%.3e", f.rel_err_vs_ref->p99).c_str() : "-");
  std::fflush(stdout);
}

// Rewrites the JSON file through a temporary, so a reader never sees half a document.
void write_json(const std::string& path, const std::string& text) {
  write_file_atomically(path, text, "replay JSON");
}

void run_replay(const ReplayArgs& a) {
  OutputPaths()
      .input(a.trace, "trace", "--trace")
      .output(a.json, "replay JSON", "--json")
      .output(a.db, "database", "--db", Output::database)
      .check();
  const replay::DecodeTrace trace = replay::DecodeTrace::open(a.trace, a.rope_theta);
  std::vector<int> layers = a.layers.empty() ? trace.layers() : a.layers;
  for (int l : layers) trace.require_layer(l);

  std::vector<replay::ReplaySettings> settings;
  for (int K : a.ring_capacities)
    for (int r : a.bands)
      for (double tau : a.taus) {
        replay::ReplaySettings s = a.base;
        s.mac.ring_capacity = K;
        s.mac.band = r;
        s.mac.tau = tau;
        require_valid(s.mac);
        settings.push_back(s);
      }

  const replay::ReplaySettings& s0 = settings.front();
  const Problem shape = trace.problem(layers.front(), s0.kv_dtype);
  for (const auto& s : settings)
    require_host_memory(session_bytes(trace.problem(layers.front(), s.kv_dtype), 0, &s.mac),
                        "--K " + std::to_string(s.mac.ring_capacity),
                        "a ring of K entries for every query head");
  std::printf("trace %s: %zu layer(s), %d query / %d KV heads, head_dim %d, rope_theta %g\n",
              trace.name().c_str(), trace.layers().size(), shape.q_heads, shape.kv_heads,
              shape.head_dim, trace.rope_theta());
  // Every MAC setting but the swept ones, from MacParams' table: a new row is printed too.
  std::string others;
  for (const Field<MacParams>& f : fields_of<MacParams>())
    if (f.name != "K" && f.name != "r" && f.name != "tau")
      others += ", " + std::string(f.name) + " " + f.text_of(s0.mac);
  std::printf("engine %s, kv %s%s\n", s0.engine_label().c_str(),
              std::string(dtype_name(s0.kv_dtype)).c_str(), others.c_str());
  print_header();

  std::unique_ptr<replay::FidelityRecorder> db;
  if (!a.db.empty()) db = std::make_unique<replay::FidelityRecorder>(a.db);
  std::vector<replay::ReplayPoint> done;
  double worst_full = -1;
  replay::replay_trace(trace, layers, settings,
                       [&](const replay::DecodeTrace& t, const replay::ReplayPoint& pt) {
                         print_row(pt);
                         done.push_back(pt);
                         worst_full = std::max(worst_full, pt.fidelity.full_vs_ref_max);
                         if (db) db->record(t, pt);
                         if (!a.json.empty()) write_json(a.json, replay::replay_json(t, done));
                       });
  if (!done.empty()) std::printf("code path: %s\n", done.front().fidelity.instance.c_str());
  std::printf(
      "err = |o - o_full| / |o_full| per eligible (step, head), o_full the exact fp64 "
      "attention; ref = vs the trace's o_ref\n");
  if (worst_full >= 0) {
    std::printf("exact full attention vs o_ref: max rel err %.3g\n", worst_full);
    if (worst_full > 1e-3)
      std::fprintf(stderr,
                   "mactune: warning: full attention does not reproduce the trace's o_ref (max rel "
                   "err %.3g): wrong rope_theta or RoPE convention?\n",
                   worst_full);
  }
  if (db) std::printf("stored %d fidelity row(s) in %s\n", db->recorded(), db->path().c_str());
  if (!a.json.empty()) std::printf("wrote %s\n", a.json.c_str());
}

void add_replay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay", "Replay a decode trace through MAC-Attention: hit rate, skip ratio, output error");
  auto a = std::make_shared<ReplayArgs>();
  cmd->add_option("--trace", a->trace, "Decode trace (safetensors: layer<L>.q_pre/k_pre/v[/o_ref])")
      ->required();
  cmd->add_option("--layers", a->layers, "Layers to replay (default: every layer in the trace)")
      ->delimiter(',');
  // The MAC settings are the rows of MacParams' field table (cli/field_flags.h): K, r and tau
  // take lists (their cross product is swept), every other row one value, each read and
  // checked by its row; a new MAC setting is a flag here with no code.
  a->flags.add_list<MacParams>(*cmd, "K", a->ring_capacities, "MAC settings");
  a->flags.add_list<MacParams>(*cmd, "r", a->bands, "MAC settings");
  a->flags.add_list<MacParams>(*cmd, "tau", a->taus, "MAC settings");
  a->flags.add(*cmd, a->base.mac, "mac", "MAC settings", {"K", "r", "tau"});
  add_enum_option(*cmd, "--kv-dtype", a->base.kv_dtype, "KV cache storage");
  add_enum_option(*cmd, "--engine", a->base.engine,
                  "cpu (the CPU engine, f32) | ref (the fp64 reference)");
  cmd->add_option("--threads", a->base.threads, "Worker threads (0: all)")->capture_default_str();
  cmd->add_flag("--baseline", a->base.baseline,
                "Run the engine's plain full attention instead of MAC (checks it against o_ref)");
  cmd->add_option("--rope-theta", a->rope_theta,
                  "RoPE base (default: the trace's __metadata__.rope_theta)");
  cmd->add_option("--json", a->json, "Write the results as JSON (rewritten as each point ends)");
  cmd->add_option("--db", a->db, "Store each point in this database's fidelity table");
  cmd->callback([a] { run_replay(*a); });
}

const bool registered_replay = register_command("replay", add_replay);

}  // namespace
}  // namespace mactune::cli
