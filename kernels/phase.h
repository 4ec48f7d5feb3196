// Phase hooks: how a decode step tells a profiler where its time goes, without the kernels
// layer knowing about NVTX or any tracer. A null sink costs one branch per phase.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/enum_names.h"

namespace mactune {

enum class Phase : std::uint8_t { step, rope, append, match, plan, attend, merge, ring_write };

template <>
struct EnumNames<Phase> {
  static constexpr std::string_view what = "phase";
  static constexpr EnumName<Phase> names[] = {
      {Phase::step, "step"},     {Phase::rope, "rope"},
      {Phase::append, "append"}, {Phase::match, "match"},
      {Phase::plan, "plan"},     {Phase::attend, "attend"},
      {Phase::merge, "merge"},   {Phase::ring_write, "ring_write"}};
};

// Receives the begin and end of each phase, from whichever thread runs it (implementations
// must be thread-safe). `instance` is the canonical instance name of the code that runs it.
class PhaseSink {
 public:
  virtual ~PhaseSink() = default;
  virtual void begin(Phase phase, std::string_view instance) = 0;
  virtual void end(Phase phase) = 0;
};

// RAII span: `PhaseScope s(sink, Phase::match, name);` does nothing when sink is null.
class PhaseScope {
 public:
  PhaseScope(PhaseSink* sink, Phase phase, std::string_view instance = {})
      : sink_(sink), phase_(phase) {
    if (sink_) sink_->begin(phase_, instance);
  }
  ~PhaseScope() {
    if (sink_) sink_->end(phase_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseSink* sink_;
  Phase phase_;
};

}  // namespace mactune
