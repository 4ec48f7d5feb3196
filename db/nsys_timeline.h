// The rows of an nsys export that mactune imports, read version-independently (see
// nsys_export.h), each GPU operation joined to the API call that launched it and to the
// innermost NVTX range open at that launch.
//
// Launches. A kernel, memcpy or memset carries the correlation id of the CUDA API call that
// launched it. A report can hold several API rows with one correlation id: nsys 2022 records a
// runtime call and its versioned entry point (`cudaLaunchKernel` around
// `cudaLaunchKernel_v7000`), and driver calls made by a runtime call share its id. The
// outermost of them (earliest start, then latest end) is the launch; ids are per process.
//
// Attribution. Push/pop ranges nest per thread and start/end ranges belong to the process
// (NVTX's "thread ranges" and "process ranges"): an operation belongs to the push/pop ranges of
// its launching thread and the start/end ranges of its process that contain the launch time,
// ends included. The innermost (latest start, then earliest end) is its range. The launch is
// used, not the GPU time, which can fall after the range closed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/nsys_export.h"

namespace mactune::db::nsys {

using InstanceId = std::int64_t;  // a row of `instances`, 0 for none

struct Range {
  std::int64_t seq = 0;  // rowid in NVTX_EVENTS
  std::int64_t start = 0;
  std::optional<std::int64_t> end{};  // none for marks and for ranges open when capture ended
  std::string kind{};                 // "push_pop" | "start_end" | "mark"
  std::string name{}, domain{};       // domain "" is NVTX's default domain
  std::optional<std::int64_t> global_tid{}, end_global_tid{};
  InstanceId instance = 0;

  bool is_range() const { return kind != "mark"; }
};

struct Launch {
  std::int64_t global_tid = 0;
  std::int64_t start = 0;  // ns
};

// What kernels, copies and memsets share.
struct GpuOp {
  std::int64_t seq = 0;  // rowid in its table
  std::int64_t start = 0, end = 0;
  std::optional<std::int64_t> gpu{}, stream{}, correlation{}, pid{}, graph_node{};
  std::optional<Launch> launch{};
  const Range* range = nullptr;  // innermost NVTX range around the launch
};

struct Kernel : GpuOp {
  std::string name{}, short_name{};
  std::optional<std::int64_t> dims[6]{};  // grid x, y, z, block x, y, z
  std::optional<std::int64_t> registers{}, static_smem{}, dynamic_smem{};
  InstanceId instance = 0;  // by its own name, else by the nearest enclosing range naming one
};

struct Memop : GpuOp {
  std::string kind{};                               // "memcpy" | "memset"
  std::string copy_kind{}, src_kind{}, dst_kind{};  // labels ("Host-to-Device", "Pinned")
  std::optional<std::int64_t> bytes{}, value{};
};

struct Timeline {
  std::vector<Range> ranges{};  // ranges and marks, in (start, seq) order
  std::vector<Kernel> kernels{};
  std::vector<Memop> memops{};
  std::vector<std::string> notes{};  // what the report lacked or held that is not imported
};

// Reads every range, kernel, memcpy and memset of `e` exactly once. `link` names the
// instance a kernel or range name refers to (0 for none). Throws InputError naming a missing
// required column.
Timeline read_timeline(const Export& e, const std::function<InstanceId(std::string_view)>& link);

}  // namespace mactune::db::nsys
