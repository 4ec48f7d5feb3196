// `mactune slurm SPEC --shards N`: a sweep as a Slurm job array (docs/slurm.md). Writes two
// batch scripts into DIR and, with --submit, submits them:
//   tune.sbatch    the array: task i measures shard i of N into DIR/shards/shard-i.db; it is
//                  requeued on preemption, and a task that runs again resumes its shard
//   finish.sbatch  after every task succeeded (afterok): merge the shards into the spec's
//                  database, check that every point is stored, emit the table, report
// It runs where users run it, on a login node that lacks the spec's device
// (tuner/search/dry_run.h), and submits only the shards that still have points to measure, so
// running it again after a failed or timed-out task picks up where the array stopped.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "cli/options.h"
#include "cli/registry.h"
#include "db/store.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/output_paths.h"
#include "tuner/search/dry_run.h"

extern char** environ;

namespace mactune::cli {
namespace {

namespace fs = std::filesystem;

struct SlurmArgs {
  std::string spec, out_dir, partition, finish_partition, gpus_per_task, time, db;
  std::optional<Backend> backend;  // none: the spec's device.backend
  int shards = 0, cpus_per_task = 0, max_parallel = 0;
  std::vector<std::string> sbatch;
  bool submit = false;
};

std::string absolute(const std::string& p) {
  return fs::absolute(p).lexically_normal().string();
}

// A word for bash: as is when it is plain, else single-quoted.
std::string sh(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_/.,:=+-@%").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// #SBATCH lines are split at whitespace by sbatch itself: a value there cannot carry any.
std::string sbatch_value(const std::string& what, const std::string& v) {
  if (v.empty() || std::any_of(v.begin(), v.end(), [](unsigned char c) { return std::isspace(c); }))
    input_error(what, " '", v, "' is empty or has white space, which an #SBATCH line cannot carry");
  return v;
}

// "0-3,5,7-9" (and "%K" to run at most K tasks at once).
std::string array_spec(const std::vector<int>& tasks, int max_parallel) {
  std::string s;
  for (std::size_t i = 0; i < tasks.size();) {
    std::size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(tasks[i]) +
         (j > i ? "-" + std::to_string(tasks[j]) : "");
    i = j + 1;
  }
  return max_parallel > 0 ? s + "%" + std::to_string(max_parallel) : s;
}

// Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (and UNLIMITED).
void check_time(const std::string& t) {
  static const std::regex re(R"(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}|UNLIMITED|unlimited|infinite)");
  if (!std::regex_match(t, re))
    input_error("--time '", t, "': expected a Slurm time limit (M, H:M:S or D-H:M:S)");
}

// A time limit for a task expected to take `seconds`: half again as long and ten minutes more
// (building the sessions is outside the time caps; nodes differ), whole minutes.
std::string time_limit(double seconds) {
  const long long m = static_cast<long long>(std::ceil((seconds * 1.5 + 600) / 60));
  char buf[32];
  if (m < 24 * 60)
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:00", m / 60, m % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:00", m / 1440, m % 1440 / 60, m % 60);
  return buf;
}

// "[type:]N" with N 0 or 1: the tuner measures one GPU (device 0 of the task).
void check_gpus(const std::string& g) {
  static const std::regex re(R"(([A-Za-z0-9_.-]+:)?([0-9]+))");
  std::smatch m;
  if (!std::regex_match(g, m, re))
    input_error("--gpus-per-task '", g, "': expected a count, optionally with a type (h200:1)");
  if (std::stoi(m[2].str()) > 1)
    input_error("--gpus-per-task ", g,
                ": mactune tune measures one GPU per task; more would sit idle (use more shards)");
}

struct Plan {
  tuner::SweepPlan sweep;
  std::vector<tuner::ShardEstimate> shards;
  std::string dir, cwd, spec, mactune, db, dispatch, header, report;
};

std::string shard_db(const Plan& p, int i) {
  return p.dir + "/shards/shard-" + std::to_string(i) + ".db";
}

std::string tune_script(const Plan& p, const SlurmArgs& a, const std::vector<int>& tasks,
                        const std::string& time) {
  const tuner::Spec& s = p.sweep.spec;
  const int n = a.shards;
  std::ostringstream o;
  o << "#!/usr/bin/env bash\n"
    << "# Written by `mactune slurm` (docs/slurm.md): the sweep " << s.name
    << " as a job array, one shard a task.\n"
    << "#   spec    " << p.spec << " (" << p.sweep.points.size() << " points, " << p.sweep.backend
    << " '" << s.device.name << "')\n"
    << "#   task i  measures shard i of " << n << " (the points whose grid index is i mod " << n
    << ") into\n#           " << p.dir << "/shards/shard-i.db\n"
    << "# A preempted task is requeued (--requeue) and resumes: it measures only what its\n"
    << "# database lacks. SIGTERM (preemption, scancel, the time limit) stops it between two\n"
    << "# samples with every finished point stored. A task that failed or was cancelled:\n"
    << "# run `mactune slurm` again, which submits the shards that are not done.\n"
    << "#SBATCH --job-name=mactune-" << s.name << "\n"
    << "#SBATCH --array=" << array_spec(tasks, a.max_parallel) << "\n"
    << "#SBATCH --requeue\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --output=" << p.dir << "/logs/tune-%A_%a.log\n"
    << "#SBATCH --chdir=" << p.cwd << "\n"
    << "#SBATCH --ntasks=1\n";
  if (!a.partition.empty()) o << "#SBATCH --partition=" << a.partition << "\n";
  if (!a.gpus_per_task.empty() && a.gpus_per_task != "0")
    o << "#SBATCH --gpus-per-task=" << a.gpus_per_task << "\n";
  if (a.cpus_per_task > 0)
    o << "#SBATCH --cpus-per-task=" << a.cpus_per_task << "\n";
  else if (p.sweep.backend == Backend::cpu)
    o << "# The CPU is what is measured: nothing else runs on the node.\n#SBATCH --exclusive\n";
  o << "#SBATCH --time=" << time << "\n";
  for (const auto& x : a.sbatch) o << "#SBATCH " << x << "\n";
  o << "set -euo pipefail\n"
    << "shard=${SLURM_ARRAY_TASK_ID:?submit this script with sbatch (or set "
       "SLURM_ARRAY_TASK_ID)}\n"
    << "echo \"mactune slurm: shard $shard/" << n << " of " << s.name
    << " on $(hostname) at $(date -u +%FT%TZ), restart "
       "${SLURM_RESTART_COUNT:-0}\"\n"
    << "exec " << sh(p.mactune) << " tune " << sh(p.spec) << " --backend " << p.sweep.backend
    << " --shard \"$shard/" << n << "\" \\\n"
    << "    --db " << sh(p.dir + "/shards/shard-") << "\"$shard\".db\n";
  return o.str();
}

std::string finish_script(const Plan& p, const SlurmArgs& a) {
  const tuner::Spec& s = p.sweep.spec;
  const std::string device = s.device.name == "*" ? "auto" : s.device.name;
  const std::string decide = " --device " + sh(device) + " --tie-tolerance " +
                             db::format_double(s.decide.tie_tolerance) + " --ties " +
                             std::string(name_of(s.decide.ties));
  std::ostringstream o;
  o << "#!/usr/bin/env bash\n"
    << "# Written by `mactune slurm` (docs/slurm.md): after every task of the array succeeded\n"
    << "# (--dependency=afterok:ARRAY_JOB), merge the shards of " << s.name
    << " into the spec's database,\n"
    << "# check that every point is stored, emit the dispatch table and write the report.\n"
    << "#SBATCH --job-name=mactune-" << s.name << "-finish\n"
    << "#SBATCH --output=" << p.dir << "/logs/finish-%j.log\n"
    << "#SBATCH --chdir=" << p.cwd << "\n"
    << "#SBATCH --ntasks=1\n"
    << "# A task that failed makes afterok impossible: cancel this job then, not keep it pending.\n"
    << "#SBATCH --kill-on-invalid-dep=yes\n"
    << "#SBATCH --time=00:30:00\n";
  const std::string& part = a.finish_partition.empty() ? a.partition : a.finish_partition;
  if (!part.empty()) o << "#SBATCH --partition=" << part << "\n";
  for (const auto& x : a.sbatch) o << "#SBATCH " << x << "\n";
  o << "set -euo pipefail\n"
    << "mactune=" << sh(p.mactune) << "\n"
    << "db=" << sh(p.db) << "\n"
    << "mkdir -p";
  std::set<std::string> dirs;
  for (const std::string& f : {p.db, p.dispatch, p.header})
    if (!f.empty() && dirs.insert(fs::path(f).parent_path().string()).second)
      o << ' ' << sh(fs::path(f).parent_path().string());
  o << "\n\"$mactune\" db merge " << sh(p.dir + "/shards/shard-") << "{0.." << a.shards - 1
    << "}.db -o \"$db\"\n"
    << "\"$mactune\" tune " << sh(p.spec) << " --backend " << p.sweep.backend
    << " --db \"$db\" --dry-run --check --quiet\n";
  if (!p.dispatch.empty()) {
    // The report prints the summary table too: once in the log is enough.
    o << "\"$mactune\" emit --db \"$db\"" << decide << (p.report.empty() ? "" : " -q") << " -o "
      << sh(p.dispatch);
    if (!p.header.empty()) o << " --header " << sh(p.header);
    o << "\n";
  }
  if (!p.report.empty())
    o << "\"$mactune\" report --db \"$db\"" << decide << " -o " << sh(p.report) << "\n";
  return o.str();
}

void write_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, text, "job script", 0755);
}

void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) input_error("cannot create '", dir, "': ", ec.message());
}

struct Ran {
  int rc = -1;
  std::string out, err;
};

// Runs a command found on PATH, its output captured (sbatch, scancel).
Ran run_command(const std::vector<std::string>& args) {
  char out_name[] = "/tmp/mactune-slurm-out-XXXXXX", err_name[] = "/tmp/mactune-slurm-err-XXXXXX";
  const int out_fd = mkstemp(out_name), err_fd = mkstemp(err_name);
  MACTUNE_CHECK(out_fd >= 0 && err_fd >= 0, "cannot create temporary files");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int e = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Ran r;
  if (e == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    r.err = std::string(std::strerror(e));
    r.rc = e == ENOENT ? 127 : 126;
  }
  close(out_fd);
  close(err_fd);
  auto slurp = [](const char* name) {
    std::ifstream in(name);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    std::remove(name);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  r.out = slurp(out_name) + r.out;
  r.err = slurp(err_name) + r.err;
  return r;
}

// sbatch --parsable prints "jobid" or "jobid;cluster".
std::string submit(const std::vector<std::string>& args) {
  const Ran r = run_command(args);
  if (r.rc == 127)
    input_error(
        "--submit: sbatch is not on PATH (run on a Slurm login node, or submit the "
        "written scripts by hand)");
  std::string cmd;
  for (const auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
  std::string first_line = r.err.substr(0, r.err.find('\n'));
  if (r.rc != 0) input_error(cmd, " failed (exit ", r.rc, "): ", first_line);
  const std::string id = r.out.substr(0, r.out.find(';'));
  if (id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit))
    input_error(cmd, ": expected a job id, got '", r.out, "'");
  return id;
}

Plan make_plan(const SlurmArgs& a) {
  BackendRequest backend = a.backend;
  if (!backend) {
    backend = tuner::requested_backend(tuner::read_spec_file(a.spec), a.spec);
    if (!backend)
      input_error(a.spec,
                  ": device.backend is auto, which each node would resolve for itself: "
                  "say what the nodes measure with --backend cpu or --backend cuda");
  }
  Plan p;
  p.sweep = tuner::plan_sweep(a.spec, std::optional<BackendRequest>(backend));
  const tuner::Spec& s = p.sweep.spec;
  const auto points = static_cast<int>(p.sweep.points.size());
  if (a.shards < 1 || a.shards > points)
    input_error("--shards ", a.shards, ": the grid of ", a.spec, " has ", points,
                " points: between 1 and ", points, " shards");
  p.cwd = sbatch_value("the working directory", fs::current_path().string());
  p.dir = sbatch_value("-o", absolute(a.out_dir.empty() ? "slurm/" + s.name : a.out_dir));
  p.spec = absolute(a.spec);
  p.mactune = fs::read_symlink("/proc/self/exe").string();
  p.db = absolute(a.db.empty() ? s.output.db : a.db);
  if (!s.output.dispatch.empty()) p.dispatch = absolute(s.output.dispatch);
  if (!s.output.header.empty()) p.header = absolute(s.output.header);
  if (!s.output.report.empty()) p.report = absolute(s.output.report);
  std::vector<std::string> timing{p.db};
  for (int i = 0; i < a.shards; ++i) timing.push_back(shard_db(p, i));
  const tuner::PointTimes times = tuner::point_times(p.sweep, timing);
  for (int i = 0; i < a.shards; ++i) {
    const tuner::StoredPoints st = tuner::stored_points(p.sweep, shard_db(p, i));
    p.shards.push_back(tuner::estimate_shard(p.sweep, st.state, times, i, a.shards, false));
  }
  return p;
}

void run(const SlurmArgs& a) {
  if (!a.time.empty()) check_time(a.time);
  if (!a.gpus_per_task.empty()) check_gpus(a.gpus_per_task);
  if (!a.partition.empty()) sbatch_value("--partition", a.partition);
  if (!a.finish_partition.empty()) sbatch_value("--finish-partition", a.finish_partition);
  for (const auto& x : a.sbatch)
    if (x.rfind("-", 0) != 0 || x.find('\n') != std::string::npos)
      input_error("--sbatch '", x, "': expected one sbatch option, e.g. --account=proj");
  SlurmArgs args = a;
  Plan p = make_plan(args);
  if (args.gpus_per_task.empty()) args.gpus_per_task = p.sweep.backend == Backend::cuda ? "1" : "0";

  std::vector<int> tasks;
  double slowest = 0;
  for (const auto& e : p.shards)
    if (e.to_measure > 0) {
      tasks.push_back(e.shard);
      slowest = std::max({slowest, e.cap_bound_s, e.expected_s.value_or(0.0)});
    }
  const std::string time = args.time.empty() ? time_limit(slowest) : args.time;

  const tuner::Spec& s = p.sweep.spec;
  std::cout << "spec      " << args.spec << ": " << p.sweep.points.size() << " points for "
            << p.sweep.backend << " '" << s.device.name << "' ("
            << (p.sweep.here ? "this machine's " + p.sweep.here->name
                             : "not this machine: " + p.sweep.not_here)
            << ")\n";
  std::cout << "shard  points  stored  to measure  time\n";
  for (const auto& e : p.shards) {
    char row[64];
    std::snprintf(row, sizeof row, "%5d  %6zu  %6zu  %10zu  ", e.shard, e.points, e.stored,
                  e.to_measure);
    std::cout << row << tuner::describe_time(e, p.sweep) << '\n';
  }
  std::cout << "time      --time=" << time
            << (args.time.empty() ? " per task: the slowest shard's estimate x 1.5 + 10 min"
                                  : " per task (as given)")
            << '\n';

  const std::string tune_path = p.dir + "/tune.sbatch", finish_path = p.dir + "/finish.sbatch";
  OutputPaths paths;
  paths.input(args.spec, "spec")
      .output(p.dir, "job directory", "-o", Output::directory)
      .output(tune_path, "job script", "", Output::file_mkdir)
      .output(finish_path, "job script", "", Output::file_mkdir);
  paths.check();
  make_dir(p.dir + "/shards");
  make_dir(p.dir + "/logs");
  if (!tasks.empty()) write_file(tune_path, tune_script(p, args, tasks, time));
  write_file(finish_path, finish_script(p, args));
  if (!tasks.empty())
    std::cout << "wrote     " << tune_path << "   (array " << array_spec(tasks, args.max_parallel)
              << ": shard i of " << args.shards << " -> " << p.dir << "/shards/shard-i.db)\n";
  else
    std::cout << "every shard is stored: no array job; the finish job merges, emits, reports\n";
  std::cout << "wrote     " << finish_path << " (afterwards: merge -> " << p.db << ", check, emit"
            << (p.report.empty() ? "" : ", report") << ")\n";

  if (!args.submit) {
    if (!tasks.empty())
      std::cout << "submit    jid=$(sbatch --parsable " << sh(tune_path)
                << ") && sbatch --dependency=afterok:$jid " << sh(finish_path) << "\n"
                << "          (or: mactune slurm ... --submit)\n";
    else
      std::cout << "submit    sbatch " << sh(finish_path) << "\n";
    return;
  }
  // Tasks of an earlier submission still queued or running would measure the same shards
  // twice, into the same files, at the same time.
  const Ran q = run_command({"squeue", "-h", "--me", "-o", "%i %j", "--name",
                             "mactune-" + s.name + ",mactune-" + s.name + "-finish"});
  if (q.rc == 0 && !q.out.empty())
    input_error("--submit: jobs of ", s.name, " are still queued or running (",
                q.out.substr(0, q.out.find('\n')),
                "): wait for them or scancel them, then run this again");
  std::string array_id;
  if (!tasks.empty()) array_id = submit({"sbatch", "--parsable", tune_path});
  std::string finish_id;
  try {
    finish_id =
        array_id.empty()
            ? submit({"sbatch", "--parsable", finish_path})
            : submit({"sbatch", "--parsable", "--dependency=afterok:" + array_id, finish_path});
  } catch (const InputError& e) {
    if (!array_id.empty()) run_command({"scancel", array_id});
    throw InputError(std::string(e.what()) +
                     (array_id.empty() ? "" : "; cancelled the array job " + array_id));
  }
  if (!array_id.empty())
    std::cout << "submitted array job " << array_id << " (" << tasks.size()
              << (tasks.size() == 1 ? " task" : " tasks") << ") and finish job " << finish_id
              << " (afterok:" << array_id << ")\n"
              << "watch     squeue -j " << array_id << "," << finish_id << "\n"
              << "logs      " << p.dir << "/logs/tune-" << array_id << "_<shard>.log, finish-"
              << finish_id << ".log\n"
              << "requeue   scontrol requeue " << array_id
              << "_<shard>   a running task: it stops, runs again and resumes\n"
              << "failed    a task that failed or was cancelled cancels the finish job: run this "
                 "command again\n";
  else
    std::cout << "submitted finish job " << finish_id << "\nwatch     squeue -j " << finish_id
              << "\n";
}

void add_slurm(CLI::App& app) {
  auto a = std::make_shared<SlurmArgs>();
  auto* cmd = app.add_subcommand(
      "slurm",
      "Write (and --submit) a Slurm job array that sweeps a spec in shards, and the job "
      "that merges, emits and reports after it");
  cmd->add_option("spec", a->spec, "Sweep spec (YAML, docs/spec.md)")->required();
  cmd->add_option("--shards", a->shards, "N: one array task per shard")->required();
  cmd->add_option("-o,--output", a->out_dir,
                  "Directory for the scripts, shards and logs "
                  "(default: slurm/<spec name>)");
  cmd->add_option("--partition,-p", a->partition, "Partition of the array tasks");
  cmd->add_option("--finish-partition", a->finish_partition,
                  "Partition of the finish job (default: --partition; it needs no GPU)");
  cmd->add_option("--gpus-per-task", a->gpus_per_task,
                  "[type:]0 or 1 (default: 1 for a cuda spec, 0 for cpu)");
  cmd->add_option("--cpus-per-task", a->cpus_per_task,
                  "CPUs per task (default: Slurm's; a cpu spec takes the node, --exclusive)")
      ->check(number_in(1));
  cmd->add_option("--time,-t", a->time,
                  "Time limit per task (default: from the time caps or an earlier run)");
  cmd->add_option("--max-parallel", a->max_parallel, "Run at most this many tasks at once")
      ->check(number_in(1));
  add_enum_option(*cmd, "--backend", a->backend,
                  "cpu or cuda (default: the spec's device.backend)");
  cmd->add_option("--db", a->db, "Merged database (default: the spec's output.db)");
  cmd->add_option("--sbatch", a->sbatch,
                  "An extra sbatch option for both jobs, e.g. --sbatch=--account=proj");
  cmd->add_flag("--submit", a->submit, "Submit both jobs (sbatch --parsable) and print their ids");
  cmd->callback([a] { run(*a); });
}

const bool registered_slurm = register_command("slurm", add_slurm);

}  // namespace
}  // namespace mactune::cli
