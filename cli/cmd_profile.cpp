// `mactune profile`: one decode loop of the CPU or CUDA session with every phase traced. Writes
// a Chrome trace (Perfetto, chrome://tracing): one track per host thread with the phase spans
// and CUDA API calls, one per GPU stream with the kernels, and a flow from each launch to its
// kernel; prints the per-phase summary and the modeled bytes per step. `--dram` adds CUPTI
// range-profiler passes (L2 flushed before each) comparing DRAM bytes with the modeled ones;
// `--nsys` prints the nsys command for the same loop instead of running it.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/registry.h"
#include "kernels/device.h"
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
  std::string backend = "cpu";
  Problem shape{.batch = 4, .q_heads = 32, .kv_heads = 8, .head_dim = 128};
  std::string dtype = "bf16";
  int context = 8192;
  MacParams mac;
  std::string pick = "nearest", summary_dtype = "f32";
  bool full = false;
  std::optional<double> hit_rate;
  std::string coherence = "per-head";
  int lag_min = 1, lag_max = 64;
  int threads = 0, chunk_tokens = 256, block_rows = 16;
  std::string isa = "auto";
  int device = 0;
  bool graph = false;
  int steps = 16, warmup = 4;
  std::uint64_t seed = 1;
  std::string trace;
  bool no_cupti = false, dram = false, nsys = false;
  std::string nsys_output = "mactune-profile";
};

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
}

// The same loop as a command line: what `--nsys` runs under nsys (CUPTI off: nsys owns it).
std::vector<std::string> loop_command(const ProfileArgs& a) {
  auto s = [](auto v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  std::vector<std::string> w = {prof::self_executable("mactune"),
                                "profile",
                                "--backend",
                                a.backend,
                                "--batch",
                                s(a.shape.batch),
                                "--context",
                                s(a.context),
                                "--q-heads",
                                s(a.shape.q_heads),
                                "--kv-heads",
                                s(a.shape.kv_heads),
                                "--head-dim",
                                s(a.shape.head_dim),
                                "--dtype",
                                a.dtype,
                                "--page-size",
                                s(a.shape.page_size)};
  if (a.full) {
    w.push_back("--full");
  } else {
    for (const auto& [flag, value] :
         {std::pair<const char*, std::string>{"--K", s(a.mac.ring_capacity)},
          {"--r", s(a.mac.band)},
          {"--tau", s(a.mac.tau)},
          {"--pick", a.pick},
          {"--min-context", s(a.mac.min_context)},
          {"--summary-dtype", a.summary_dtype}})
      w.insert(w.end(), {flag, value});
    if (a.hit_rate)
      w.insert(w.end(), {"--hit-rate", s(*a.hit_rate), "--coherence", a.coherence, "--lag",
                         s(a.lag_min) + ":" + s(a.lag_max)});
  }
  if (a.backend == "cpu")
    w.insert(w.end(), {"--threads", s(a.threads), "--isa", a.isa});
  else
    w.insert(w.end(), {"--device", s(a.device)});
  if (a.graph) w.push_back("--graph");
  w.insert(w.end(),
           {"--steps", s(a.steps), "--warmup", s(a.warmup), "--seed", s(a.seed), "--no-cupti"});
  return w;
}

template <class Options>
Options session_options(const ProfileArgs& a, PhaseSink* sink) {
  Options o;
  o.shape = a.shape;
  o.shape.kv_dtype = parse_dtype(a.dtype);
  o.mac = a.mac;
  o.mac.pick = parse_pick_rule(a.pick);
  o.mac.summary_dtype = parse_dtype(a.summary_dtype);
  o.mac_enabled = !a.full;
  if (a.hit_rate) {
    MACTUNE_REQUIRE(*a.hit_rate >= 0.0 && *a.hit_rate <= 1.0, "--hit-rate ", *a.hit_rate,
                    " must be in [0, 1]");
    MACTUNE_REQUIRE(a.lag_min >= 1 && a.lag_max >= a.lag_min, "--lag ", a.lag_min, ":", a.lag_max,
                    " must be LO:HI with 1 <= LO <= HI");
    o.forced.enabled = true;
    o.forced.hit_rate = *a.hit_rate;
    o.forced.coherence = parse_coherence(a.coherence);
    o.forced.lag = {LagKind::uniform, double(a.lag_min), double(a.lag_max)};
  }
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
  if (!a.hit_rate) return "MAC, natural matching";
  char buf[96];
  std::snprintf(buf, sizeof buf, "MAC, forced hit rate %g (%s, lag %d:%d)", *a.hit_rate,
                a.coherence.c_str(), a.lag_min, a.lag_max);
  return buf;
}

void print_dram(const prof::DramComparison& c) {
  std::printf(
      "DRAM (%s): read %.3f MiB measured vs %.3f MiB modeled (x%.3f); L2 requests %.3f MiB; "
      "write %.3f MiB measured vs %.3f MiB modeled\n",
      c.label.c_str(), c.measured_read / 1048576.0, c.modeled_read / 1048576.0, c.read_ratio(),
      c.l2_requested / 1048576.0, c.measured_write / 1048576.0, c.modeled_write / 1048576.0);
}

template <class Session, class Options>
void profile_session(const ProfileArgs& a, const std::string& device_label,
                     std::vector<std::string> device_names, bool is_cuda) {
  prof::CpuPhaseTracer tracer;
  tracer.ignore(Phase::step);  // the loop records each step itself, with its stats
  prof::NvtxPhaseSink nvtx;
  prof::TeeSink tee{&tracer, nvtx.active() ? &nvtx : nullptr};
  Options opt = session_options<Options>(a, tee.get());
  if constexpr (requires { opt.engine.threads; }) {
    opt.engine.threads = a.threads;
    opt.engine.chunk_tokens = a.chunk_tokens;
    opt.engine.block_rows = a.block_rows;
    opt.engine.isa = a.isa;
  }
  if constexpr (requires { opt.engine.graph; }) {
    opt.engine.graph = a.graph;
    opt.engine.device = a.device;
  }
  Session session(opt);
  const std::string instance = session.instance_name();
  tracer.set_default_instance(instance);
  std::vector<int> requests;
  for (int b = 0; b < a.shape.batch; ++b) {
    requests.push_back(session.add_request());
    session.prefill_synthetic(requests.back(), a.context, a.seed + 7919u * unsigned(b));
  }
  auto activity = is_cuda && !a.no_cupti
                      ? prof::make_activity_collector()
                      : prof::make_null_collector(is_cuda ? "CUPTI off (--no-cupti)"
                                                          : "CPU backend: no device activity");
  std::printf("profile: %s on %s\n", instance.c_str(), device_label.c_str());
  std::printf("  shape: batch %d, context %d, Hq %d, Hkv %d, D %d, %s KV, page %d; %s\n",
              a.shape.batch, a.context, a.shape.q_heads, a.shape.kv_heads, a.shape.head_dim,
              a.dtype.c_str(), a.shape.page_size, mode_text(a).c_str());
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
  loop_opt.stop = &g_stop;
  g_stop = false;
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
  if (g_stop) std::printf("  interrupted: %zu measured steps kept\n", loop.steps.size());
  if (activity->status().find("host spans only") != std::string::npos && is_cuda)
    std::printf("  activity after the run: %s\n", activity->status().c_str());
  const prof::ActivityLog log = activity->take();
  if (log.dropped || log.records_without_time)
    std::printf("  CUPTI: %llu records dropped, %llu without timestamps (not shown)\n",
                static_cast<unsigned long long>(log.dropped),
                static_cast<unsigned long long>(log.records_without_time));

  if (!a.trace.empty()) {
    prof::ProfileTraceInfo info;
    info.process_name = "mactune profile (" + a.backend + ")";
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
  if (a.dram && is_cuda && !loop.steps.empty()) {
    // A separate run of the last step's inputs, replayed per pass: never used for timing.
    const prof::StepInputs in =
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
  MACTUNE_REQUIRE(a.backend == "cpu" || a.backend == "cuda", "--backend '", a.backend,
                  "' must be cpu or cuda");
  MACTUNE_REQUIRE(a.steps >= 1 && a.warmup >= 0, "--steps must be >= 1 and --warmup >= 0");
  MACTUNE_REQUIRE(a.context >= 1, "--context ", a.context, " must be >= 1");
  if (a.nsys) {
    prof::NsysOptions o;
    o.output = a.nsys_output;
    o.cuda = a.backend == "cuda";
    std::cout << prof::nsys_command(loop_command(a), o) << '\n';
    // The loop's ranges name phases and instances, not the workload: the summary is told it,
    // so the kernels find their tune point in the tuner's database (docs/profiling.md).
    std::ostringstream w;
    w << "b=" << a.shape.batch << " ctx=" << a.context;
    if (a.hit_rate) w << " hit=" << *a.hit_rate;
    w << " K=" << a.mac.ring_capacity << " r=" << a.mac.band;
    std::cerr << "# then: mactune nsys summary " << prof::shell_quote(a.nsys_output + ".sqlite")
              << " --db mactune.db --workload " << prof::shell_quote(w.str()) << '\n'
              << "#   (mactune db import-nsys " << prof::shell_quote(a.nsys_output + ".sqlite")
              << " --db mactune.db keeps its rows; nsys stats --report cuda_gpu_kern_sum,nvtx_sum "
              << prof::shell_quote(a.nsys_output + ".nsys-rep") << " is nsys' own view)\n";
    return;
  }
  if (a.backend == "cpu") {
#if MACTUNE_PROFILE_CPU
    const DeviceFingerprint fp = cpu_fingerprint(a.threads);
    profile_session<cpu::Session, cpu::SessionOptions>(
        a, fp.name + " (" + fp.arch + ", " + std::to_string(fp.threads) + " threads)", {}, false);
#else
    throw Error("--backend cpu: this build has no CPU engine (kernels/cpu)");
#endif
    return;
  }
#if MACTUNE_PROFILE_CUDA
  const cuda::GpuStatus& gpu = cuda::gpu_status();
  if (!gpu.usable) throw Error("--backend cuda: " + gpu.why_not);
  const DeviceFingerprint fp = cuda::device_fingerprint(a.device);
  std::vector<std::string> names(static_cast<std::size_t>(gpu.count));
  if (a.device < gpu.count) names[static_cast<std::size_t>(a.device)] = fp.name;
  profile_session<cuda::Session, cuda::SessionOptions>(a, fp.name + " (" + fp.arch + ")",
                                                       std::move(names), true);
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
  cmd->add_option("--backend", a->backend, "cpu or cuda")->capture_default_str();
  cmd->add_option("--batch", a->shape.batch, "requests decoded together")->capture_default_str();
  cmd->add_option("--context", a->context, "tokens of KV per request before the first step")
      ->capture_default_str();
  cmd->add_option("--q-heads", a->shape.q_heads, "query heads (Hq)")->capture_default_str();
  cmd->add_option("--kv-heads", a->shape.kv_heads, "KV heads (Hkv)")->capture_default_str();
  cmd->add_option("--head-dim", a->shape.head_dim, "head dimension (D)")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "KV dtype: bf16, f16 or f32")->capture_default_str();
  cmd->add_option("--page-size", a->shape.page_size, "tokens per KV page")->capture_default_str();
  cmd->add_option("--K", a->mac.ring_capacity, "ring entries per head")->capture_default_str();
  cmd->add_option("--r", a->mac.band, "band: tokens always recomputed")->capture_default_str();
  cmd->add_option("--tau", a->mac.tau, "match threshold")->capture_default_str();
  cmd->add_option("--pick", a->pick, "nearest, newest or normalized")->capture_default_str();
  cmd->add_option("--min-context", a->mac.min_context, "MAC runs from this position on")
      ->capture_default_str();
  cmd->add_option("--summary-dtype", a->summary_dtype, "ring summary dtype: f32 or bf16")
      ->capture_default_str();
  cmd->add_flag("--full", a->full, "full attention (the baseline) instead of MAC");
  cmd->add_option("--hit-rate", a->hit_rate, "force this hit rate (exact quota per step)");
  cmd->add_option("--coherence", a->coherence, "forced hits per-head or per-group")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--lag",
      [a](const std::string& s) {
        const auto colon = s.find(':');
        MACTUNE_REQUIRE(colon != std::string::npos, "--lag '", s, "' must be LO:HI");
        a->lag_min = std::stoi(s.substr(0, colon));
        a->lag_max = std::stoi(s.substr(colon + 1));
      },
      "forced-hit lag m - p, uniform in LO:HI (default 1:64)");
  cmd->add_option("--threads", a->threads, "CPU worker threads (0: all)")->capture_default_str();
  cmd->add_option("--chunk-tokens", a->chunk_tokens, "CPU: minimum tokens per work item")
      ->capture_default_str();
  cmd->add_option("--block-rows", a->block_rows, "CPU: KV rows per block")->capture_default_str();
  cmd->add_option("--isa", a->isa, "CPU: auto, avx512, avx2 or generic")->capture_default_str();
  cmd->add_option("--device", a->device, "CUDA device")->capture_default_str();
  cmd->add_flag("--graph", a->graph, "CUDA: run each step as a CUDA graph");
  cmd->add_option("--steps", a->steps, "measured steps")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "steps before measuring (not traced)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "inputs and synthetic KV")->capture_default_str();
  cmd->add_option("--trace", a->trace, "write the Chrome trace JSON here");
  cmd->add_flag("--no-cupti", a->no_cupti, "CUDA: record no device activity (e.g. under nsys)");
  cmd->add_flag("--dram", a->dram, "CUDA: DRAM bytes of one step by CUPTI counters vs modeled");
  cmd->add_flag("--nsys", a->nsys, "print the nsys command for this loop instead of running it");
  cmd->add_option("--nsys-output", a->nsys_output, "report name for --nsys")->capture_default_str();
  cmd->callback([a] { run_profile(*a); });
}

const bool registered = register_command("profile", add_profile);

}  // namespace
}  // namespace mactune::cli
