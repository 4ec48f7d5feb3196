#include "profiler/profile_trace.h"

#include <unistd.h>

namespace mactune::prof {

Timeline make_profile_timeline(const CpuPhaseTracer& tracer, const LoopResult& loop,
                               const ActivityLog& activity, const ProfileTraceInfo& info,
                               ActivityTraceCounts* counts) {
  Timeline tl;
  const int pid = static_cast<int>(::getpid());
  tl.name_process(pid, info.process_name, 0, info.label);
  tracer.add_to(tl, pid);
  if (!tl.has_thread(pid, loop.loop_tid)) tl.name_thread(pid, loop.loop_tid, "decode loop", 0);
  for (std::size_t i = 0; i < loop.steps.size(); ++i) {
    const StepSample& s = loop.steps[i];
    const StepStats& st = s.stats;
    Span span{"step " + std::to_string(i), "step", pid, loop.loop_tid, s.start_ns, s.end_ns, {}};
    span.args = {{"instance", loop.instance},
                 {"kv_bytes_read", static_cast<std::int64_t>(st.kv_bytes_read)},
                 {"ring_bytes_read", static_cast<std::int64_t>(st.ring_bytes_read)},
                 {"bytes_written", static_cast<std::int64_t>(st.bytes_written)},
                 {"skip_ratio", st.skip_ratio()},
                 {"hit_heads", std::int64_t{st.hit_heads}},
                 {"eligible_heads", std::int64_t{st.eligible_heads}},
                 {"groups all-hit/mixed/all-miss", std::to_string(st.groups_all_hit) + "/" +
                                                       std::to_string(st.groups_mixed) + "/" +
                                                       std::to_string(st.groups_all_miss)}};
    tl.add(std::move(span));
    tl.add(Counter{"modeled MiB per step",
                   pid,
                   s.start_ns,
                   {{"KV read", double(st.kv_bytes_read) / (1 << 20)},
                    {"ring read", double(st.ring_bytes_read) / (1 << 20)},
                    {"written", double(st.bytes_written) / (1 << 20)}}});
    tl.add(Counter{"skip ratio", pid, s.start_ns, {{"per group", st.skip_ratio()}}});
  }
  ActivityTraceOptions opt;
  opt.host_pid = pid;
  opt.host_threads = tracer.threads();
  opt.device_names = info.device_names;
  const ActivityTraceCounts n = add_activity(tl, activity, opt);
  if (counts) *counts = n;
  tl.separate_overlaps();
  return tl;
}

}  // namespace mactune::prof
