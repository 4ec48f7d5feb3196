#include "profiler/activity_trace.h"

#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

namespace mactune::prof {
namespace {

// Synthetic tids for host threads CUPTI saw but the tracer did not (driver-internal threads).
constexpr std::int64_t kUnknownThreadTidBase = 1'800'000'000;

const char* op_cat(DeviceOp op) {
  switch (op) {
    case DeviceOp::kernel:
      return "kernel";
    case DeviceOp::memcpy:
      return "memcpy";
    case DeviceOp::memset:
      return "memset";
  }
  return "gpu";
}

}  // namespace

ActivityTraceCounts add_activity(Timeline& tl, const ActivityLog& log,
                                 const ActivityTraceOptions& opt) {
  ActivityTraceCounts n;
  // ---- Host side: API calls on the track of their thread.
  std::unordered_map<std::uint32_t, std::int64_t> tid_of;  // CUPTI thread id -> trace tid
  for (const auto& t : opt.host_threads) tid_of.emplace(t.cupti_tid, t.os_tid);
  std::int64_t next_unknown = kUnknownThreadTidBase;
  auto host_tid = [&](std::uint32_t cupti_tid) {
    auto it = tid_of.find(cupti_tid);
    if (it != tid_of.end()) return it->second;
    const std::int64_t tid = next_unknown++;
    tid_of.emplace(cupti_tid, tid);
    char name[48];
    std::snprintf(name, sizeof name, "CUDA thread 0x%08x", cupti_tid);
    tl.name_thread(opt.host_pid, tid, name, 1000);
    return tid;
  };
  struct Launch {
    std::int64_t tid, mid_ns;
  };
  std::unordered_map<std::uint32_t, Launch> launch_of;  // correlation id -> API call
  std::set<std::uint32_t> launched;
  for (const ApiCall& a : log.api) {
    const std::int64_t tid = host_tid(a.thread);
    Span s{a.name, "cuda_api", opt.host_pid, tid, a.start_ns, a.end_ns, {}};
    s.args.push_back({"correlation", static_cast<std::int64_t>(a.correlation)});
    if (a.return_value != 0)
      s.args.push_back({"return_value", static_cast<std::int64_t>(a.return_value)});
    if (a.driver) s.args.push_back({"api", std::string("driver")});
    tl.add(std::move(s));
    launch_of[a.correlation] = {tid, a.start_ns + (a.end_ns - a.start_ns) / 2};
    ++n.api_calls;
  }
  for (const SyncActivity& y : log.sync) {
    auto it = launch_of.find(y.correlation);
    std::int64_t tid;
    if (it != launch_of.end()) {
      tid = it->second.tid;
    } else {
      tid = kUnknownThreadTidBase - 1;  // one shared track for syncs without their API call
      if (!tl.has_thread(opt.host_pid, tid)) tl.name_thread(opt.host_pid, tid, "CUDA sync", 999);
    }
    Span s{y.type, "sync", opt.host_pid, tid, y.start_ns, y.end_ns, {}};
    s.args.push_back({"stream", static_cast<std::int64_t>(y.stream)});
    s.args.push_back({"correlation", static_cast<std::int64_t>(y.correlation)});
    tl.add(std::move(s));
    ++n.syncs;
  }
  // ---- Device side: one process per device, one track per stream.
  std::set<std::uint32_t> devices;
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams;
  for (const DeviceActivity& d : log.device) {
    devices.insert(d.device);
    streams.insert({d.device, d.stream});
    const int pid = device_pid(d.device);
    Span s{d.name,     op_cat(d.op), pid, static_cast<std::int64_t>(d.stream),
           d.start_ns, d.end_ns,     {}};
    s.args.push_back({"correlation", static_cast<std::int64_t>(d.correlation)});
    if (d.op == DeviceOp::kernel) {
      ++n.kernels;
      char dims[96];
      std::snprintf(dims, sizeof dims, "[%d, %d, %d]", d.grid[0], d.grid[1], d.grid[2]);
      s.args.push_back({"grid", std::string(dims)});
      std::snprintf(dims, sizeof dims, "[%d, %d, %d]", d.block[0], d.block[1], d.block[2]);
      s.args.push_back({"block", std::string(dims)});
      s.args.push_back({"registers per thread", std::int64_t{d.registers_per_thread}});
      s.args.push_back({"shared memory (static)", std::int64_t{d.static_shared_bytes}});
      s.args.push_back({"shared memory (dynamic)", std::int64_t{d.dynamic_shared_bytes}});
      if (d.graph_id != 0) {
        s.args.push_back({"graph", static_cast<std::int64_t>(d.graph_id)});
        s.args.push_back({"graph node", static_cast<std::int64_t>(d.graph_node_id)});
      }
    } else {
      (d.op == DeviceOp::memcpy ? n.copies : n.memsets) += 1;
      s.args.push_back({"bytes", static_cast<std::int64_t>(d.bytes)});
      if (d.end_ns > d.start_ns)
        s.args.push_back({"GB/s", static_cast<double>(d.bytes) / double(d.end_ns - d.start_ns)});
    }
    tl.add(std::move(s));
    auto it = launch_of.find(d.correlation);
    if (it == launch_of.end()) {
      ++n.ops_without_launch;
      continue;
    }
    launched.insert(d.correlation);
    // Graph kernels share their graph launch's correlation id: the id must be unique per arrow.
    const std::uint64_t id = (static_cast<std::uint64_t>(d.correlation) << 20) |
                             (static_cast<std::uint64_t>(n.flows) & 0xfffff);
    tl.add(Flow{id, "launch", "launch", opt.host_pid, it->second.tid, it->second.mid_ns, pid,
                static_cast<std::int64_t>(d.stream), d.start_ns});
    ++n.flows;
  }
  n.launches_without_op = static_cast<int>(launch_of.size() - launched.size());
  for (std::uint32_t dev : devices) {
    std::string name = "GPU " + std::to_string(dev);
    if (dev < opt.device_names.size() && !opt.device_names[dev].empty())
      name += ": " + opt.device_names[dev];
    tl.name_process(device_pid(dev), name, 10 + static_cast<int>(dev));
  }
  for (const auto& [dev, stream] : streams)
    tl.name_thread(device_pid(dev), stream, "stream " + std::to_string(stream),
                   static_cast<int>(stream));
  return n;
}

}  // namespace mactune::prof
