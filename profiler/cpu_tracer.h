// The CPU phase tracer: a PhaseSink (kernels/phase.h) that records every phase of a decode step
// as a span on the thread that ran it, on the profiler clock. Each thread appends to its own
// buffer (no lock after its first span), so worker threads of the CPU engine cost ~2 clock reads
// per phase. Spans become "X" events on one track per thread (profiler/timeline.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/phase.h"
#include "profiler/timeline.h"

namespace mactune::prof {

struct PhaseSpan {
  Phase phase;
  std::uint16_t instance = 0;  // index into CpuPhaseTracer::instances()
  std::uint16_t depth = 0;     // phases open on this thread when it began
  std::int64_t start_ns = 0, end_ns = 0;
};

struct ThreadSpans {
  std::int64_t os_tid = 0;       // gettid()
  std::uint32_t cupti_tid = 0;   // low 32 bits of pthread_self(), as CUPTI reports it
  std::string name;              // register_thread's name, else the pthread name
  bool named = false;            // named by register_thread
  std::vector<PhaseSpan> spans;  // in end order
  std::vector<Span> extra;       // complete spans added with CpuPhaseTracer::add_span
  int unmatched_ends = 0;        // end() whose phase was not the innermost open one
};

class CpuPhaseTracer final : public PhaseSink {
 public:
  CpuPhaseTracer();
  ~CpuPhaseTracer() override;
  CpuPhaseTracer(const CpuPhaseTracer&) = delete;
  CpuPhaseTracer& operator=(const CpuPhaseTracer&) = delete;

  void begin(Phase phase, std::string_view instance) override;
  void end(Phase phase) override;

  // Spans that begin while recording is off are dropped (warm-up steps). Toggle between steps.
  void set_recording(bool on) { recording_.store(on, std::memory_order_relaxed); }
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // Phases reported without an instance name get this one (the CPU engine names none).
  void set_default_instance(std::string_view instance);
  // Drops every span of `phase` (the decode loop records steps itself, with their stats).
  void ignore(Phase phase) { ignored_ |= 1u << static_cast<unsigned>(phase); }

  // Makes the calling thread known (so CUDA API records of it map to its track) and names it.
  void register_thread(std::string name = {});
  // A complete span on the calling thread's track (a decode step with its stats as args).
  void add_span(Span span);

  // Snapshot of every thread's spans; call while no phase is running.
  std::vector<ThreadSpans> threads() const;
  std::vector<std::string> instances() const;

  // Adds one named track per thread of process `pid` (the register_thread name, else the pthread
  // name when the thread set one, else "worker N"; registered threads first), with phase spans
  // named after the phase (cat "phase", args.instance) and the extra spans.
  void add_to(Timeline& timeline, int pid) const;

 private:
  struct Open {
    Phase phase;
    std::uint16_t instance;
    bool recorded;
    std::int64_t start_ns;
  };
  struct Buffer {
    ThreadSpans data;
    std::vector<Open> open;
    std::string last_instance;
    std::uint16_t last_instance_id = 0;
  };

  Buffer& local();
  std::uint16_t intern(Buffer& b, std::string_view instance);

  const std::uint64_t serial_;  // distinguishes tracers in the thread-local cache
  std::uint32_t ignored_ = 0;   // bit per Phase
  std::uint16_t default_instance_ = 0;
  std::atomic<bool> recording_{true};
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // guarded by mutex_ (the vector, not contents)
  std::vector<std::string> instances_;            // guarded by mutex_
};

}  // namespace mactune::prof
