// `mactune emit --db DB -o dispatch/NAME.json [--header NAME.h]`: decide from every stored
// measurement of one device (and build and policy), store the decisions, write the table.
#include <cstdio>
#include <iostream>

#include "cli/field_flags.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "db/store.h"
#include "kernels/device.h"
#include "kernels/file_io.h"
#include "kernels/output_paths.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/model_io.h"
#include "tuner/measure/measure.h"
#include "tuner/report/report_summary.h"
#include "tuner/tune/tune.h"

namespace mactune::cli {
namespace {

struct EmitArgs {
  std::string db, out, header, device = "auto";
  tuner::DecidePolicy decide;  // --tie-tolerance, --ties: rows of its field table
  FieldFlags flags;
  bool quiet = false;
};

// This machine's device as the tuner records it: the GPU when one is usable, else the CPU.
DeviceFingerprint this_machine(const db::Store& store) {
  std::string why;
  if (auto cuda = tuner::make_cuda_backend(&why)) {
    const DeviceFingerprint g = cuda->device();
    for (const auto& d : store.devices())
      if (d.fingerprint.key() == g.key()) return g;
  }
  return cpu_fingerprint();
}

tuner::DecideOptions options(const EmitArgs& a) {
  tuner::DecideOptions o;
  o.tie_tolerance = a.decide.tie_tolerance;
  o.ties = a.decide.ties;
  return o;
}

void run(const EmitArgs& a) {
  // Refused before anything is decided or stored.
  OutputPaths()
      .input(a.db, "database", "--db")
      .output(a.out, "dispatch table", "-o", Output::file_mkdir)
      .output(a.header, "dispatch header", "--header", Output::file_mkdir)
      .check();
  // It stores its decisions, but only in a database `tune` wrote: a missing file is a typo.
  db::Store store = db::Store::open(a.db, {.create = false});
  const DeviceFingerprint here = this_machine(store);
  const tuner::Selection sel = tuner::select_rows(store, a.device, here);
  const tuner::Decided d = tuner::decide_and_store(store, sel, options(a));
  const auto model_rows = tuner::load_model_rows(store, sel);
  const auto models = tuner::try_fit_device_models(model_rows, d.device);
  const auto table = tuner::make_table(d, a.db, {models ? &*models : nullptr, &model_rows});
  const std::string refusal = tuner::write_dispatch(table, a.out, a.header, here);
  if (!refusal.empty()) throw Error("the emitted table " + a.out + " does not load: " + refusal);
  if (!a.quiet) std::cout << tuner::summary_table(d.decisions) << '\n';
  std::printf("wrote %s: %zu entries for %s (%s)%s\n", a.out.c_str(), table.entries.size(),
              d.device.name.c_str(), d.device.digest().c_str(),
              table.device.fingerprint == here.digest() ? ", loads on this machine"
                                                        : ", for another machine");
  if (!a.header.empty()) std::printf("wrote %s\n", a.header.c_str());
  if (d.loaded.incomplete || d.loaded.split_runs)
    std::printf("note: %zu incomplete points, %zu pairs split across runs\n", d.loaded.incomplete,
                d.loaded.split_runs);
}

void add_emit(CLI::App& app) {
  auto a = std::make_shared<EmitArgs>();
  auto* cmd = app.add_subcommand("emit", "Decide from a database and write the dispatch table");
  cmd->add_option("--db", a->db, "Database written by mactune tune (or merged shards)")->required();
  cmd->add_option("--device", a->device,
                  "auto (this machine, or the only device), a fingerprint digest or a name glob");
  cmd->add_option("-o,--output", a->out, "Dispatch table JSON to write")->required();
  cmd->add_option("--header", a->header, "Also write the table as a C++ header");
  // The spec's decide.tie_tolerance and decide.ties, as their table rows read them.
  a->flags.add(*cmd, a->decide, "decide", "Decisions", {"break_even", "resolution"});
  cmd->add_flag("--quiet,-q", a->quiet, "Do not print the summary table");
  cmd->callback([a] { run(*a); });
}

const bool registered_emit = register_command("emit", add_emit);

}  // namespace
}  // namespace mactune::cli
