// Puts collected GPU activity on a timeline: one process per device ("GPU 0: NVIDIA H200") with
// one track per stream for kernels, copies and memsets; CUDA API calls on the track of the host
// thread that made them (nested under its phase spans: both use the profiler clock); syncs next
// to their API call; and a flow arrow from every launch to the operation it launched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/activity.h"
#include "profiler/cpu_tracer.h"
#include "profiler/timeline.h"

namespace mactune::prof {

// Pid of device d's process in a trace: above any Linux pid (pid_max <= 2^22).
constexpr int device_pid(std::uint32_t device) {
  return (1 << 22) + static_cast<int>(device);
}

struct ActivityTraceOptions {
  int host_pid = 0;                       // the process the host threads live in
  std::vector<ThreadSpans> host_threads;  // maps CUPTI thread ids to OS tids (CpuPhaseTracer)
  std::vector<std::string> device_names;  // by device id, for the process names; may be empty
};

struct ActivityTraceCounts {
  int kernels = 0, copies = 0, memsets = 0, api_calls = 0, syncs = 0, flows = 0;
  int launches_without_op = 0;  // API calls that launched nothing we saw (e.g. sync, malloc)
  int ops_without_launch = 0;   // device operations whose API call was not recorded
};

ActivityTraceCounts add_activity(Timeline& timeline, const ActivityLog& log,
                                 const ActivityTraceOptions& options);

}  // namespace mactune::prof
