// Assembles the timeline of one profiled decode loop: the CPU tracer's per-thread phase spans,
// one "step N" span per measured step on the loop thread (args: modeled bytes, skip ratio, hits),
// counter tracks of the modeled bytes and the skip ratio, and the GPU activity with launch flows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/activity.h"
#include "profiler/activity_trace.h"
#include "profiler/cpu_tracer.h"
#include "profiler/decode_loop.h"
#include "profiler/timeline.h"

namespace mactune::prof {

struct ProfileTraceInfo {
  std::string process_name = "mactune profile";
  std::string label;                      // shown beside the process name (shape, backend)
  std::vector<std::string> device_names;  // by CUDA device id
};

Timeline make_profile_timeline(const CpuPhaseTracer& tracer, const LoopResult& loop,
                               const ActivityLog& activity, const ProfileTraceInfo& info,
                               ActivityTraceCounts* counts = nullptr);

}  // namespace mactune::prof
