// GPU activity as the profiler keeps it, independent of CUPTI's versioned record structs: kernels,
// copies and memsets on device streams, the CUDA API calls that launched them (joined by the
// correlation id), and synchronizations. An ActivityCollector produces them; the real one uses
// CUPTI (profiler/cupti_collector.cpp), the null one explains why there is nothing, and a fake
// one replays a given log (tests, dry runs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mactune::prof {

enum class DeviceOp : std::uint8_t { kernel, memcpy, memset };

// One operation that ran on a device stream. Times are on the profiler clock (ns).
struct DeviceActivity {
  DeviceOp op = DeviceOp::kernel;
  std::string name;  // kernel: demangled name; memcpy: "Memcpy HtoD"; memset: "Memset"
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t device = 0, context = 0, stream = 0;
  std::uint32_t correlation = 0;  // equal to the launching API call's
  // Kernels only.
  int grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int static_shared_bytes = 0, dynamic_shared_bytes = 0;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;
  // Copies and memsets.
  std::uint64_t bytes = 0;
};

// One CUDA runtime or driver API call on a host thread.
struct ApiCall {
  std::string name;  // "cudaLaunchKernel", "cuLaunchKernelEx", ...
  bool driver = false;
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t process = 0;
  std::uint32_t thread = 0;  // as CUPTI reports it: low 32 bits of pthread_self()
  std::uint32_t correlation = 0;
  std::uint32_t return_value = 0;  // cudaError_t / CUresult
};

// A host thread waiting for the device (event, stream or context synchronize, stream wait).
struct SyncActivity {
  std::string type;  // "stream synchronize", "context synchronize", "event synchronize", ...
  std::int64_t start_ns = 0, end_ns = 0;
  std::uint32_t context = 0, stream = 0;
  std::uint32_t correlation = 0;
};

struct ActivityLog {
  std::vector<DeviceActivity> device;
  std::vector<ApiCall> api;
  std::vector<SyncActivity> sync;
  std::uint64_t dropped = 0;               // records CUPTI could not store
  std::uint64_t records_without_time = 0;  // records with unknown (0) timestamps: skipped
  std::uint64_t other_records = 0;         // kinds we do not convert (overhead, ...)
  bool empty() const { return device.empty() && api.empty() && sync.empty(); }
};

// Collects device activity between start() and stop().
class ActivityCollector {
 public:
  virtual ~ActivityCollector() = default;
  virtual std::string_view kind() const = 0;  // "cupti", "null", "fake"
  // Whether start() will record device activity. When false, status() says why.
  virtual bool active() const = 0;
  // One line for the user: what is recorded, or why nothing is.
  virtual std::string status() const = 0;
  virtual void start() = 0;
  // Waits for the device, flushes every buffer and stops recording.
  virtual void stop() = 0;
  // The records since start(), sorted by start time; the collector is left empty.
  virtual ActivityLog take() = 0;
};

// Records nothing; status() is `reason`.
std::unique_ptr<ActivityCollector> make_null_collector(std::string reason);

// Replays `log` (between start and stop, take() returns it once).
class FakeCollector final : public ActivityCollector {
 public:
  explicit FakeCollector(ActivityLog log) : log_(std::move(log)) {}
  std::string_view kind() const override { return "fake"; }
  bool active() const override { return true; }
  std::string status() const override {
    return "fake activity (" + std::to_string(n()) + " records)";
  }
  void start() override { ++starts; }
  void stop() override { ++stops; }
  ActivityLog take() override;
  int starts = 0, stops = 0;

 private:
  std::size_t n() const { return log_.device.size() + log_.api.size() + log_.sync.size(); }
  ActivityLog log_;
};

// The CUPTI collector when this build has CUPTI, a GPU is usable (cudaGetDeviceCount > 0) and
// no other CUPTI client holds the subscriber slot; otherwise a null collector whose status()
// names the reason. Creating it touches no CUPTI device API when no GPU is usable.
std::unique_ptr<ActivityCollector> make_activity_collector();

// Whether this build has CUPTI, and whether a CUDA device is usable: decided once per process
// with cudaGetDeviceCount (no driver, no device and the stub library all say no). `why` gets
// one line when not usable.
bool cupti_compiled();
bool cuda_device_usable(std::string* why = nullptr);

// Sorts every list of `log` by start time (CUPTI delivers records in no particular order).
void sort_by_start(ActivityLog& log);

}  // namespace mactune::prof
