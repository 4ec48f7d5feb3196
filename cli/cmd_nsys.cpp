// `mactune nsys`: read Nsight Systems reports.
//   nsys summary REPORT.sqlite [--db DB] [--range PATTERN] [--workload FIELDS]
//                [--markdown | --json] [--full-names] [--top N]
// What the GUI is otherwise opened for: kernels, mactune instances (with the bandwidth of the
// matching tune point of DB), copies and NVTX ranges with the kernels launched inside them and
// the GPU gaps between those (db/nsys_summary.h). Kernels go by their base names, as `nsys stats`
// prints them with `:base` (--full-names: demangled; JSON has both). DB is only read.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "cli/options.h"
#include "cli/registry.h"
#include "db/nsys_summary.h"
#include "kernels/fields.h"
#include "kernels/problem.h"

namespace mactune::cli {
namespace {

struct NsysArgs {
  std::string report;
  std::string db_path;
  std::string range;
  std::string workload;
  bool json = false;
  bool markdown = false;
  bool full_names = false;
  std::size_t top = 20;
};

// --workload "b=8 ctx=131072 hit=1 K=512 r=256": every word one of those fields, once, with a
// value in its range (the summary would otherwise skip a word it cannot read, and find no
// tune point without saying why).
void check_workload(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> seen;
  std::string word;
  int words = 0;
  while (in >> word) {
    ++words;
    const auto eq = word.find('=');
    const std::string key = word.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
    const bool known = key == "b" || key == "ctx" || key == "hit" || key == "K" || key == "r";
    if (!known || eq == std::string::npos)
      input_error("--workload '", text, "': '", word,
                  "' is not one of b=, ctx=, hit=, K=, r= (e.g. 'b=8 ctx=131072 hit=1 K=512 "
                  "r=256', as mactune profile --nsys prints it)");
    if (!seen.insert(key).second) input_error("--workload '", text, "': ", key, "= is given twice");
    const std::optional<double> v = parse_real(value);
    const bool ok = key == "hit" ? v && *v >= 0 && *v <= 1
                                 : v && *v >= 1 && *v <= kMaxContext && *v == std::floor(*v);
    if (!ok)
      input_error("--workload '", text, "': ", word, ": ",
                  key == "hit" ? "a hit rate in [0, 1]" : "a positive integer", " expected");
  }
  if (words == 0) input_error("--workload '", text, "': no field (e.g. 'b=8 ctx=131072')");
}

void run_summary(const NsysArgs& a) {
  if (!a.workload.empty()) check_workload(a.workload);
  std::optional<db::Store> tune;
  if (!a.db_path.empty()) tune = db::Store::open(a.db_path, {.mode = db::OpenMode::read_only});
  const db::NsysSummary s = db::summarize_nsys_report(
      a.report,
      {.range_pattern = a.range, .tune_db = tune ? &*tune : nullptr, .workload = a.workload});
  if (a.json) {
    std::cout << db::nsys_summary_json(s);
    return;
  }
  db::print_nsys_summary(
      std::cout, s, a.markdown ? db::NsysTableStyle::markdown : db::NsysTableStyle::plain, a.top,
      a.full_names ? db::NsysKernelNames::full : db::NsysKernelNames::short_names);
}

void add_nsys(CLI::App& app) {
  auto a = std::make_shared<NsysArgs>();
  auto* nsys =
      app.add_subcommand("nsys", "Read Nsight Systems reports (`nsys export --type sqlite`)");
  nsys->require_subcommand(1);
  auto* sum = nsys->add_subcommand(
      "summary",
      "Kernels, mactune instances, copies and NVTX ranges of a report: counts, total/mean/p50/p99 "
      "time, shares, launch gaps, achieved bandwidth");
  sum->add_option("report", a->report, "The .sqlite export of an nsys report")->required();
  sum->add_option("--db", a->db_path,
                  "The tuner's database: links kernels to its instances and tune points (read "
                  "only)");
  sum->add_option("--range", a->range,
                  "Only NVTX ranges whose name (or name@domain) matches this glob, and the GPU "
                  "work launched inside them");
  sum->add_option("--workload", a->workload,
                  "Workload fields for kernels no enclosing NVTX range names, to find their tune "
                  "point: 'b=8 ctx=131072 hit=1 K=512 r=256' (mactune profile --nsys prints it)");
  auto* json = sum->add_flag("--json", a->json, "Everything as JSON (times in ns), for scripts");
  sum->add_flag("--markdown", a->markdown, "Markdown tables instead of plain columns")
      ->excludes(json);
  sum->add_flag("--full-names", a->full_names,
                "Kernels by their demangled names (default: base names, as `nsys stats` prints "
                "them with :base; JSON has both)");
  sum->add_option("--top", a->top, "Rows per table (JSON has them all)")
      ->capture_default_str()
      ->check(number_in(1));
  sum->callback([a] { run_summary(*a); });
}

const bool registered_nsys = register_command("nsys", add_nsys);

}  // namespace
}  // namespace mactune::cli
