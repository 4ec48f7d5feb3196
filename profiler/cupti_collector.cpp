// The CUPTI activity collector: concurrent-kernel, memcpy, memset, runtime and synchronization
// records through CUPTI's buffer callbacks, decoded as buffers complete (profiler/cupti_records.h)
// and flushed after a device synchronize at stop(). CUPTI is given the profiler clock, so GPU
// records land on the same time axis as the host phase spans.
//
// CUPTI has one subscriber slot per process in CUDA 13.0: under nsys, ncu or a debugger (or with
// NVTX_INJECTION64_PATH pointing at libcupti) enabling activity fails; the collector then reports
// why in one line and the run goes on with host spans.
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "kernels/error.h"
#include "profiler/activity.h"
#include "profiler/clock.h"
#include "profiler/cupti_api.h"
#include "profiler/cupti_records.h"

namespace mactune::prof {
namespace {

constexpr std::size_t kBufferBytes = 4u << 20;  // CUPTI's guide: 1-10 MB; Kineto uses 4 MB

using cupti::result_text;

// The loaded libcupti: only reached once make_activity_collector() found it.
const cupti::Api& lib() {
  return *cupti::api();
}

// Why enabling activity failed, for the user: the cause and what to do.
std::string refusal(const char* call, CUptiResult r) {
  std::string why = std::string(call) + " failed: " + result_text(r);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    why += " (another CUPTI client is attached: nsys, ncu, a debugger";
    if (std::getenv("NVTX_INJECTION64_PATH")) why += ", or NVTX_INJECTION64_PATH";
    why += "; let that tool trace the kernels)";
  } else if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    why += " (profiling is restricted to admin users: NVreg_RestrictProfilingToAdminUsers=0)";
  }
  return why;
}

std::uint64_t CUPTIAPI profiler_clock() {
  return static_cast<std::uint64_t>(now_ns());
}

class CuptiCollector;

// CUPTI's callbacks carry no user pointer: the one collector that is recording.
std::mutex g_mutex;  // guards g_active and the active collector's log
CuptiCollector* g_active = nullptr;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid_size);

struct ProcessSetup {
  bool clock_registered = false;
  CUptiResult callbacks = CUPTI_SUCCESS;
};

// Once per process, before any kind is enabled: our clock, then the buffer callbacks.
const ProcessSetup& process_setup() {
  static const ProcessSetup setup = [] {
    ProcessSetup s;
    s.clock_registered = lib().ActivityRegisterTimestampCallback(profiler_clock) == CUPTI_SUCCESS;
    s.callbacks = lib().ActivityRegisterCallbacks(buffer_requested, buffer_completed);
    return s;
  }();
  return setup;
}

// CUPTI's own clock minus ours, from the tightest of a few bracketing reads.
std::int64_t measure_clock_offset() {
  std::int64_t best_gap = -1, offset = 0;
  for (int i = 0; i < 16; ++i) {
    const std::int64_t a = now_ns();
    std::uint64_t c = 0;
    lib().GetTimestamp(&c);
    const std::int64_t b = now_ns();
    if (best_gap < 0 || b - a < best_gap) {
      best_gap = b - a;
      offset = (a + (b - a) / 2) - static_cast<std::int64_t>(c);
    }
  }
  return offset;
}

class CuptiCollector final : public ActivityCollector {
 public:
  CuptiCollector() { status_ = "CUPTI activity ready (not started)"; }
  ~CuptiCollector() override {
    if (recording_) stop();
  }

  std::string_view kind() const override { return "cupti"; }
  bool active() const override { return usable_; }
  std::string status() const override { return status_; }

  void start() override {
    if (!usable_ || recording_) return;
    const ProcessSetup& setup = process_setup();
    if (setup.callbacks != CUPTI_SUCCESS)
      return refuse(refusal("cuptiActivityRegisterCallbacks", setup.callbacks));
    {
      std::lock_guard lock(g_mutex);
      MACTUNE_CHECK(g_active == nullptr, "two CUPTI collectors recording at once");
      g_active = this;
      log_ = {};
      decoder_.set_clock_offset(setup.clock_registered ? 0 : measure_clock_offset());
    }
    for (CUpti_ActivityKind k : kKinds) {
      const CUptiResult r = lib().ActivityEnable(k);
      if (r != CUPTI_SUCCESS) {
        disable_enabled();
        {
          std::lock_guard lock(g_mutex);
          g_active = nullptr;
        }
        return refuse(refusal("cuptiActivityEnable", r));
      }
      enabled_.push_back(k);
    }
    // Calls that launch nothing and would bury the launches in the trace.
    for (CUpti_CallbackId cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020})
      lib().ActivityEnableRuntimeApi(cbid, 0);
    recording_ = true;
    status_ = std::string("CUPTI activity: kernels, copies, memsets, runtime API, syncs") +
              (setup.clock_registered ? "" : " (clock aligned by offset)");
  }

  void stop() override {
    if (!recording_) return;
    // Records complete only once the device is done; FlushAll never synchronizes by itself.
    const cudaError_t sync = cudaDeviceSynchronize();
    // Must not hold g_mutex: FlushAll calls buffer_completed on this thread.
    const CUptiResult flushed = lib().ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable_enabled();
    std::size_t dropped = 0;
    if (lib().ActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
    std::lock_guard lock(g_mutex);
    g_active = nullptr;
    recording_ = false;
    log_.dropped += dropped;
    if (sync != cudaSuccess)
      status_ += std::string("; cudaDeviceSynchronize before the flush failed: ") +
                 cudaGetErrorString(sync);
    if (flushed != CUPTI_SUCCESS) status_ += "; cuptiActivityFlushAll: " + result_text(flushed);
  }

  ActivityLog take() override {
    std::lock_guard lock(g_mutex);
    ActivityLog out = std::move(log_);
    log_ = {};
    sort_by_start(out);
    return out;
  }

  // Called with g_mutex held.
  void consume(std::uint8_t* buffer, std::size_t valid_size) {
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult r = lib().ActivityGetNextRecord(buffer, valid_size, &record);
      if (r != CUPTI_SUCCESS) break;  // MAX_LIMIT_REACHED: end; INVALID_KIND: a torn record
      decoder_.decode(record, log_);
    }
  }

 private:
  static constexpr CUpti_ActivityKind kKinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,  // not KERNEL: that one serializes all kernels
      CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

  void disable_enabled() {
    for (CUpti_ActivityKind k : enabled_) lib().ActivityDisable(k);
    enabled_.clear();
  }
  void refuse(std::string why) {
    usable_ = false;
    status_ = why + "; kernels are not recorded, host spans only";
  }

  bool usable_ = true;
  bool recording_ = false;
  std::string status_;
  std::vector<CUpti_ActivityKind> enabled_;
  cupti::RecordDecoder decoder_;
  ActivityLog log_;  // guarded by g_mutex while recording
};

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid_size) {
  {
    std::lock_guard lock(g_mutex);
    if (g_active && valid_size > 0) g_active->consume(buffer, valid_size);
  }
  std::free(buffer);
}

}  // namespace

std::unique_ptr<ActivityCollector> make_activity_collector() {
  std::string why;
  // Never touch CUPTI's device side without a device: without a driver some of it crashes.
  if (!cuda_device_usable(&why)) return make_null_collector(why + "; host spans only");
  std::string missing;
  if (!cupti::api(&missing))
    return make_null_collector("CUPTI unavailable: " + missing + "; host spans only");
  std::uint32_t version = 0;
  if (lib().GetVersion(&version) != CUPTI_SUCCESS || version < CUPTI_API_VERSION)
    return make_null_collector("libcupti reports API version " + std::to_string(version) +
                               ", older than the " + std::to_string(CUPTI_API_VERSION) +
                               " this build expects; host spans only");
  return std::make_unique<CuptiCollector>();
}

}  // namespace mactune::prof
