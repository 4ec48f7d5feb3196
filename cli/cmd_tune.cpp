// `mactune tune SPEC.yaml`: sweep the spec's grid on this device into its database (every
// point stored as it finishes; a re-run resumes), decide, emit the dispatch table, report.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/field_flags.h"
#include "cli/registry.h"
#include "db/db_error.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
#include "tuner/measure/measure.h"
#include "tuner/report/report_summary.h"
#include "tuner/search/dry_run.h"
#include "tuner/search/halving_replay.h"
#include "tuner/search/sweep.h"
#include "tuner/spec/grid.h"
#include "tuner/tune/tune.h"

namespace mactune::cli {
namespace {

std::atomic<bool> g_tune_stop{false};

// First Ctrl-C / SIGTERM: stop between two samples, keep every finished point. A second one
// gets the default action, after the temporaries are removed (kernels/file_io.h).
extern "C" void mactune_tune_on_signal(int sig) {
  g_tune_stop.store(true);
  restore_signal_cleanup(sig);
}

struct TuneArgs {
  tuner::TuneOptions opt;
  tuner::Search search;  // --search: the row `strategy` of Search's field table
  FieldFlags flags;
  std::string shard, replay;
  bool no_emit = false, no_report = false, quiet = false, dry_run = false, check = false;
};

// `--dry-run`: the points, what the database holds of them and how long the rest takes;
// nothing is measured, created or written. Needs no device: it plans for the spec's device,
// which a login node lacks (tuner/search/dry_run.h). `--check` fails when a point is not stored.
void dry_run(const TuneArgs& a) {
  tuner::SweepPlan plan = tuner::plan_sweep(a.opt.spec_path, a.opt.backend);
  if (a.opt.search) plan.spec.search.strategy = *a.opt.search;
  const std::string db_path = a.opt.db_path.empty() ? plan.spec.output.db : a.opt.db_path;
  const tuner::StoredPoints stored = tuner::stored_points(plan, db_path);
  const tuner::PointTimes times = tuner::point_times(plan, {db_path});
  const auto [shard, count] = a.opt.shard.value_or(std::pair{0, 1});
  const tuner::ShardEstimate e =
      tuner::estimate_shard(plan, stored.state, times, shard, count, a.opt.retry_failed);
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const tuner::TunePoint& p = plan.points[i];
    if (p.index % static_cast<std::size_t>(count) != static_cast<std::size_t>(shard)) continue;
    const tuner::Stored st = stored.state[i];
    const bool todo =
        st == tuner::Stored::no || (st == tuner::Stored::failed && a.opt.retry_failed);
    if (todo) missing.push_back(p.index);
    if (!a.quiet)
      std::cout << p.index << "  " << tuner::bucket_of(p).key() << "  " << tuner::point_label(p)
                << "  " << plan.names[i].first << "  "
                << (todo                          ? "to measure"
                    : st == tuner::Stored::failed ? "stored (failed)"
                                                  : "stored")
                << '\n';
  }
  for (const std::string& u : plan.unreachable) std::cout << "unreachable, left out: " << u << '\n';
  std::cout << e.points << " points, " << e.stored << " stored, " << e.to_measure << " to measure";
  if (!plan.unreachable.empty()) std::cout << ", " << plan.unreachable.size() << " unreachable";
  std::cout << '\n';
  std::cout << "device    " << plan.backend << " '" << plan.spec.device.name << "': "
            << (plan.here ? "this machine's " + plan.here->name
                          : "not this machine (" + plan.not_here + ")")
            << '\n';
  std::cout << "stored    "
            << (stored.device.empty() ? "nothing: " + stored.note
                                      : "in " + db_path + " for " + stored.device +
                                            (stored.note.empty() ? "" : "; " + stored.note))
            << '\n';
  std::cout << "time      " << tuner::describe_time(e, plan) << '\n';
  // The estimate is the exhaustive sweep's; halving builds every case as exhaustive does but
  // samples fewer, by an amount only a measurement (or a replay) tells.
  if (plan.spec.search.strategy == tuner::SearchStrategy::halving)
    std::cout << "search    halving (brief rounds of " << plan.spec.search.first_samples << ", "
              << 2 * plan.spec.search.first_samples
              << ", ... samples): the time above is exhaustive's, a bound; halving samples less "
                 "and builds as much (tune --replay over an exhaustive database says how much "
                 "less)\n";
  else
    std::cout << "search    exhaustive\n";
  if (a.check && !missing.empty()) {
    std::string list;
    for (std::size_t k = 0; k < missing.size() && k < 10; ++k)
      list += (k ? ", " : "") + std::to_string(missing[k]);
    if (missing.size() > 10) list += ", ...";
    throw Error(std::to_string(missing.size()) + " of " + std::to_string(e.points) + " points of " +
                a.opt.spec_path + " are not stored in " + db_path + " (grid index " + list +
                "; a point of index k belongs to shard k mod N)");
  }
}

// `--replay EXHAUSTIVE.db`: the halving search replayed over an exhaustive sweep's stored
// samples (tuner/search/halving_replay.h); measures nothing, writes nothing.
void replay(const TuneArgs& a) {
  if (a.dry_run || !a.shard.empty() || !a.opt.db_path.empty() || !a.opt.dispatch_path.empty() ||
      !a.opt.header_path.empty() || !a.opt.report_dir.empty())
    input_error(
        "--replay measures and writes nothing: it takes no --dry-run, --shard, --db, "
        "--dispatch, --header or --report");
  tuner::SweepPlan plan = tuner::plan_sweep(a.opt.spec_path, a.opt.backend);
  if (a.opt.search) plan.spec.search.strategy = *a.opt.search;
  if (plan.spec.search.strategy != tuner::SearchStrategy::halving)
    input_error("--replay replays search: halving, and ", a.opt.spec_path,
                " searches exhaustively: add --search halving");
  std::cout << tuner::halving_replay_report(tuner::replay_halving(plan, a.replay));
}

void run(TuneArgs& a) {
  if (a.flags.given("Search")) a.opt.search = a.search.strategy;
  if (!a.replay.empty()) return replay(a);
  if (!a.shard.empty()) a.opt.shard = tuner::parse_shard(a.shard);
  if (a.check && !a.dry_run) input_error("--check needs --dry-run: it checks what is stored");
  if (a.dry_run) return dry_run(a);
  a.opt.emit = !a.no_emit && !a.opt.shard;
  a.opt.report = !a.no_report;
  tuner::Progress progress = a.quiet ? tuner::Progress::silent() : tuner::Progress::for_stderr();
  g_tune_stop = false;
  std::signal(SIGINT, mactune_tune_on_signal);
  std::signal(SIGTERM, mactune_tune_on_signal);
  // A wait for another process's lock on the database ends at the signal too.
  db::set_interrupt_flag(&g_tune_stop);
  tuner::TuneResult r;
  try {
    r = tuner::run_tune(a.opt, progress, &g_tune_stop);
  } catch (const tuner::Interrupted&) {
    db::set_interrupt_flag(nullptr);
    throw Error(
        "interrupted: every point finished before the signal is stored in the database; "
        "run the same command again to resume");
  } catch (...) {
    db::set_interrupt_flag(nullptr);
    throw;
  }
  db::set_interrupt_flag(nullptr);
  restore_signal_cleanup(SIGINT);
  restore_signal_cleanup(SIGTERM);
  if (!r.decisions.empty()) std::cout << tuner::summary_table(r.decisions) << '\n';
  std::printf(
      "tuned %zu points in %.1f s: %zu measured, %zu already stored, %zu failed, %zu break-even "
      "probes\n",
      r.points, r.seconds, r.measured, r.stored, r.failed, r.probes);
  std::printf("sampling  %.2f s of it (warm-up and samples; the rest is setup), search: %s\n",
              r.measuring_seconds, r.search.c_str());
  std::printf("database  %s\n", r.db_path.c_str());
  if (a.opt.emit) std::printf("dispatch  %s\n", r.dispatch_path.c_str());
  if (a.opt.shard)
    std::printf("shard %d/%d done: merge the shards (mactune db merge), then mactune emit\n",
                a.opt.shard->first, a.opt.shard->second);
  if (a.opt.emit && a.opt.report && !r.report_dir.empty())
    std::printf("report    %s/report.md\n", r.report_dir.c_str());
}

void add_tune(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand(
      "tune", "Sweep a spec's kernel configs x workloads on this device: store, decide, emit");
  cmd->add_option("spec", args->opt.spec_path, "Sweep spec (YAML, docs/spec.md)")->required();
  cmd->add_option("--db", args->opt.db_path, "Database (default: the spec's output.db)");
  cmd->add_option("--dispatch,-o", args->opt.dispatch_path,
                  "Dispatch table to emit (default: the spec's output.dispatch)");
  cmd->add_option("--header", args->opt.header_path, "Also emit the table as a C++ header");
  cmd->add_option("--report", args->opt.report_dir, "Report directory (default: output.report)");
  cmd->add_option_function<std::string>(
         "--backend",
         [args](const std::string& text) {
           try {
             args->opt.backend = parse_backend_request(text);
           } catch (const InputError& e) {
             input_error("--backend: ", e.what());
           }
         },
         "cpu, cuda or auto (default: the spec's device.backend)")
      ->type_name("{cpu,cuda,auto}");
  cmd->add_option("--shard", args->shard,
                  "Measure shard i of N (i/N, 0 <= i < N): points whose grid index is i mod N");
  cmd->add_flag("--no-emit", args->no_emit, "Do not decide or emit at the end");
  cmd->add_flag("--no-report", args->no_report, "Do not write the report");
  cmd->add_flag("--retry-failed", args->opt.retry_failed, "Measure failed points again");
  // The spec's search.strategy, as its table row reads it (default: the spec's).
  CLI::Option* search = args->flags.add_one(*cmd, args->search, "strategy", "--search", "Search");
  search->default_str("")->description(search->get_description() +
                                       " (default: the spec's search, docs/spec.md)");
  cmd->add_option("--replay", args->replay,
                  "Replay the halving search over the samples an exhaustive sweep of this spec "
                  "stored in this database, and compare their picks; measures nothing");
  cmd->add_flag("--dry-run", args->dry_run,
                "List the points, what is stored and the time left; measure nothing (needs no "
                "device: works for a GPU spec on a login node)");
  cmd->add_flag("--check", args->check,
                "With --dry-run: fail unless every point (of the shard) is stored");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress output (a dry run: only the summary)");
  cmd->callback([args, &app] {
    args->opt.command = "mactune tune " + args->opt.spec_path;
    (void)app;
    run(*args);
  });
}

const bool registered_tune = register_command("tune", add_tune);

}  // namespace
}  // namespace mactune::cli
