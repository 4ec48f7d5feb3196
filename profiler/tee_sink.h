// Forwards every phase to several sinks (e.g. the CPU tracer and the NVTX sink), in order on
// begin and in reverse order on end, so ranges of all sinks nest the same way.
#pragma once

#include <initializer_list>
#include <vector>

#include "kernels/phase.h"

namespace mactune::prof {

class TeeSink final : public PhaseSink {
 public:
  TeeSink() = default;
  TeeSink(std::initializer_list<PhaseSink*> sinks) {
    for (PhaseSink* s : sinks) add(s);
  }
  void add(PhaseSink* sink) {
    if (sink) sinks_.push_back(sink);
  }
  bool empty() const { return sinks_.empty(); }
  // The sink to hand to a session: null when there is nothing to call, the one sink when there
  // is one, else this tee.
  PhaseSink* get() { return sinks_.empty() ? nullptr : sinks_.size() == 1 ? sinks_[0] : this; }

  void begin(Phase phase, std::string_view instance) override {
    for (PhaseSink* s : sinks_) s->begin(phase, instance);
  }
  void end(Phase phase) override {
    for (auto it = sinks_.rbegin(); it != sinks_.rend(); ++it) (*it)->end(phase);
  }

 private:
  std::vector<PhaseSink*> sinks_;
};

}  // namespace mactune::prof
