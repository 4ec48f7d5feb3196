// The CPU backend: cpu::Session timed with the steady clock, cold samples after a pass over a
// buffer twice the size of the last-level cache, clock read from /proc/cpuinfo.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/session.h"
#include "kernels/device.h"
#include "kernels/error.h"
#include "kernels/host_memory.h"
#include "tuner/measure/measure.h"

namespace mactune::tuner {
namespace {

// What the OS can hand out, plus the KV arenas this process holds for reuse (its own).
long long available_bytes() {
  return static_cast<long long>(available_host_bytes() +
                                static_cast<double>(cpu::arena_cache_held_bytes()));
}

// Mean of the "cpu MHz" lines of /proc/cpuinfo (the current clock of every logical CPU).
std::optional<double> mean_cpu_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    sum += std::strtod(line.c_str() + colon + 1, nullptr);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::string resolved_isa(const std::string& isa) {
  return std::string(cpu::isa_name(cpu::resolve_isa(isa)));
}

cpu::SessionOptions session_options(const TunePoint& p, bool mac) {
  cpu::SessionOptions o;
  o.shape = p.shape;
  o.mac = p.mac;
  o.mac_enabled = mac;
  if (mac) o.forced = p.forced;
  o.engine = p.cpu;
  o.max_context = p.context + 1;  // the step appends at m = context
  return o;
}

// KV pools, ring and inputs of one session, roughly (for the memory check).
double session_bytes(const TunePoint& p, bool mac) {
  return mactune::session_bytes(p.shape, p.context, mac ? &p.mac : nullptr);
}

class CpuCase final : public Case {
 public:
  CpuCase(const TunePoint& p, bool mac, std::uint64_t seed)
      : session_(session_options(p, mac)),
        in_(prefilled_step(session_, p.shape.batch, p.context, seed)) {}

  std::string instance() const override { return session_.instance_name(); }
  void run() override {
    stats_ = session_.step(in_.ids, in_.q, in_.k, in_.v, /*advance=*/false).stats;
  }
  // The steady clock around the step. A sample during which the kernel preempted any thread of
  // the process (an involuntary context switch: another process took the core) timed the
  // scheduler as much as the step: it is marked disturbed.
  double sample() override {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    timer_.start();
    const auto& r = session_.step(in_.ids, in_.q, in_.k, in_.v, /*advance=*/false);
    const double s = timer_.stop();
    getrusage(RUSAGE_SELF, &after);
    disturbed_ = after.ru_nivcsw > before.ru_nivcsw;
    stats_ = r.stats;
    return s;
  }
  bool disturbed() const override { return disturbed_; }
  StepStats stats() const override { return stats_; }

 private:
  cpu::Session session_;
  StepInputs in_;
  SteadyTimer timer_;
  StepStats stats_;
  bool disturbed_ = false;
};

class CpuBackend final : public Backend {
 public:
  // A sweep builds and drops sessions of one shape by the dozen: their KV arenas are recycled
  // (up to a quarter of what the machine has free now) instead of faulted in afresh each time.
  CpuBackend() { cpu::set_arena_cache_bytes(static_cast<std::size_t>(available_host_bytes() / 4)); }
  ~CpuBackend() override { cpu::set_arena_cache_bytes(0); }

  std::string name() const override { return "cpu"; }
  DeviceFingerprint device() const override { return cpu_fingerprint(); }
  std::string timer_name() const override { return "steady_clock"; }
  void use_timer(const std::string& name) override {
    MACTUNE_REQUIRE(name == "auto" || name == "steady_clock", "timer '", name,
                    "' needs the cuda backend (the CPU backend times with steady_clock)");
  }
  std::vector<InstanceDesc> instances() const override { return cpu::instances(); }

  std::pair<std::string, std::string> instance_names(const TunePoint& p) const override {
    std::string isa = p.cpu.isa;
    try {
      isa = resolved_isa(p.cpu.isa);
    } catch (const InputError&) {
      // Not runnable here: the names still identify the (failed) point.
    }
    return {cpu::instance_name(true, isa, p.shape.head_dim, p.shape.kv_dtype),
            cpu::instance_name(false, isa, p.shape.head_dim, p.shape.kv_dtype)};
  }

  std::string can_run(const TunePoint& p) const override {
    for (bool mac : {true, false}) {
      const std::string why = cpu::validate(session_options(p, mac));
      if (!why.empty()) return why;
    }
    const double need = session_bytes(p, true) + 2 * session_bytes(p, false);
    const long long have = available_bytes();
    if (have > 0 && need > 0.8 * static_cast<double>(have)) {
      std::ostringstream e;
      e << "needs about " << std::fixed << std::setprecision(1) << need / (1 << 30)
        << " GiB of KV and ring memory, more than 80% of the " << double(have) / (1 << 30)
        << " GiB available";
      return e.str();
    }
    return "";
  }

  double memory_available() const override { return static_cast<double>(available_bytes()); }
  double case_bytes(const TunePoint& p, bool mac) const override { return session_bytes(p, mac); }
  std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t seed) override {
    allocate_flush_buffer();
    return std::make_unique<CpuCase>(p, mac, seed);
  }

  void flush_caches() override {
    // Read-modify-write one byte per cache line: evicts the KV of the last sample from the
    // shared LLC (and this core's private levels). Other cores' private L2 keeps at most a
    // few hundred KiB, negligible next to a decode step's KV.
    allocate_flush_buffer();
    volatile unsigned char* b = flush_.data();
    for (std::size_t i = 0; i < flush_.size(); i += 64) b[i] = static_cast<unsigned char>(b[i] + 1);
  }

  ClockState clock_begin() override { return read_clock(); }
  ClockState clock_end() override { return read_clock(); }

 private:
  // With the first case, outside any point's time cap: faulting in its pages takes seconds on
  // a loaded machine, and a backend that only plans (a dry run, `mactune slurm`) never needs it.
  void allocate_flush_buffer() {
    if (flush_.empty()) flush_.assign(std::max<std::size_t>(2 * cpu_llc_bytes(), 64u << 20), 1);
  }

  static ClockState read_clock() {
    ClockState c;
    c.mhz = mean_cpu_mhz();
    c.note = c.mhz ? "cpu MHz from /proc/cpuinfo" : "no clock information on this CPU";
    return c;
  }

  std::vector<unsigned char> flush_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace mactune::tuner
