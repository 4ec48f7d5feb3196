// `mactune report --db DB -o DIR`: markdown tables and SVG plots of the decisions (speedup vs
// batch per context and hit rate; break-even hit rate vs context). Reads the database only.
#include <cstdio>
#include <iostream>

#include "cli/field_flags.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "db/store.h"
#include "kernels/device.h"
#include "kernels/output_paths.h"
#include "tuner/decide/emit.h"
#include "tuner/report/report.h"
#include "tuner/report/report_summary.h"
#include "tuner/tune/tune.h"

namespace mactune::cli {
namespace {

struct ReportArgs {
  std::string db, out, device = "auto";
  tuner::DecidePolicy decide;  // --tie-tolerance, --ties: rows of its field table
  FieldFlags flags;
};

tuner::DecideOptions options(const ReportArgs& a) {
  tuner::DecideOptions o;
  o.tie_tolerance = a.decide.tie_tolerance;
  o.ties = a.decide.ties;
  return o;
}

void run(const ReportArgs& a) {
  OutputPaths()
      .input(a.db, "database", "--db")
      .output(a.out, "report directory", "-o", Output::directory)
      .inside(a.out, "report.md", "report file")
      .check();
  const db::Store store = db::Store::open(a.db, {.mode = db::OpenMode::read_only});
  const tuner::Selection sel = tuner::select_rows(store, a.device, cpu_fingerprint());
  const tuner::Decided d = tuner::decide_only(store, sel, options(a));
  const auto files = tuner::write_report(store, d, a.out);
  std::cout << tuner::summary_table(d.decisions) << '\n';
  for (const auto& f : files) std::printf("wrote %s\n", f.c_str());
}

void add_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Write markdown and SVG plots of a tuning database");
  cmd->add_option("--db", a->db, "Database written by mactune tune")->required();
  cmd->add_option("-o,--output", a->out, "Report directory")->required();
  cmd->add_option("--device", a->device,
                  "auto (this machine, or the only device), a fingerprint digest or a name glob");
  // The spec's decide.tie_tolerance and decide.ties, as their table rows read them.
  a->flags.add(*cmd, a->decide, "decide", "Decisions", {"break_even", "resolution"});
  cmd->callback([a] { run(*a); });
}

const bool registered_report = register_command("report", add_report);

}  // namespace
}  // namespace mactune::cli
