#include "tuner/measure/measure.h"

#include <chrono>

#include "kernels/error.h"

namespace mactune::tuner {

void SteadyTimer::start() {
  t0_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
}

double SteadyTimer::stop() {
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  return static_cast<double>(now - t0_ns_) * 1e-9;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_stop(const std::atomic<bool>* stop_flag) {
  if (stop_flag && stop_flag->load(std::memory_order_relaxed)) throw Interrupted{};
}

// The time cap never leaves a side with fewer samples than this: quartiles need a few.
constexpr int kMinSamplesAtCap = 3;

}  // namespace

GroupResult measure_group(MeasureBackend& backend, std::span<Case* const> cases,
                          const MeasurePolicy& policy, double time_cap,
                          const std::atomic<bool>* stop_flag,
                          std::span<const std::vector<double>> prior) {
  const auto t0 = std::chrono::steady_clock::now();
  const StoppingPolicy& sp = policy.stop;
  const std::size_t n = cases.size();
  // Warm-up: every case, in turn, untimed (first-touch page faults, the thread pool's wake-up,
  // instruction caches, lazy CUDA module loading). The time cap includes it (docs/spec.md):
  // a warm-up that reaches the cap stops there, and the sampling below then takes only the
  // few samples the cap always leaves.
  for (int i = 0; i < sp.warmup && seconds_since(t0) < time_cap; ++i)
    for (Case* c : cases) {
      check_stop(stop_flag);
      c->run();
    }
  GroupResult r;
  r.clock = backend.clock_begin();
  std::vector<Convergence> conv(n, Convergence(sp));
  MACTUNE_CHECK(prior.empty() || prior.size() == n, "measure_group: ", prior.size(),
                " prior sample lists for ", n, " cases");
  for (std::size_t s = 0; s < prior.size(); ++s)
    for (double t : prior[s]) conv[s].add(t);
  std::vector<int> discarded(n, 0);
  int disturbed = 0;
  auto all_done = [&] {
    for (const auto& c : conv)
      if (!c.done()) return false;
    return true;
  };
  auto enough_for_cap = [&] {
    for (const auto& c : conv)
      if (static_cast<int>(c.samples().size()) < kMinSamplesAtCap) return false;
    return true;
  };
  bool capped = false;
  for (std::size_t round = 0; !all_done(); ++round) {
    if (seconds_since(t0) >= time_cap && enough_for_cap()) {
      capped = true;
      break;
    }
    // Round k starts at case k mod n: with two cases, full mac | mac full | full mac ... (ABBA);
    // every case takes every position equally often.
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t s = (round + k) % n;
      if (conv[s].done()) continue;
      check_stop(stop_flag);
      if (policy.mode == CacheMode::cold) backend.flush_caches();
      const double t = cases[s]->sample();
      if (cases[s]->disturbed()) {
        ++disturbed;
        // Keep disturbed samples only once max_samples of them were thrown away: a machine
        // that never leaves the process alone still gets measured (and says so).
        if (discarded[s] < sp.max_samples) {
          ++discarded[s];
          continue;
        }
      }
      conv[s].add(t);
    }
  }
  const ClockState end = backend.clock_end();
  if (end.mhz) r.clock.mhz = r.clock.mhz ? (*r.clock.mhz + *end.mhz) / 2 : *end.mhz;
  r.clock.throttled_samples += end.throttled_samples + disturbed;
  r.discarded = 0;
  for (int d : discarded) r.discarded += d;
  if (!end.note.empty()) r.clock.note = end.note;
  for (std::size_t s = 0; s < n; ++s) {
    SideResult side;
    side.instance = cases[s]->instance();
    side.time = summarize(conv[s].samples());
    side.samples = conv[s].samples();
    side.stop = capped && !conv[s].done() ? StopReason::time_cap : conv[s].reason();
    side.stats = cases[s]->stats();
    r.sides.push_back(std::move(side));
  }
  r.wall_seconds = seconds_since(t0);
  return r;
}

PairResult measure_pair(MeasureBackend& backend, Case& mac, Case& full, const MeasurePolicy& policy,
                        const std::atomic<bool>* stop_flag) {
  Case* cases[2] = {&full, &mac};
  GroupResult g = measure_group(backend, cases, policy, policy.stop.time_cap, stop_flag);
  PairResult r;
  r.full = std::move(g.sides[0]);
  r.mac = std::move(g.sides[1]);
  r.clock = g.clock;
  r.wall_seconds = g.wall_seconds;
  return r;
}

std::unique_ptr<MeasureBackend> make_backend(BackendRequest requested) {
  if (requested == Backend::cpu) return make_cpu_backend();
  std::string why;
  if (auto cuda = make_cuda_backend(&why)) return cuda;
  if (requested == Backend::cuda) input_error("cuda is asked for, but ", why);
  return make_cpu_backend();
}

}  // namespace mactune::tuner
