// The CPU backend: cpu::Session timed with the steady clock, cold samples after a pass over a
// buffer twice the size of the last-level cache, clock read from /proc/cpuinfo.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/session.h"
#include "kernels/device.h"
#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/host_memory.h"
#include "tuner/measure/measure.h"
#include "tuner/spec/expr.h"

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

// A session prefilled for one side of a point, and its step's inputs: what a case runs.
struct Prefilled {
  cpu::Session session;
  StepInputs in;
};

// What decides a prefilled session's contents: every session option but the forced hits, and
// the seed. The forced hits are set on a kept session when it is handed out (set_forced): they
// choose what a step does, never what the prefill wrote.
std::string prefill_key(const cpu::SessionOptions& o, std::uint64_t seed) {
  std::string key = o.mac_enabled ? "mac|" + fields_text(o.mac) : "full";
  key.append("|").append(fields_text(o.shape)).append("|").append(fields_text(o.engine));
  key.append("|max_context=").append(std::to_string(o.max_context));
  key.append("|rope_theta=").append(format_number(o.rope_theta));
  return key.append("|seed=").append(std::to_string(seed));
}

// The prefilled sessions of cases that ended, kept for the next case of the same key, up to a
// byte budget (the oldest go first). A sweep builds each shape's sessions again at every hit
// rate, and the break-even search at every probe: each time the same KV cache and ring from the
// same seed (81 of the quick spec's 200 s on 2 cores went to prefill and setup). A kept session
// is what a fresh one is after its warm-up: a step with advance = false leaves every position
// and the forced-hit counter where they were, and what it rewrites (position m's KV row and its
// ring slot, the entry of m - K in a fresh session until its first step) is rewritten by every
// step alike; the entry of m is no candidate of the step at m. tests/tuner/test_measure.cpp
// (a reused case against a fresh one) and tests/cpu/test_session.cpp (set_forced on a stepped
// session against a fresh one, output and decisions) check it.
class SessionPool {
 public:
  explicit SessionPool(double budget_bytes) : budget_(budget_bytes) {}

  // The kept session of `key` (removed from the pool), or none.
  std::optional<Prefilled> take(const std::string& key) {
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->key != key) continue;
      std::optional<Prefilled> out(std::move(it->state));
      held_ -= it->bytes;
      kept_.erase(it);
      return out;
    }
    return std::nullopt;
  }
  void give_back(std::string key, Prefilled state, double bytes) {
    if (bytes > budget_) return;
    while (!kept_.empty() && held_ + bytes > budget_) drop_oldest();
    held_ += bytes;
    kept_.push_back({std::move(key), std::move(state), bytes});
  }
  void clear() {
    while (!kept_.empty()) drop_oldest();
  }
  double held_bytes() const { return held_; }

 private:
  struct Kept {
    std::string key;
    Prefilled state;
    double bytes = 0;
  };
  void drop_oldest() {
    held_ -= kept_.front().bytes;
    kept_.erase(kept_.begin());
  }

  double budget_;
  double held_ = 0;
  std::vector<Kept> kept_;  // oldest first
};

class CpuCase final : public Case {
 public:
  CpuCase(Prefilled state, std::string key, double bytes, std::weak_ptr<SessionPool> pool)
      : state_(std::move(state)), key_(std::move(key)), bytes_(bytes), pool_(std::move(pool)) {}
  ~CpuCase() override {
    if (const auto pool = pool_.lock()) pool->give_back(std::move(key_), std::move(state_), bytes_);
  }

  std::string instance() const override { return state_.session.instance_name(); }
  void run() override {
    const StepInputs& in = state_.in;
    stats_ = state_.session.step(in.ids, in.q, in.k, in.v, /*advance=*/false).stats;
  }
  // The steady clock around the step. A sample during which the kernel preempted any thread of
  // the process (an involuntary context switch: another process took the core) timed the
  // scheduler as much as the step: it is marked disturbed.
  double sample() override {
    const StepInputs& in = state_.in;
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    timer_.start();
    const auto& r = state_.session.step(in.ids, in.q, in.k, in.v, /*advance=*/false);
    const double s = timer_.stop();
    getrusage(RUSAGE_SELF, &after);
    disturbed_ = after.ru_nivcsw > before.ru_nivcsw;
    stats_ = r.stats;
    return s;
  }
  bool disturbed() const override { return disturbed_; }
  StepStats stats() const override { return stats_; }

 private:
  Prefilled state_;
  std::string key_;
  double bytes_ = 0;
  std::weak_ptr<SessionPool> pool_;  // where the session goes when the case ends
  SteadyTimer timer_;
  StepStats stats_;
  bool disturbed_ = false;
};

class CpuBackend final : public MeasureBackend {
 public:
  // A sweep builds and drops sessions of one shape by the dozen: their KV arenas are recycled
  // (up to a quarter of what the machine has free now) instead of faulted in afresh each time.
  // Prefilled sessions are kept likewise (SessionPool), within half of it: prefill is most of
  // a sweep's setup (a batch-4 64K session of the quick spec takes 6 CPU-s), and the search
  // revisits every bucket each round, so a pool too small for them all misses on every probe.
  // What it holds counts as available: a case that needs the memory has the pool emptied first.
  CpuBackend() : pool_(std::make_shared<SessionPool>(available_host_bytes() / 2)) {
    cpu::set_arena_cache_bytes(static_cast<std::size_t>(available_host_bytes() / 4));
  }
  ~CpuBackend() override {
    pool_->clear();  // its sessions' arenas go to the cache, which then lets them go
    cpu::set_arena_cache_bytes(0);
  }

  Backend kind() const override { return Backend::cpu; }
  DeviceFingerprint device() const override { return cpu_fingerprint(); }
  Timer timer() const override { return Timer::steady_clock; }
  void use_timer(std::optional<Timer> timer) override {
    MACTUNE_REQUIRE(!timer || backend_of(*timer) == Backend::cpu, "timer '", name_of(*timer),
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
    const double have = memory_available();
    if (have > 0 && need > 0.8 * static_cast<double>(have)) {
      std::ostringstream e;
      e << "needs about " << std::fixed << std::setprecision(1) << need / (1 << 30)
        << " GiB of KV and ring memory, more than 80% of the " << double(have) / (1 << 30)
        << " GiB available";
      return e.str();
    }
    return "";
  }

  // Kept sessions count as available: a case that needs their memory has them dropped first.
  double memory_available() const override {
    return static_cast<double>(available_bytes()) + pool_->held_bytes();
  }
  double case_bytes(const TunePoint& p, bool mac) const override { return session_bytes(p, mac); }
  std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t seed) override {
    allocate_flush_buffer();
    const cpu::SessionOptions opt = session_options(p, mac);
    std::string key = prefill_key(opt, seed);
    const double bytes = session_bytes(p, mac);
    std::optional<Prefilled> state = pool_->take(key);
    if (state) {
      state->session.set_forced(opt.forced);
    } else {
      if (bytes > 0.8 * static_cast<double>(available_bytes())) pool_->clear();
      cpu::Session session(opt);
      StepInputs in = prefilled_step(session, p.shape.batch, p.context, seed);
      state.emplace(Prefilled{std::move(session), std::move(in)});
    }
    return std::make_unique<CpuCase>(std::move(*state), std::move(key), bytes, pool_);
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

  std::shared_ptr<SessionPool> pool_;  // shared with the cases, which may outlive the backend
  std::vector<unsigned char> flush_;
};

}  // namespace

std::unique_ptr<MeasureBackend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace mactune::tuner
