// `mactune compare BASE.db NEW.db [-o report.md]`: every point both databases measured,
// classified SAME / FASTER / SLOWER / AMBIGUOUS (tuner/report/compare.h). Exit 0 when nothing is
// SLOWER, 1 when something is (a CI gate), 2 on bad input.
#include <cstdio>
#include <iostream>

#include "cli/options.h"
#include "cli/registry.h"
#include "db/store.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/output_paths.h"
#include "tuner/report/compare.h"

namespace mactune::cli {
namespace {

struct CompareArgs {
  std::string base, next, out;
  tuner::CompareOptions options;
};

void run(const CompareArgs& a) {
  OutputPaths()
      .input(a.base, "database", "BASE")
      .input(a.next, "database", "NEW")
      .output(a.out, "comparison report", "-o")
      .check();
  const db::Store base = db::Store::open(a.base, {.mode = db::OpenMode::read_only});
  const db::Store next = db::Store::open(a.next, {.mode = db::OpenMode::read_only});
  const tuner::Comparison c = tuner::compare_stores(base, next, a.options);
  const std::string md = tuner::compare_markdown(c);
  if (a.out.empty()) {
    std::cout << md;
  } else {
    write_file_atomically(a.out, md, "comparison report");
    std::cout << tuner::compare_summary(c) << "\n";
    if (const std::string be = tuner::break_even_summary(c); !be.empty()) std::cout << be << "\n";
    std::cout << "wrote " << a.out << "\n";
  }
  if (c.any_slower()) command_exit_code() = 1;
}

void add_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare two tuning databases point by point: SAME / FASTER / SLOWER / AMBIGUOUS (exit 1 "
      "when something is SLOWER)");
  cmd->add_option("BASE", a->base, "Database of the reference build")->required();
  cmd->add_option("NEW", a->next, "Database of the build under test")->required();
  cmd->add_option("-o,--output", a->out, "Write the markdown report here (default: stdout)");
  cmd->add_option("--threshold", a->options.threshold,
                  "Relative median change at or below which a point is SAME")
      ->check(number_in(0.0, 0.99));
  cmd->add_option("--resolution", a->options.resolution,
                  "Break-evens at most this far apart agree (else one must lie in the other's "
                  "bracket)")
      ->check(number_in(0.0, 0.99));
  cmd->add_option("--base-device", a->options.base_device,
                  "Device of BASE when it holds several: fingerprint digest or name glob");
  cmd->add_option("--new-device", a->options.new_device,
                  "Device of NEW when it holds several: fingerprint digest or name glob");
  cmd->callback([a] { run(*a); });
}

const bool registered_compare = register_command("compare", add_compare);

}  // namespace
}  // namespace mactune::cli
