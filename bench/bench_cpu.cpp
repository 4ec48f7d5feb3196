// bench_cpu: full attention vs MAC on the CPU engine over context x batch x hit rate, each
// result stated as bytes/s and FLOP/s from the modeled bytes (StepStats::modeled_bytes) and
// operations, and as a fraction of its roofline bound max(bytes / bandwidth, flops / FMA peak),
// with both bounds probed in the same process: the FMA peak once (probe/fma_peak), the read
// bandwidth around each point (the larger of 3-pass probes just before and just after its
// steps: a neighbour's burst during one of them does not lower the bound). `roofline` bounds
// the step by the bandwidth over a buffer of its own modeled bytes (probe_read_B/s: L3 where
// the step's KV fits in it), `roofline_dram` by DRAM's (probe_dram_B/s, a buffer of 8 x LLC);
// probe/read_bandwidth is the DRAM probe over 16 x LLC, once.
//
// Shape: one Llama-3.1-8B attention layer (32 query heads, 8 KV heads, head_dim 128), bf16 KV
// in pages of 16; MAC with K = 512, r = 256, tau = 0.45, min_context 2048, forced hits (exact
// quota per step, lag uniform in [1, 64], per head). Each point: prefill_synthetic, then
// step(advance = false) repeated on the same position. One prefilled session serves every hit
// rate of a (batch, context) (Session::set_forced), and full and MAC run in the same process.
//
//   bench_cpu [--contexts=4096,...] [--batches=1,8] [--hits=0,0.5,1] [--coherence=per-head]
//             [--isa=auto] [--threads=0] [--block_rows=16] [--chunk_tokens=256] [--match_mode=scan]
//             [--K=512]
//             [benchmark flags, e.g. --benchmark_filter=... --benchmark_repetitions=5]
// Names: <instance>/batch:B/context:L[/hit:H], e.g.
// mac_cpu_avx2_hd128_bf16/batch:1/context:32768/hit:0.50
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/probes.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_api.h"
#include "kernels/cpu/session.h"
#include "kernels/cpu/storage.h"
#include "kernels/device.h"
#include "kernels/forced.h"
#include "kernels/session.h"

namespace mactune::bench {
namespace {

struct Grid {
  std::vector<int> contexts{4096, 8192, 16384, 32768, 65536, 131072};
  std::vector<int> batches{1, 2, 4, 8};
  std::vector<double> hits{0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
  Coherence coherence = Coherence::per_head;
  int ring = 512;  // K
  cpu::EngineConfig engine;
};

cpu::SessionOptions options(bool mac, int batch, int context, int ring,
                            const cpu::EngineConfig& engine) {
  cpu::SessionOptions o;
  o.shape.batch = batch;
  o.shape.q_heads = 32;
  o.shape.kv_heads = 8;
  o.shape.head_dim = 128;
  o.shape.kv_dtype = DType::bf16;
  o.shape.page_size = 16;
  o.mac.ring_capacity = ring;
  o.mac.band = 256;
  o.mac.tau = 0.45;
  o.mac.min_context = 2048;
  o.mac_enabled = mac;
  o.engine = engine;
  o.max_context = context + 1;
  return o;
}

ForcedHits forced(double hit, Coherence coherence) {
  ForcedHits f;
  f.enabled = true;
  f.hit_rate = hit;
  f.coherence = coherence;
  f.lag = {LagKind::uniform, 1, 64};
  return f;
}

// The one live prefilled session (KV of 8 x 128K tokens is 4 GiB: never two at once), with
// the step's random inputs.
struct Live {
  bool mac = false;
  int batch = 0, context = 0;
  std::unique_ptr<cpu::Session> session;
  std::vector<int> ids;
  std::vector<float> q, k, v;

  cpu::Session& get(bool m, int b, int ctx, int ring, const cpu::EngineConfig& engine) {
    if (session && mac == m && batch == b && context == ctx) return *session;
    session.reset();
    session = std::make_unique<cpu::Session>(options(m, b, ctx, ring, engine));
    mac = m, batch = b, context = ctx;
    ids.clear();
    for (int i = 0; i < b; ++i) {
      ids.push_back(session->add_request());
      session->prefill_synthetic(ids.back(), ctx, 0x5eed + static_cast<std::uint64_t>(i));
    }
    // The step's q, k, v from the generator the tuner and the profiler use.
    StepInputs in = synthetic_step(session->options().shape, b, 7);
    q = std::move(in.q), k = std::move(in.k), v = std::move(in.v);
    return *session;
  }
};

Live& live() {
  static Live l;
  return l;
}

// FLOPs of a step: q.k and p.v over every head's KV range (4 D per head and token), plus the
// match scan of every eligible head (3 D per candidate: subtract, multiply, add).
double modeled_flops(const StepStats& s, int m, int ring_capacity, int head_dim) {
  return 4.0 * head_dim * static_cast<double>(s.head_tokens_read) +
         3.0 * head_dim * s.eligible_heads *
             static_cast<double>(match_candidates(m, ring_capacity));
}

void decode(benchmark::State& state, bool mac, int batch, int context, double hit,
            Coherence coherence, int ring, const cpu::EngineConfig& engine) {
  cpu::Session& s = live().get(mac, batch, context, ring, engine);
  if (mac) s.set_forced(forced(hit, coherence));
  const auto& ids = live().ids;
  const StepStats stats = s.step(ids, live().q, live().k, live().v, false).stats;
  const double bytes = static_cast<double>(stats.modeled_bytes());
  const double flops = modeled_flops(stats, context, ring, 128);
  // The read bandwidth of this moment, the larger of probes just before and just after: over
  // a buffer of the step's own size (the bound at the cache level its working set lives in)
  // and over one far larger than the LLC (DRAM).
  const auto ws_bytes = static_cast<std::size_t>(bytes);
  const double ws_before = read_bandwidth_at(ws_bytes, 3);
  const double dram_before = read_bandwidth_now(3);
  // Warm-up after the probes, which evict the KV from the caches.
  for (int w = 0; w < 2; ++w) s.step(ids, live().q, live().k, live().v, false);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const auto& r = s.step(ids, live().q, live().k, live().v, false);
    benchmark::DoNotOptimize(r.out.data());
  }
  const double per_step =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
      static_cast<double>(state.iterations());
  Roofline roof = machine_roofline();
  roof.read_bytes_per_s = std::max(dram_before, read_bandwidth_now(3));
  const double dram_bound = roof.bound_seconds(bytes, flops);
  state.counters["probe_dram_B/s"] = roof.read_bytes_per_s;
  state.counters["match_rows_read"] = static_cast<double>(stats.match_rows_read);
  state.counters["roofline_dram"] = dram_bound / per_step;
  roof.read_bytes_per_s = std::max(ws_before, read_bandwidth_at(ws_bytes, 3));
  state.counters["probe_read_B/s"] = roof.read_bytes_per_s;
  using benchmark::Counter;
  state.counters["bytes/s"] = Counter(bytes, Counter::kIsIterationInvariantRate);
  state.counters["flop/s"] = Counter(flops, Counter::kIsIterationInvariantRate);
  state.counters["roofline"] = roof.bound_seconds(bytes, flops) / per_step;
  state.counters["bound"] = flops / roof.flops_per_s > bytes / roof.read_bytes_per_s ? 1 : 0;
  state.counters["skip"] = stats.skip_ratio();
  state.counters["hit"] =
      stats.eligible_heads ? double(stats.hit_heads) / stats.eligible_heads : 0.0;
  state.counters["MB/step"] = bytes / 1e6;
  state.SetLabel(bytes / roof.read_bytes_per_s > flops / roof.flops_per_s ? "memory-bound"
                                                                          : "compute-bound");
}

void probe_read(benchmark::State& state) {
  cpu::ThreadPool pool(0);
  const std::size_t bytes = machine_roofline().buffer_bytes;
  double rate = 0;
  for (auto _ : state) rate = read_bandwidth(pool, bytes, 3, cpu::best_isa());
  state.counters["bytes/s"] = rate;
  state.counters["buffer_MiB"] = static_cast<double>(bytes >> 20);
  state.counters["llc_MiB"] = static_cast<double>(cpu_llc_bytes() >> 20);
}

void probe_fma(benchmark::State& state) {
  cpu::ThreadPool pool(0);
  double rate = 0;
  for (auto _ : state) rate = peak_fma(pool, cpu::best_isa(), 3);
  state.counters["flop/s"] = rate;
  state.counters["threads"] = pool.size();
}

// The attend kernel alone, one thread, over `rows` KV rows of one group that stay in cache:
// its FLOP rate against the single-thread FMA peak (the compute efficiency of the inner loop,
// apart from memory). CPU time, so a loaded machine skews it less.
void kernel_attend(benchmark::State& state, cpu::Isa isa, int group, int rows, int block_rows) {
  const int D = 128;
  const DType dt = DType::bf16;
  const cpu::KernelSet ks = cpu::kernel_set(isa, D, dt);
  // The layout of a Llama-3.1-8B layer: 8 KV heads in pages of 16 tokens; this is head 3.
  const int kv_heads = 8, head = 3;
  cpu::PagedKv kv(kv_heads, D, dt, 16);
  std::vector<std::byte*> table;
  kv.reserve(table, rows);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> k(D), v(D);
  for (int j = 0; j < rows; ++j) {
    for (float& x : k) x = u(rng);
    for (float& x : v) x = u(rng);
    kv.write(table, head, j, k.data(), v.data());
  }
  std::vector<float> q(std::size_t(group) * D), o(q.size());
  std::vector<float> lse(static_cast<std::size_t>(group));
  for (float& x : q) x = 0.13f * u(rng);
  std::vector<int> start(std::size_t(group), 0);
  cpu::AttendArgs a;
  a.q = q.data();
  a.start = start.data();
  a.nh = group;
  a.kv = kv.view(table, head);
  a.lo = 0;
  a.hi = rows;
  a.block_rows = block_rows;
  a.o = o.data();
  a.lse = lse.data();
  for (auto _ : state) {
    ks.attend(a);
    benchmark::DoNotOptimize(o.data());
  }
  const double flops = 4.0 * D * group * rows;
  state.counters["flop/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  static const double peak1 = peak_fma_thread_cpu(cpu::best_isa(), 3);
  state.counters["fma_frac"] =
      benchmark::Counter(flops / peak1, benchmark::Counter::kIsIterationInvariantRate);
}

// "1,2,4" -> {1, 2, 4}; an item that is not a number is refused with the flag's name.
template <class T>
std::vector<T> parse_list(const char* flag, const char* s) {
  std::vector<T> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw std::invalid_argument(std::string(flag) + ": '" + item + "' is not a number");
    out.push_back(static_cast<T>(x));
  }
  if (out.empty()) throw std::invalid_argument(std::string(flag) + ": an empty list");
  return out;
}

// Takes our flags out of argv (the rest goes to Google Benchmark).
Grid parse_grid(int& argc, char** argv) {
  Grid g;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::size_t n = std::strlen(flag);
      return std::strncmp(a, flag, n) == 0 && a[n] == '=' ? a + n + 1 : nullptr;
    };
    // The engine's launch parameters: one flag per field of its table (engine_config.h).
    const mactune::Field<cpu::EngineConfig>* knob = nullptr;
    const char* knob_value = nullptr;
    for (const auto& f : mactune::fields_of<cpu::EngineConfig>())
      if (const char* v = value(("--" + std::string(f.name)).c_str())) knob = &f, knob_value = v;
    if (knob)
      knob->assign(g.engine, knob_value);
    else if (const char* v = value("--contexts"))
      g.contexts = parse_list<int>("--contexts", v);
    else if (const char* v2 = value("--batches"))
      g.batches = parse_list<int>("--batches", v2);
    else if (const char* v3 = value("--hits"))
      g.hits = parse_list<double>("--hits", v3);
    else if (const char* v8 = value("--coherence"))
      g.coherence = parse_enum<Coherence>(v8);
    else if (const char* v9 = value("--K"))
      g.ring = parse_list<int>("--K", v9).front();
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return g;
}

std::string point_name(bool mac, int batch, int context, double hit, Coherence c,
                       const cpu::EngineConfig& e) {
  const std::string isa(cpu::isa_name(cpu::resolve_isa(e.isa)));
  char buf[160];
  if (mac)
    std::snprintf(buf, sizeof buf, "%s/batch:%d/context:%d/hit:%.2f%s",
                  cpu::instance_name(true, isa, 128, DType::bf16).c_str(), batch, context, hit,
                  c == Coherence::per_group ? "/per-group" : "");
  else
    std::snprintf(buf, sizeof buf, "%s/batch:%d/context:%d",
                  cpu::instance_name(false, isa, 128, DType::bf16).c_str(), batch, context);
  return buf;
}

}  // namespace
}  // namespace mactune::bench

int main(int argc, char** argv) {
  using namespace mactune::bench;
  namespace cpu = mactune::cpu;
  Grid grid;
  try {
    grid = parse_grid(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu: error: %s\n", e.what());
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const Roofline& roof = machine_roofline();
  benchmark::AddCustomContext("cpu", mactune::cpu_model_name());
  benchmark::AddCustomContext("isa", roof.isa);
  benchmark::AddCustomContext("probe_threads", std::to_string(roof.threads));
  benchmark::AddCustomContext("probe_read_GBps", std::to_string(roof.read_bytes_per_s / 1e9));
  benchmark::AddCustomContext("probe_fma_GFLOPs", std::to_string(roof.flops_per_s / 1e9));
  benchmark::RegisterBenchmark("probe/read_bandwidth", probe_read)->Iterations(1)->UseRealTime();
  benchmark::RegisterBenchmark("probe/fma_peak", probe_fma)->Iterations(1)->UseRealTime();
  for (const cpu::Isa isa : cpu::supported_isas())
    for (const int g : {1, 4, 8})
      for (const int rows : {2048, 131072})  // in L2; far past the LLC (64 MiB of this head)
        for (const int br : {16, 32}) {
          const std::string name = "kernel/attend_" + std::string(cpu::isa_name(isa)) +
                                   "_hd128_bf16/group:" + std::to_string(g) +
                                   "/rows:" + std::to_string(rows) +
                                   "/block_rows:" + std::to_string(br);
          benchmark::RegisterBenchmark(
              name.c_str(), [=](benchmark::State& s) { kernel_attend(s, isa, g, rows, br); });
        }
  const mactune::Coherence coh = grid.coherence;
  const int K = grid.ring;
  for (const int b : grid.batches)
    for (const int ctx : grid.contexts) {
      const auto& e = grid.engine;
      benchmark::RegisterBenchmark(
          point_name(false, b, ctx, 0, grid.coherence, e).c_str(),
          [=](benchmark::State& s) { decode(s, false, b, ctx, 0, coh, K, e); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      for (const double h : grid.hits)
        benchmark::RegisterBenchmark(
            point_name(true, b, ctx, h, grid.coherence, e).c_str(),
            [=](benchmark::State& s) { decode(s, true, b, ctx, h, coh, K, e); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
