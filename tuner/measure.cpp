#include "tuner/measure.h"

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

PairResult measure_pair(Backend& backend, Case& mac, Case& full, const MeasurePolicy& policy,
                        const std::atomic<bool>* stop_flag) {
  const auto t0 = std::chrono::steady_clock::now();
  const StoppingPolicy& sp = policy.stop;
  // Warm-up: both sides, alternating, untimed (first-touch page faults, the thread pool's
  // wake-up, instruction caches, lazy CUDA module loading).
  for (int i = 0; i < sp.warmup; ++i) {
    check_stop(stop_flag);
    full.run();
    mac.run();
  }
  PairResult r;
  r.clock = backend.clock_begin();
  Case* sides[2] = {&full, &mac};
  Convergence conv[2] = {Convergence(sp), Convergence(sp)};
  bool capped = false;
  for (int round = 0;; ++round) {
    const bool done0 = conv[0].done(), done1 = conv[1].done();
    if (done0 && done1) break;
    if (seconds_since(t0) >= sp.time_cap &&
        static_cast<int>(conv[0].samples().size()) >= kMinSamplesAtCap &&
        static_cast<int>(conv[1].samples().size()) >= kMinSamplesAtCap) {
      capped = true;
      break;
    }
    // ABBA: full, mac, mac, full, full, mac, ...
    const int first = (round % 2 == 0) ? 0 : 1;
    for (int k = 0; k < 2; ++k) {
      const int s = (first + k) % 2;
      if (conv[s].done()) continue;
      check_stop(stop_flag);
      if (policy.mode == CacheMode::cold) backend.flush_caches();
      conv[s].add(sides[s]->sample());
    }
  }
  const ClockState end = backend.clock_end();
  if (end.mhz) r.clock.mhz = r.clock.mhz ? (*r.clock.mhz + *end.mhz) / 2 : *end.mhz;
  r.clock.throttled_samples += end.throttled_samples;
  if (!end.note.empty()) r.clock.note = end.note;
  SideResult* out[2] = {&r.full, &r.mac};
  for (int s = 0; s < 2; ++s) {
    out[s]->instance = sides[s]->instance();
    out[s]->time = summarize(conv[s].samples());
    out[s]->stop = capped && !conv[s].done() ? StopReason::time_cap : conv[s].reason();
    out[s]->stats = sides[s]->stats();
  }
  r.wall_seconds = seconds_since(t0);
  return r;
}

std::unique_ptr<Backend> make_backend(const std::string& requested) {
  if (requested == "cpu") return make_cpu_backend();
  std::string why;
  if (auto cuda = make_cuda_backend(&why)) return cuda;
  if (requested == "cuda") input_error("the spec asks for device.backend cuda, but ", why);
  MACTUNE_REQUIRE(requested == "auto", "unknown backend '", requested, "' (cpu, cuda or auto)");
  return make_cpu_backend();
}

}  // namespace mactune::tuner
