// The CUDA backend: cuda::Session timed by CUDA events around the step's kernels (no host
// launch latency, no copies), or by CUPTI kernel durations (measure timer "cupti"); cold
// samples after a device memset over twice the L2; clocks and throttle reasons from NVML
// when the driver's library is there (loaded at run time: no link dependency).
// Compiled into every build; without the CUDA kernels it only explains why there is no GPU.
#include "tuner/measure/measure.h"

#if MACTUNE_TUNER_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cmath>

#include "kernels/cuda/device.h"
#include "kernels/cuda/registry.h"
#include "kernels/cuda/session.h"
#include "kernels/error.h"
#include "profiler/activity.h"
#endif

namespace mactune::tuner {

#if !MACTUNE_TUNER_CUDA

std::unique_ptr<MeasureBackend> make_cuda_backend(std::string* why) {
  if (why) *why = "this build has no CUDA kernels (configure with CUDA to tune a GPU)";
  return nullptr;
}

std::vector<InstanceDesc> cuda_build_instances() {
  return {};
}

// Nothing to resolve "auto" against: the names as the spec gives them.
std::pair<std::string, std::string> cuda_instance_names(const TunePoint& p) {
  return {p.cuda.attend.empty() ? "auto" : p.cuda.attend,
          p.cuda.full.empty() ? "auto" : p.cuda.full};
}

#else

namespace {

// NVML through dlopen: the SM clock and the throttle reasons, when the driver ships NVML.
class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      why_ = "NVML not found (libnvidia-ml.so.1)";
      return;
    }
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    by_index_ =
        reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    clock_ =
        reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
    reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
        dlsym(lib_, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons_)
      reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
          dlsym(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    if (!init_ || !by_index_ || !clock_ || init_() != 0 || by_index_(0, &dev_) != 0) {
      why_ = "NVML could not open device 0";
      dev_ = nullptr;
    }
  }
  ClockState read() const {
    ClockState c;
    if (!dev_) {
      c.note = why_;
      return c;
    }
    unsigned mhz = 0;
    if (clock_(dev_, /*NVML_CLOCK_SM*/ 1, &mhz) == 0) c.mhz = mhz;
    unsigned long long r = 0;
    // Thermal and power slowdowns (hardware and software): the samples near this read are
    // counted as throttled. GPU idle (bit 0) and application clocks (bit 1) are not throttling.
    const unsigned long long slow = 0x4ull | 0x8ull | 0x20ull | 0x40ull | 0x80ull;
    if (reasons_ && reasons_(dev_, &r) == 0 && (r & slow)) c.throttled_samples = 1;
    c.note = "SM clock and clock-event reasons from NVML";
    return c;
  }

 private:
  void* lib_ = nullptr;
  void* dev_ = nullptr;
  std::string why_;
  int (*init_)() = nullptr;
  int (*by_index_)(unsigned, void**) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*reasons_)(void*, unsigned long long*) = nullptr;
};

cuda::SessionOptions options_of(const TunePoint& p, bool mac) {
  cuda::SessionOptions o;
  o.shape = p.shape;
  o.mac = p.mac;
  o.mac_enabled = mac;
  if (mac) o.forced = p.forced;
  o.engine = p.cuda;
  o.max_context = p.context + 1;
  return o;
}

// Kernel durations from CUPTI activity records: the sum over the step's kernels (device busy
// time; the gaps between kernels and the copies are left out). One collection per sample.
class CuptiTimer final : public SampleTimer {
 public:
  CuptiTimer() : collector_(prof::make_activity_collector()) {
    if (!collector_->active()) input_error("cupti is not usable: ", collector_->status());
  }
  Timer kind() const override { return Timer::cupti; }
  void start() override { collector_->start(); }
  double stop() override {
    collector_->stop();
    const prof::ActivityLog log = collector_->take();
    double ns = 0;
    int kernels = 0;
    for (const auto& a : log.device)
      if (a.op == prof::DeviceOp::kernel) ns += double(a.end_ns - a.start_ns), ++kernels;
    MACTUNE_CHECK(kernels > 0, "CUPTI recorded no kernel for the step (", log.dropped, " dropped)");
    return ns * 1e-9;
  }

 private:
  std::unique_ptr<prof::ActivityCollector> collector_;
};

class CudaCase final : public Case {
 public:
  CudaCase(const TunePoint& p, bool mac, std::uint64_t seed, SampleTimer* cupti)
      : session_(options_of(p, mac)),
        cupti_(cupti),
        in_(prefilled_step(session_, p.shape.batch, p.context, seed)) {}
  std::string instance() const override { return session_.instance_name(); }
  void run() override { stats_ = session_.step(in_.ids, in_.q, in_.k, in_.v, false).stats; }
  // Device time of the step's kernels between two events on the session's stream, or the
  // sum of its kernel durations from CUPTI.
  double sample() override {
    if (cupti_) cupti_->start();
    stats_ = session_.step(in_.ids, in_.q, in_.k, in_.v, false).stats;
    return cupti_ ? cupti_->stop() : session_.last_step_ms() * 1e-3;
  }
  StepStats stats() const override { return stats_; }

 private:
  cuda::Session session_;
  SampleTimer* cupti_;  // null: CUDA events
  StepInputs in_;
  StepStats stats_;
};

class CudaBackend final : public MeasureBackend {
 public:
  CudaBackend() {
    int l2 = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
    flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 64u << 20);
    if (cudaMalloc(&flush_, flush_bytes_) != cudaSuccess) {
      flush_ = nullptr;
      throw Error("cannot allocate the L2 flush buffer on the GPU");
    }
  }
  ~CudaBackend() override {
    if (flush_) cudaFree(flush_);
  }
  Backend kind() const override { return Backend::cuda; }
  DeviceFingerprint device() const override { return cuda::device_fingerprint(0); }
  Timer timer() const override { return cupti_ ? Timer::cupti : Timer::cuda_events; }
  void use_timer(std::optional<Timer> timer) override {
    MACTUNE_REQUIRE(!timer || backend_of(*timer) == Backend::cuda, "timer '", name_of(*timer),
                    "' is not a GPU timer (cuda_events or cupti)");
    cupti_.reset();
    if (timer == Timer::cupti) cupti_ = std::make_unique<CuptiTimer>();
  }
  std::vector<InstanceDesc> instances() const override { return cuda::instances(); }
  std::pair<std::string, std::string> instance_names(const TunePoint& p) const override {
    return cuda_instance_names(p);
  }
  std::string can_run(const TunePoint& p) const override {
    const cuda::EngineConfig e = p.cuda;
    try {
      cuda::select_instance(cuda::attend_instances(), p.shape, e.attend);
      cuda::select_instance(cuda::full_instances(), p.shape, e.full);
      cuda::select_instance(cuda::match_instances(), p.shape, e.match);
      cuda::select_instance(cuda::merge_instances(), p.shape, e.merge);
    } catch (const InputError& err) {
      return err.what();
    }
    return "";
  }
  double memory_available() const override {
    std::size_t free = 0, total = 0;
    return cudaMemGetInfo(&free, &total) == cudaSuccess ? static_cast<double>(free) : 0.0;
  }
  // KV pools of both sides; the session's workspace is small next to them.
  double case_bytes(const TunePoint& p, bool mac) const override {
    const double pages = std::ceil((p.context + 1.0) / p.shape.page_size) * p.shape.page_size;
    double b = double(p.shape.batch) * p.shape.kv_heads * pages * p.shape.head_dim * 2 *
               dtype_size(p.shape.kv_dtype);
    if (mac)
      b += double(p.shape.batch) * p.shape.q_heads * p.mac.ring_capacity *
           (p.shape.head_dim * (dtype_size(p.shape.kv_dtype) + dtype_size(p.mac.summary_dtype)) +
            4.0);
    return b;
  }
  std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t seed) override {
    return std::make_unique<CudaCase>(p, mac, seed, cupti_.get());
  }
  void flush_caches() override {
    if (cudaMemset(flush_, static_cast<int>(++flushes_ & 0xff), flush_bytes_) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess)
      throw Error("the L2 flush (cudaMemset) failed");
  }
  ClockState clock_begin() override { return nvml_.read(); }
  ClockState clock_end() override { return nvml_.read(); }

 private:
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  unsigned flushes_ = 0;
  Nvml nvml_;
  std::unique_ptr<CuptiTimer> cupti_;
};

}  // namespace

std::vector<InstanceDesc> cuda_build_instances() {
  return cuda::instances();
}

// The registry's choice for "auto" depends on the shape alone, not on the GPU: the same names
// on a login node as on the node that measures.
std::pair<std::string, std::string> cuda_instance_names(const TunePoint& p) {
  const cuda::EngineConfig& e = p.cuda;
  std::string mac = e.attend.empty() ? "auto" : e.attend, full = e.full.empty() ? "auto" : e.full;
  try {
    mac = cuda::select_instance(cuda::attend_instances(), p.shape, e.attend).name;
  } catch (const InputError&) {
  }
  try {
    full = cuda::select_instance(cuda::full_instances(), p.shape, e.full).name;
  } catch (const InputError&) {
  }
  return {mac, full};
}

std::unique_ptr<MeasureBackend> make_cuda_backend(std::string* why) {
  const cuda::GpuStatus& g = cuda::gpu_status();
  if (!g.usable) {
    if (why) *why = "no usable GPU: " + g.why_not;
    return nullptr;
  }
  return std::make_unique<CudaBackend>();
}

#endif

}  // namespace mactune::tuner
