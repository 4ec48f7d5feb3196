// What an imported nsys report says, without the GUI: per kernel and per mactune instance
// the count, total, mean, p50 and p99 GPU time and the share of kernel time; per NVTX range
// its wall time, the kernels launched inside and their share, and the GPU idle gaps between
// those kernels (launch overhead); memcpy/memset throughput; and for mactune kernels the
// bandwidth achieved on the modeled bytes of the matching tune point of a tuner database.
//
// A range's kernels are those launched inside it (db/nsys_timeline.h): on the range's thread
// for push/pop ranges, in its process for start/end ranges, nested ranges included. Gaps are
// measured on the GPU between consecutive kernels of one range instance, by start time: the
// idle time from the latest end so far to the next start (0 where kernels overlap).
//
// Tune points. Kernels of one instance are matched to the tuner's ok measurements of that
// instance, narrowed by the workload fields that enclosing NVTX range names carry
// (`b=4 ctx=32768 hit=0.9 K=512 r=256`, as `mactune tune` names its ranges), then by the
// fields of NsysSummaryOptions::workload for those the ranges leave open, and by the report's
// GPU name where the database has measurements on it. When the remaining
// measurements agree on their modeled bytes, achieved bandwidth = modeled bytes / mean
// kernel time; the tuner's own = modeled bytes / its median. Modeled bytes are those of the
// whole decode step (KV and ring reads, writes), so for a MAC step, whose match and merge
// kernels move a small part of them, the attend kernel's figure is an upper bound.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"

namespace mactune::db {

// Durations in ns; p50 and p99 interpolate linearly between order statistics.
struct DurationStats {
  std::int64_t count = 0;
  double total_ns = 0, mean_ns = 0, p50_ns = 0, p99_ns = 0, min_ns = 0, max_ns = 0;
};
DurationStats duration_stats(std::vector<double> ns);

struct NsysKernelRow {
  std::string name;        // demangled (the report's name when it has no demangled one)
  std::string short_name;  // nsys's base name (shortName), else short_kernel_name(name)
  std::string instance;    // the linked instance's canonical name, "" when none
  std::string launch;      // grid x block, "2x1x1 x 512x1x1" ("mixed" when launches differ)
  DurationStats time;
  double share = 0;  // of the kernel time summarized, 0..1
};

struct NsysTunePoint {
  std::string workload;  // "b=8 ctx=131072 hit=1 K=512 r=256"
  std::string device;
  double modeled_bytes = 0;
  double median_s = 0;   // the tuner's median of the point (the latest measurement)
  int measurements = 0;  // that matched, all with these modeled bytes
};

struct NsysInstanceRow {
  std::string instance, family;
  std::string workload;  // fields named by the enclosing ranges, "" when none
  DurationStats time;
  double share = 0;
  std::optional<NsysTunePoint> tune_point;
  std::string no_tune_point;  // why there is none
  std::optional<double> achieved_gb_per_s() const;
  std::optional<double> tuned_gb_per_s() const;
};

struct NsysMemopRow {
  std::string kind;  // "memcpy Host-to-Device", "memset"
  DurationStats time;
  std::int64_t bytes = 0;
  double gb_per_s() const { return time.total_ns > 0 ? double(bytes) / time.total_ns : 0; }
};

struct NsysRangeKernel {
  std::string name, short_name, instance;  // as NsysKernelRow
  std::int64_t count = 0;
  double total_ns = 0;
  double share = 0;  // of the range's kernel time
};

struct NsysRangeRow {
  std::string name, domain, kind;  // domain "" is the default domain
  std::int64_t instances = 0;
  std::int64_t open = 0;  // still open when the capture ended: no wall time
  DurationStats wall;     // end - start of each closed instance
  std::int64_t kernels = 0;
  double kernel_ns = 0;    // GPU time of the kernels launched inside (all instances)
  double gpu_span_ns = 0;  // per instance, first kernel start to last kernel end, summed
  double gpu_busy_ns = 0;  // per instance, the union of its kernels' intervals, summed
  DurationStats gaps;
  DurationStats launch_latency;  // GPU start - launching API call's start, per kernel inside
  std::vector<NsysRangeKernel> kernels_inside;  // by GPU time, all of them
};

struct NsysSummary {
  std::string report_path, nsys_version, export_schema, gpus;
  std::optional<std::int64_t> session_start_utc_ns;
  std::string range_pattern;
  bool tune_db = false;  // kernels could be linked to instances and tune points
  std::int64_t kernels = 0, memops = 0, ranges = 0, marks = 0, kernels_in_ranges = 0;
  std::vector<std::string> domains;
  double kernel_ns = 0, memop_ns = 0;
  std::int64_t first_gpu_ns = 0, last_gpu_ns = 0;  // over the operations summarized
  double gpu_busy_ns = 0;                          // union of their intervals, per GPU, summed
  int gpus_used = 0;
  std::vector<NsysKernelRow> kernel_rows;      // by total time
  std::vector<NsysInstanceRow> instance_rows;  // by total time
  std::vector<NsysMemopRow> memop_rows;
  std::vector<NsysRangeRow> range_rows;  // by total wall time
  std::vector<std::string> notes;
};

struct NsysSummaryOptions {
  // Only ranges whose name (or "name@domain") matches this glob, and the GPU operations
  // launched inside them; "" for everything.
  std::string range_pattern{};
  const Store* tune_db = nullptr;  // the tuner's database, for tune points
  // Workload fields ("b=8 ctx=131072 hit=1 K=512 r=256") for kernels whose enclosing ranges
  // do not name them: what `mactune profile --nsys` prints for its report.
  std::string workload{};
};

// The summary of report `report_id` as stored in `s`.
NsysSummary summarize_nsys(const Store& s, Id report_id, const NsysSummaryOptions& o);

// Imports the report into a scratch database in the temp directory (with the instances of
// `o.tune_db`, so kernels link to them), summarizes it and removes the scratch database:
// nothing but the scratch files is written. Throws InputError as import_nsys() does.
NsysSummary summarize_nsys_report(const std::string& report_path, const NsysSummaryOptions& o);

// A kernel's base name from its demangled name, as nsys's shortName reads (what `nsys stats`
// reports with its `:base` option): the return type, the enclosing namespaces and classes, the
// template arguments and the parameter list removed.
//   "void at::native::elementwise_kernel<128, 4, ...>(int, T3)"  -> "elementwise_kernel"
//   "saxpy(double *, double *, double *, double, int)"           -> "saxpy"
// A name that is not of that form (a mangled one, unbalanced brackets) comes back unchanged.
std::string short_kernel_name(std::string_view demangled);

enum class NsysTableStyle { plain, markdown };
// Kernel names in the tables: the short ones (NsysKernelRow::short_name; kernels that share a
// short name are told apart by "(k of n)" and a note), or the full demangled ones.
enum class NsysKernelNames { short_names, full };
// Tables for a terminal or a markdown document; at most `max_rows` rows per table.
void print_nsys_summary(std::ostream& out, const NsysSummary& s, NsysTableStyle style,
                        std::size_t max_rows, NsysKernelNames names = NsysKernelNames::short_names);
// Everything, every row, times in ns and bytes, for scripts; kernels carry both names ("name",
// demangled, and "short_name").
std::string nsys_summary_json(const NsysSummary& s);

}  // namespace mactune::db
