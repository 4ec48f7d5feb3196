// `mactune profile`: one decode loop of the CPU or CUDA session with every phase traced. Writes
// a Chrome trace (Perfetto, chrome://tracing): one track per host thread with the phase spans
// and CUDA API calls, one per GPU stream with the kernels, and a flow from each launch to its
// kernel; prints the per-phase summary and the modeled bytes per step. `--dram` adds CUPTI
// range-profiler passes (L2 flushed before each) comparing DRAM bytes with the modeled ones;
// `--nsys` prints the nsys command for the same loop instead of running it.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/field_flags.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/device.h"
#include "kernels/file_io.h"
#include "kernels/host_memory.h"
#include "kernels/output_paths.h"
#include "kernels/session.h"
#include "profiler/activity.h"
#include "profiler/cpu_tracer.h"
#include "profiler/decode_loop.h"
#include "profiler/dram.h"
#include "profiler/nsys.h"
#include "profiler/nvtx.h"
#include "profiler/profile_trace.h"
#include "profiler/summary.h"
#include "profiler/tee_sink.h"
#include "profiler/trace_check.h"

#if MACTUNE_PROFILER_CPU_SESSION && __has_include("kernels/cpu/session.h")
#define MACTUNE_PROFILE_CPU 1
#include "kernels/cpu/session.h"
#endif
#if MACTUNE_PROFILER_CUDA && __has_include("kernels/cuda/session.h")
#define MACTUNE_PROFILE_CUDA 1
#include "kernels/cuda/device.h"
#include "kernels/cuda/session.h"
#endif

namespace mactune::cli {
namespace {

struct ProfileArgs {
  Backend backend = Backend::cpu;
  // The settings come as flags from their field tables (cli/field_flags.h).
  Problem shape{.batch = 4, .q_heads = 32, .kv_heads = 8, .head_dim = 128};
  int context = 8192;
  MacParams mac;
  ForcedHits forced;  // with --hit-rate: forced hits (exact quota per step)
  cpu::EngineConfig cpu;
  cuda::EngineConfig cuda;
  bool full = false;
  int steps = 16, warmup = 4;
  std::uint64_t seed = 1;
  std::string trace;
  bool no_cupti = false, dram = false, nsys = false;
  std::string nsys_output = "mactune-profile";
  FieldFlags flags;

  // Forced hits are on when any of their flags is given (--hit-rate, --skip-ratio, --lag...).
  bool forced_hits() const { return flags.given("forced hits"); }
  std::map<std::string, const CLI::Option*> cuda_only;  // --device, --no-cupti, --dram
};

// Flags that cannot apply to what runs are refused, not ignored: the other backend's flags,
// forced hits with --full, a skip ratio without its quota.
void check_flag_combinations(const ProfileArgs& a) {
  const bool cuda = a.backend == Backend::cuda;
  if (!cuda) {
    for (const auto& [flag, o] : a.cuda_only)
      MACTUNE_REQUIRE(o->count() == 0, flag, " applies to --backend cuda only (this is --backend ",
                      a.backend, ")");
    MACTUNE_REQUIRE(!a.flags.given("CUDA engine"),
                    "a CUDA engine flag is given with --backend cpu (see --help: CUDA engine)");
  } else {
    MACTUNE_REQUIRE(!a.flags.given("CPU engine"),
                    "a CPU engine flag is given with --backend cuda (see --help: CPU engine)");
  }
  if (a.full)
    MACTUNE_REQUIRE(!a.forced_hits() && !a.flags.given("MAC"),
                    "--full runs plain attention: the MAC and forced-hit flags do not apply");
  const bool skip_given = a.flags.option("--skip-ratio")->count() > 0;
  const bool skip_quota = a.forced.quota == ForcedQuota::skip_ratio;
  MACTUNE_REQUIRE(!skip_given || skip_quota,
                  "--skip-ratio needs --quota skip-ratio (the default quota fixes the hit rate)");
  MACTUNE_REQUIRE(!skip_quota || a.flags.option("--hit-rate")->count() == 0,
                  "--hit-rate with --quota skip-ratio: the skip-ratio quota solves the hits");
}

std::atomic<bool> g_profile_stop{false};
std::atomic<int> g_signal{0};
// The first SIGINT/SIGTERM stops the loop after the step in flight (what is measured is kept
// and written, and the command exits 128 + the signal); a second ends it at once.
extern "C" void on_signal(int sig) {
  g_profile_stop.store(true);
  g_signal.store(sig);
  restore_signal_cleanup(sig);
}

// The same loop as a command line: what `--nsys` runs under nsys (CUPTI off: nsys owns it).
std::vector<std::string> loop_command(const ProfileArgs& a) {
  std::vector<std::string> w = {
      prof::self_executable("mactune"), "profile",   "--backend",
      std::string(name_of(a.backend)),  "--context", std::to_string(a.context)};
  auto add = [&w](const std::vector<std::string>& more) {
    w.insert(w.end(), more.begin(), more.end());
  };
  add(a.flags.args("shape"));
  if (a.full) {
    w.push_back("--full");
  } else {
    add(a.flags.args("MAC"));
    if (a.forced_hits()) {
      // The quota's own value only: --skip-ratio with the skip-ratio quota, else --hit-rate.
      const std::vector<std::string> f = a.flags.args("forced hits");
      const bool skip = a.forced.quota == ForcedQuota::skip_ratio;
      for (std::size_t i = 0; i + 1 < f.size(); i += 2)
        if (f[i] != (skip ? "--hit-rate" : "--skip-ratio")) add({f[i], f[i + 1]});
    }
  }
  add(a.flags.args(a.backend == Backend::cpu ? "CPU engine" : "CUDA engine"));
  if (a.backend == Backend::cuda) add({"--device", std::to_string(a.cuda.device)});
  add({"--steps", std::to_string(a.steps), "--warmup", std::to_string(a.warmup), "--seed",
       std::to_string(a.seed), "--no-cupti"});
  return w;
}

template <class Engine>
SessionOptions<Engine> session_options(const ProfileArgs& a, const Engine& engine,
                                       PhaseSink* sink) {
  SessionOptions<Engine> o;
  o.shape = a.shape;
  o.mac = a.mac;
  o.mac_enabled = !a.full;
  if (a.forced_hits()) {
    o.forced = a.forced;
    o.forced.enabled = true;
  }
  o.engine = engine;
  o.max_context = a.context + a.warmup + a.steps + 1;
  o.phases = sink;
  return o;
}

prof::TraceCheckOptions decode_checks(const ProfileArgs& a, int steps) {
  prof::TraceCheckOptions c;
  c.min_steps = steps;
  c.phases_every_step = a.full ? std::vector<std::string>{"attend"}
                               : std::vector<std::string>{"match", "attend", "merge"};
  c.phases_where_present =
      a.full ? std::vector<std::string>{"plan", "merge"} : std::vector<std::string>{"plan"};
  return c;
}

std::string mode_text(const ProfileArgs& a) {
  if (a.full) return "full attention";
  if (!a.forced_hits()) return "MAC, natural matching";
  return "MAC, forced hit rate " + format_real(a.forced.hit_rate) + " (" +
         std::string(name_of(a.forced.coherence)) + ", lag " +
         FieldCodec<LagDistribution>::text(a.forced.lag) + ")";
}

void print_dram(const prof::DramComparison& c) {
  std::printf(
      "DRAM (%s): read %.3f MiB measured vs %.3f MiB modeled (x%.3f); L2 requests %.3f MiB; "
      "write %.3f MiB measured vs %.3f MiB modeled\n",
      c.label.c_str(), c.measured_read / 1048576.0, c.modeled_read / 1048576.0, c.read_ratio(),
      c.l2_requested / 1048576.0, c.measured_write / 1048576.0, c.modeled_write / 1048576.0);
}

template <DecodeSession Session>
void profile_session(const ProfileArgs& a, const typename Session::Engine& engine,
                     const std::string& device_label, std::vector<std::string> device_names,
                     bool is_cuda) {
  prof::CpuPhaseTracer tracer;
  tracer.ignore(Phase::step);  // the loop records each step itself, with its stats
  prof::NvtxPhaseSink nvtx;
  prof::TeeSink tee{&tracer, nvtx.active() ? &nvtx : nullptr};
  const auto opt = session_options(a, engine, tee.get());
  Session session(opt);
  const std::string instance = session.instance_name();
  tracer.set_default_instance(instance);
  // The tuner's prefill (one seed per request, from --seed); the steps draw their own inputs.
  const std::vector<int> requests = prefilled_step(session, a.shape.batch, a.context, a.seed).ids;
  auto activity = is_cuda && !a.no_cupti
                      ? prof::make_activity_collector()
                      : prof::make_null_collector(is_cuda ? "CUPTI off (--no-cupti)"
                                                          : "CPU backend: no device activity");
  std::printf("profile: %s on %s\n", instance.c_str(), device_label.c_str());
  std::printf("  shape: batch %d, context %d, Hq %d, Hkv %d, D %d, %s KV, page %d; %s\n",
              a.shape.batch, a.context, a.shape.q_heads, a.shape.kv_heads, a.shape.head_dim,
              std::string(dtype_name(a.shape.kv_dtype)).c_str(), a.shape.page_size,
              mode_text(a).c_str());
  std::printf("  activity: %s\n  NVTX: %s\n", activity->status().c_str(),
              !prof::nvtx_compiled()       ? "not in this build"
              : prof::nvtx_tool_attached() ? "a tool is attached (ranges in domain mactune)"
                                           : "no tool attached (ranges cost nothing)");
  std::fflush(stdout);

  prof::LoopOptions loop_opt;
  loop_opt.steps = a.steps;
  loop_opt.warmup = a.warmup;
  loop_opt.seed = a.seed;
  loop_opt.cuda_profiler_range = is_cuda;
  loop_opt.stop = &g_profile_stop;
  g_profile_stop = false;
  g_signal = 0;
  auto old_int = std::signal(SIGINT, on_signal);
  auto old_term = std::signal(SIGTERM, on_signal);
  prof::LoopResult loop;
  try {
    loop = prof::run_decode_loop(session, requests, opt.shape, loop_opt, tracer, *activity);
  } catch (...) {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
    throw;
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  // Interrupted: what was measured is written below, and the exit status says which signal.
  if (g_profile_stop) {
    std::printf("  interrupted: %zu measured steps kept\n", loop.steps.size());
    command_exit_code() = 128 + g_signal.load();
  }
  if (activity->status().find("host spans only") != std::string::npos && is_cuda)
    std::printf("  activity after the run: %s\n", activity->status().c_str());
  const prof::ActivityLog log = activity->take();
  if (log.dropped || log.records_without_time)
    std::printf("  CUPTI: %llu records dropped, %llu without timestamps (not shown)\n",
                static_cast<unsigned long long>(log.dropped),
                static_cast<unsigned long long>(log.records_without_time));

  if (!a.trace.empty()) {
    prof::ProfileTraceInfo info;
    info.process_name = "mactune profile (" + std::string(name_of(a.backend)) + ")";
    info.label = instance;
    info.device_names = std::move(device_names);
    prof::ActivityTraceCounts counts;
    const prof::Timeline tl = prof::make_profile_timeline(tracer, loop, log, info, &counts);
    prof::write_chrome_trace_file(a.trace, tl,
                                  {{"instance", instance},
                                   {"device", device_label},
                                   {"activity", activity->status()},
                                   {"clock", "CLOCK_MONOTONIC (ns), shared by host and CUPTI"}});
    const prof::TraceCheck check =
        prof::check_chrome_trace_file(a.trace, decode_checks(a, int(loop.steps.size())));
    std::printf("  trace: %s (%d events, %d spans on %d tracks, %d launch flows, %d kernels)\n",
                a.trace.c_str(), check.events, check.spans, check.tracks, check.flows,
                counts.kernels);
    if (!check.ok())
      std::fprintf(stderr, "mactune: warning: %s fails its structural check:\n%s", a.trace.c_str(),
                   check.summary().c_str());
  }
  std::printf("\n");
  prof::print_summary(std::cout, prof::summarize(tracer.threads(), loop.steps, log));

  if (a.dram && !is_cuda)
    std::printf("\nDRAM: the CPU backend has no hardware counters here; modeled bytes above\n");
  if (a.dram && is_cuda && !loop.steps.empty() && !g_profile_stop) {
    // A separate run of the last step's inputs, replayed per pass: never used for timing.
    const StepInputs in =
        prof::make_step_inputs(opt.shape, a.shape.batch, a.seed, a.warmup + a.steps - 1);
    const StepStats stats = session.step(requests, in.q, in.k, in.v, false).stats;
    prof::RangeCounter counter;
    const prof::CounterResult r =
        counter.measure([&] { session.step(requests, in.q, in.k, in.v, false); }, "decode step");
    std::printf("\ncounters on %s (%zu pass(es), L2 flushed before each):\n",
                counter.chip().c_str(), r.passes);
    print_dram(prof::compare_dram(a.full ? "full attention step" : "MAC step", r,
                                  double(stats.kv_bytes_read + stats.ring_bytes_read),
                                  double(stats.bytes_written)));
  }
}

void run_profile(const ProfileArgs& a) {
  MACTUNE_REQUIRE(a.steps >= 1 && a.warmup >= 0, "--steps must be >= 1 and --warmup >= 0");
  MACTUNE_REQUIRE(a.context >= 1, "--context ", a.context, " must be >= 1");
  check_flag_combinations(a);
  // Every step appends a token: the KV grows to context + warmup + steps positions.
  const double positions = double(a.context) + a.warmup + a.steps + 1;
  MACTUNE_REQUIRE(positions <= kMaxContext, "--context ", a.context, " + --warmup ", a.warmup,
                  " + --steps ", a.steps, " is ", format_real(positions), " positions; at most ",
                  kMaxContext);
  // Before minutes of profiling.
  OutputPaths().output(a.trace, "trace", "--trace").check();
  if (a.nsys) {
    prof::NsysOptions o;
    o.output = a.nsys_output;
    o.cuda = a.backend == Backend::cuda;
    std::cout << prof::nsys_command(loop_command(a), o) << '\n';
    // The loop's ranges name phases and instances, not the workload: the summary is told it,
    // so the kernels find their tune point in the tuner's database (docs/profiling.md).
    std::ostringstream w;
    w << "b=" << a.shape.batch << " ctx=" << a.context;
    if (a.forced_hits()) w << " hit=" << a.forced.hit_rate;
    w << " K=" << a.mac.ring_capacity << " r=" << a.mac.band;
    std::cerr << "# then: mactune nsys summary " << prof::shell_quote(a.nsys_output + ".sqlite")
              << " --db mactune.db --workload " << prof::shell_quote(w.str()) << '\n'
              << "#   (mactune db import-nsys " << prof::shell_quote(a.nsys_output + ".sqlite")
              << " --db mactune.db keeps its rows; nsys stats --report cuda_gpu_kern_sum,nvtx_sum "
              << prof::shell_quote(a.nsys_output + ".nsys-rep") << " is nsys' own view)\n";
    return;
  }
  // The loop makes every step's inputs up front (q, k, v of each request), and a record a step.
  const double step_floats =
      double(a.shape.batch) * (a.shape.q_heads + 2.0 * a.shape.kv_heads) * a.shape.head_dim;
  require_host_memory(
      (double(a.warmup) + a.steps) * (step_floats * 4 + 256),
      "--steps " + std::to_string(a.steps) + " with --warmup " + std::to_string(a.warmup),
      "every step's inputs, made before the loop");
  if (a.backend == Backend::cpu) {
    // The CPU session holds the KV cache and ring in host memory: too large a shape is one
    // line here, not std::bad_alloc part way through allocating.
    require_host_memory(
        session_bytes(a.shape, positions, a.full ? nullptr : &a.mac),
        "--batch " + std::to_string(a.shape.batch) + " with --context " + std::to_string(a.context),
        "the KV cache and ring of every request, grown by " + std::to_string(a.warmup + a.steps) +
            " steps");
#if MACTUNE_PROFILE_CPU
    const DeviceFingerprint fp = cpu_fingerprint(a.cpu.threads);
    profile_session<cpu::Session>(
        a, a.cpu, fp.name + " (" + fp.arch + ", " + std::to_string(fp.threads) + " threads)", {},
        false);
#else
    throw Error("--backend cpu: this build has no CPU engine (kernels/cpu)");
#endif
    return;
  }
#if MACTUNE_PROFILE_CUDA
  const cuda::GpuStatus& gpu = cuda::gpu_status();
  if (!gpu.usable) throw Error("--backend cuda: " + gpu.why_not);
  const DeviceFingerprint fp = cuda::device_fingerprint(a.cuda.device);
  std::vector<std::string> names(static_cast<std::size_t>(gpu.count));
  if (a.cuda.device < gpu.count) names[static_cast<std::size_t>(a.cuda.device)] = fp.name;
  profile_session<cuda::Session>(a, a.cuda, fp.name + " (" + fp.arch + ")", std::move(names), true);
#else
  throw Error(
      "--backend cuda: this build has no CUDA session (configure with MACTUNE_ENABLE_CUDA=ON "
      "where nvcc is installed)");
#endif
}

void add_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* cmd = app.add_subcommand(
      "profile", "Trace a decode loop: Chrome/Perfetto trace, per-phase summary, DRAM bytes");
  add_enum_option(*cmd, "--backend", a->backend, "cpu or cuda");
  cmd->add_option("--context", a->context, "tokens of KV per request before the first step")
      ->capture_default_str();
  cmd->add_flag("--full", a->full, "full attention (the baseline) instead of MAC");
  a->cuda_only["--device"] =
      cmd->add_option("--device", a->cuda.device, "CUDA device")->capture_default_str();
  // Every field of the shape, the MAC settings, the forced hits and both engines' configs.
  a->flags.add(*cmd, a->shape, "shape", "shape");
  a->flags.add(*cmd, a->mac, "mac", "MAC");
  a->flags.add(*cmd, a->forced, "forced", "forced hits");  // --hit-rate turns forced hits on
  a->flags.add(*cmd, a->cpu, "cpu", "CPU engine");
  a->flags.add(*cmd, a->cuda, "cuda", "CUDA engine");
  cmd->add_option("--steps", a->steps, "measured steps")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "steps before measuring (not traced)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "inputs and synthetic KV")->capture_default_str();
  cmd->add_option("--trace", a->trace, "write the Chrome trace JSON here");
  a->cuda_only["--no-cupti"] =
      cmd->add_flag("--no-cupti", a->no_cupti, "CUDA: record no device activity (e.g. under nsys)");
  a->cuda_only["--dram"] =
      cmd->add_flag("--dram", a->dram, "CUDA: DRAM bytes of one step by CUPTI counters vs modeled");
  cmd->add_flag("--nsys", a->nsys, "print the nsys command for this loop instead of running it");
  cmd->add_option("--nsys-output", a->nsys_output, "report name for --nsys")->capture_default_str();
  cmd->callback([a] { run_profile(*a); });
}

const bool registered_profile = register_command("profile", add_profile);

}  // namespace
}  // namespace mactune::cli
