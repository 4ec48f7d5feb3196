// `mactune calibrate`: per layer, the tau (and K, r) with the largest KV skip ratio whose output
// error stays within a budget, over one or more decode traces; prints the whole skip-vs-error
// curve with its Pareto front and writes a per-layer schedule (YAML) a decoder loads with
// replay::load_layer_schedule. The schedule is rewritten after each layer, and --db stores every
// point as it finishes, so an interrupted calibration keeps what it measured.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/field_flags.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "kernels/file_io.h"
#include "kernels/host_memory.h"
#include "kernels/output_paths.h"
#include "replay/calibrate.h"
#include "replay/fidelity_store.h"

namespace mactune::cli {
namespace {

// The library's options with max_err unset (-1): --max-err is required.
replay::CalibrationOptions required_budget() {
  replay::CalibrationOptions o;
  o.max_err = -1;
  return o;
}

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::vector<int> layers;
  // The flags write into the library's options, whose defaults are written nowhere else: the
  // lists to try (replay::CalibrationOptions), every other MAC setting (MacParams' own but
  // min_context 0, replay::ReplaySettings::replay_defaults), the KV dtype, engine and threads.
  replay::CalibrationOptions opt = required_budget();
  std::optional<double> rope_theta;
  std::string output, db, json;
  FieldFlags flags;  // the MAC settings' flags, from MacParams' field table
};

std::string budget_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string settings_text(const MacParams& m) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "K=%d r=%d tau=%g%s", m.ring_capacity, m.band, m.tau,
                m.accept_eps < 1.0 ? (" eps=" + budget_text(m.accept_eps)).c_str() : "");
  return buf;
}

void print_curve_header(const std::string& metric) {
  std::printf("  %5s %4s %5s %6s  %6s %6s  %9s %9s %9s  %-6s\n", "K", "r", "eps", "tau", "hit",
              "skip", ("err_" + metric).c_str(), "err_mean", "err_max", "budget");
}

void print_point(const replay::CalibrationPoint& p) {
  const MacParams& m = p.settings.mac;
  const replay::Fidelity& f = p.fidelity;
  std::printf("  %5d %4d %5g %6g  %6.4f %6.4f  %9.3e %9.3e %9.3e  %-6s\n", m.ring_capacity, m.band,
              m.accept_eps, m.tau, f.hit_rate, f.skip_ratio, p.err, f.rel_err.mean, f.rel_err.max,
              p.within_budget ? "ok" : "over");
  std::fflush(stdout);
}

void print_layer(const replay::LayerCalibration& lc, const replay::CalibrationOptions& opt) {
  std::vector<const replay::CalibrationPoint*> front;
  for (const auto& p : lc.points)
    if (p.pareto) front.push_back(&p);
  std::sort(front.begin(), front.end(),
            [](auto* a, auto* b) { return a->fidelity.skip_ratio > b->fidelity.skip_ratio; });
  std::printf(" Pareto front of layer %d (skip ratio vs err_%s, best skip first):\n", lc.layer,
              opt.metric.c_str());
  print_curve_header(opt.metric);
  for (const auto* p : front) print_point(*p);
  if (lc.pick >= 0) {
    const auto& p = lc.points[std::size_t(lc.pick)];
    std::printf(" pick for layer %d: %s  (skip %.4f, hit %.4f, err_%s %.3e <= %g)\n\n", lc.layer,
                settings_text(p.settings.mac).c_str(), p.fidelity.skip_ratio, p.fidelity.hit_rate,
                opt.metric.c_str(), p.err, opt.max_err);
  } else {
    std::printf(
        " pick for layer %d: none within err_%s <= %g: the layer runs without reuse "
        "(tau = 1)\n\n",
        lc.layer, opt.metric.c_str(), opt.max_err);
  }
  std::fflush(stdout);
}

void run_calibrate(const CalibrateArgs& a) {
  const replay::CalibrationOptions& opt = a.opt;
  // NaN and inf never get here (cli/options.h); a negative budget no point can meet.
  MACTUNE_REQUIRE(opt.max_err >= 0, "--max-err ", budget_text(opt.max_err),
                  ": an error budget cannot be negative (e.g. --max-err 0.01)");
  OutputPaths paths;
  for (const std::string& t : a.traces) paths.input(t, "trace", "--trace");
  paths.output(a.output, "schedule", "-o")
      .output(a.json, "calibration JSON", "--json")
      .output(a.db, "database", "--db", Output::database)
      .check();
  std::vector<replay::DecodeTrace> traces;
  for (const std::string& path : a.traces)
    traces.push_back(replay::DecodeTrace::open(path, a.rope_theta));
  std::vector<const replay::DecodeTrace*> ptrs;
  for (const auto& t : traces) ptrs.push_back(&t);

  opt.validate();
  for (const auto* t : ptrs)
    for (const int K : opt.ring_capacities) {
      MacParams m = opt.base.mac;
      m.ring_capacity = K;
      require_host_memory(session_bytes(t->problem(t->layers().front(), opt.base.kv_dtype), 0, &m),
                          "--K " + std::to_string(K), "a ring of K entries for every query head");
    }

  std::ostringstream names;
  for (std::size_t i = 0; i < traces.size(); ++i) names << (i ? ", " : "") << traces[i].name();
  std::printf(
      "calibrate over %s: budget err_%s <= %g (vs %s), engine %s, kv %s, %zu point(s) "
      "per layer\n",
      names.str().c_str(), opt.metric.c_str(), opt.max_err,
      opt.against_ref ? "o_ref" : "exact full attention",
      std::string(name_of(opt.base.engine)).c_str(),
      std::string(dtype_name(opt.base.kv_dtype)).c_str(), opt.grid().size());

  std::unique_ptr<replay::FidelityRecorder> db;
  if (!a.db.empty()) db = std::make_unique<replay::FidelityRecorder>(a.db);
  std::vector<replay::LayerCalibration> done;
  const std::string comment =
      "per-layer MAC-Attention settings written by `mactune calibrate`\n"
      "budget: err_" +
      opt.metric + " <= " + budget_text(opt.max_err) + " over " + names.str();
  int last_layer = -1;
  replay::CalibrationCallbacks cb;
  cb.on_trace_point = [&](const replay::DecodeTrace& t, const replay::ReplayPoint& pt) {
    if (db) db->record(t, pt);
  };
  cb.on_point = [&](int layer, const replay::CalibrationPoint& p) {
    if (layer != last_layer) {
      std::printf("layer %d:\n", layer);
      print_curve_header(opt.metric);
      last_layer = layer;
    }
    print_point(p);
  };
  cb.on_layer = [&](const replay::LayerCalibration& lc) {
    print_layer(lc, opt);
    done.push_back(lc);
    replay::save_layer_schedule(a.output, replay::calibration_schedule(done, opt, ptrs), comment);
    if (!a.json.empty())
      write_file_atomically(a.json, replay::calibration_json(done, opt, ptrs), "calibration JSON");
  };
  replay::calibrate(ptrs, a.layers, opt, cb);
  std::printf("wrote %s (%zu layer(s))\n", a.output.c_str(), done.size());
  if (!a.json.empty()) std::printf("wrote %s\n", a.json.c_str());
  if (db) std::printf("stored %d fidelity row(s) in %s\n", db->recorded(), db->path().c_str());
}

void add_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Pick per-layer tau (K, r) with the largest skip ratio within an error budget");
  auto a = std::make_shared<CalibrateArgs>();
  cmd->add_option("--trace", a->traces, "Decode traces (safetensors); errors pool across them")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--max-err", a->opt.max_err, "Error budget on the metric, e.g. 0.01")->required();
  cmd->add_option("--metric", a->opt.metric, "p99 | mean | p50 | max | frac_gt_0.1")
      ->capture_default_str();
  cmd->add_flag("--against-ref", a->opt.against_ref,
                "Budget the error against the trace's o_ref instead of exact attention");
  cmd->add_option("-o,--output", a->output, "Schedule file to write (YAML)")->required();
  cmd->add_option("--layers", a->layers, "Layers (default: every layer of any trace)")
      ->delimiter(',');
  // The MAC settings are the rows of MacParams' field table (cli/field_flags.h): K, r, tau and
  // accept_eps take the lists to try, every other row one value, each read and checked by its
  // row; a new MAC setting is a flag here with no code.
  replay::CalibrationOptions& o = a->opt;
  a->flags.add_list<MacParams>(*cmd, "K", o.ring_capacities, "MAC settings", " (values to try)");
  a->flags.add_list<MacParams>(*cmd, "r", o.bands, "MAC settings", " (values to try)");
  a->flags.add_list<MacParams>(*cmd, "tau", o.taus, "MAC settings", " (values to try)", "--taus");
  a->flags.add_list<MacParams>(*cmd, "accept_eps", o.accept_eps, "MAC settings",
                               " (values to try)");
  a->flags.add(*cmd, o.base.mac, "mac", "MAC settings", {"K", "r", "tau", "accept_eps"});
  add_enum_option(*cmd, "--kv-dtype", o.base.kv_dtype, "KV cache storage");
  add_enum_option(*cmd, "--engine", o.base.engine, "cpu | ref");
  cmd->add_option("--threads", o.base.threads, "Worker threads (0: all)")->capture_default_str();
  cmd->add_option("--rope-theta", a->rope_theta, "RoPE base (default: each trace's metadata)");
  cmd->add_option("--db", a->db, "Store every (trace, layer, setting) in the fidelity table");
  cmd->add_option("--json", a->json,
                  "Write every point and pick as JSON (rewritten after each layer)");
  cmd->callback([a] { run_calibrate(*a); });
}

const bool registered_calibrate = register_command("calibrate", add_calibrate);

}  // namespace
}  // namespace mactune::cli
