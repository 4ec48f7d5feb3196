// profiler/dram.h with CUPTI: the profiler host API (config images, pass counts, evaluation; no
// GPU needed) and the range profiler (one user range, user replay, L2 flushed before each pass).
#include <cuda.h>  // CUcontext (types only: libcuda is never linked)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>

#include "profiler/activity.h"
#include "profiler/cupti_api.h"
#include "profiler/cupti_check.h"
#include "profiler/dram.h"

namespace mactune::prof {
namespace {

// The loaded libcupti, or Error naming why there is none.
const cupti::Api& cupti_lib() {
  std::string why;
  const cupti::Api* a = cupti::api(&why);
  if (!a) throw Error("hardware counters need CUPTI: " + why);
  return *a;
}

// A CUPTI parameter struct: zeroed (pPriv = NULL), with its structSize set.
template <class Params>
Params cupti_params(std::size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}

}  // namespace

// ---- Host side.

struct CounterConfig::Impl {
  std::string chip;
  std::vector<std::string> metrics;
  std::vector<const char*> names;  // metrics as C strings, for CUPTI
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<std::uint8_t> image;
  std::size_t passes = 0;

  ~Impl() {
    if (!host) return;
    auto p = cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = host;
    cupti_lib().ProfilerHostDeinitialize(&p);
  }
};

std::vector<std::string> supported_chips() {
  auto p = cupti_params<CUpti_Profiler_Host_GetSupportedChips_Params>(
      CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE);
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostGetSupportedChips(&p));
  std::vector<std::string> chips;
  for (std::size_t i = 0; i < p.numChips; ++i)
    if (p.ppChipNames[i]) chips.emplace_back(p.ppChipNames[i]);
  return chips;
}

namespace {

std::set<std::string> base_metrics(CUpti_Profiler_Host_Object* host) {
  std::set<std::string> names;
  for (CUpti_MetricType t :
       {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    auto p = cupti_params<CUpti_Profiler_Host_GetBaseMetrics_Params>(
        CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
    p.pHostObject = host;
    p.metricType = t;
    MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostGetBaseMetrics(&p));
    for (std::size_t i = 0; i < p.numMetrics; ++i)
      if (p.ppMetricNames[i]) names.emplace(p.ppMetricNames[i]);
  }
  return names;
}

std::string base_of(const std::string& metric) {
  return metric.substr(0, metric.find('.'));
}

}  // namespace

CounterConfig::CounterConfig(std::string chip, std::vector<std::string> metrics,
                             const std::vector<std::uint8_t>& availability)
    : impl_(std::make_unique<Impl>()) {
  MACTUNE_REQUIRE(!metrics.empty(), "no metrics to configure");
  if (availability.empty()) {
    const auto chips = supported_chips();
    if (std::find(chips.begin(), chips.end(), chip) == chips.end()) {
      std::string known;
      for (const auto& c : chips) known += (known.empty() ? "" : ", ") + c;
      input_error("CUPTI's profiler host API does not know chip '", chip, "' (known: ", known, ")");
    }
  }
  impl_->chip = std::move(chip);
  impl_->metrics = std::move(metrics);
  auto init = cupti_params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = impl_->chip.c_str();
  init.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostInitialize(&init));
  impl_->host = init.pHostObject;
  // One unknown name makes every later ConfigAddMetrics on this host object fail: check first.
  const auto known = base_metrics(impl_->host);
  for (const auto& m : impl_->metrics)
    MACTUNE_REQUIRE(known.count(base_of(m)), "unknown metric '", m, "' for chip ", impl_->chip,
                    " (no base metric '", base_of(m), "')");
  for (const auto& m : impl_->metrics) impl_->names.push_back(m.c_str());
  auto add = cupti_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = impl_->host;
  add.ppMetricNames = impl_->names.data();
  add.numMetrics = impl_->names.size();
  const CUptiResult added = cupti_lib().ProfilerHostConfigAddMetrics(&add);
  MACTUNE_REQUIRE(added == CUPTI_SUCCESS, "CUPTI rejected the metrics for chip ", impl_->chip,
                  " (a rollup or submetric that does not exist?)");
  auto size = cupti_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = impl_->host;
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostGetConfigImageSize(&size));
  impl_->image.resize(size.configImageSize);
  auto image = cupti_params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = impl_->host;
  image.configImageSize = impl_->image.size();
  image.pConfigImage = impl_->image.data();
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostGetConfigImage(&image));
  auto passes = cupti_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = impl_->image.size();
  passes.pConfigImage = impl_->image.data();
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostGetNumOfPasses(&passes));
  impl_->passes = passes.numOfPasses;
}

CounterConfig::~CounterConfig() = default;
CounterConfig::CounterConfig(CounterConfig&&) noexcept = default;
CounterConfig& CounterConfig::operator=(CounterConfig&&) noexcept = default;
const std::string& CounterConfig::chip() const {
  return impl_->chip;
}
const std::vector<std::string>& CounterConfig::metrics() const {
  return impl_->metrics;
}
std::size_t CounterConfig::passes() const {
  return impl_->passes;
}
const std::vector<std::uint8_t>& CounterConfig::image() const {
  return impl_->image;
}

std::vector<double> CounterConfig::evaluate(const std::vector<std::uint8_t>& counter_data,
                                            std::size_t range) const {
  std::vector<double> values(impl_->names.size(), 0.0);
  auto p = cupti_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  p.pHostObject = impl_->host;
  p.pCounterDataImage = counter_data.data();
  p.counterDataImageSize = counter_data.size();
  p.rangeIndex = range;
  p.ppMetricNames = const_cast<const char**>(impl_->names.data());
  p.numMetrics = impl_->names.size();
  p.pMetricValues = values.data();
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerHostEvaluateToGpuValues(&p));
  return values;
}

std::string CounterConfig::description(const std::string& metric) const {
  const std::string base = base_of(metric);
  auto p = cupti_params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  p.pHostObject = impl_->host;
  p.pMetricName = base.c_str();
  if (cupti_lib().ProfilerHostGetMetricProperties(&p) != CUPTI_SUCCESS || !p.pDescription)
    return {};
  return p.pDescription;
}

// ---- Target side.

namespace {

#define MACTUNE_CUDA_RT_CHECK(call)                                                   \
  do {                                                                                \
    const cudaError_t mactune_cuda_error_ = (call);                                   \
    if (mactune_cuda_error_ != cudaSuccess)                                           \
      ::mactune::detail::throw_check_failed(__FILE__, __LINE__, #call,                \
                                            cudaGetErrorString(mactune_cuda_error_)); \
  } while (0)

// The current CUcontext without linking libcuda: through the runtime's driver entry points.
CUcontext current_context() {
  MACTUNE_CUDA_RT_CHECK(cudaFree(nullptr));  // creates the primary context
  using GetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  MACTUNE_CUDA_RT_CHECK(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found));
  MACTUNE_CHECK(fn && found == cudaDriverEntryPointSuccess, "cuCtxGetCurrent not found");
  CUcontext ctx = nullptr;
  MACTUNE_CHECK(reinterpret_cast<GetCurrent>(fn)(&ctx) == CUDA_SUCCESS && ctx,
                "no current CUDA context");
  return ctx;
}

}  // namespace

struct RangeCounter::Impl {
  int device = 0;
  CUcontext ctx = nullptr;
  bool profiler_initialized = false;
  std::string chip;
  std::unique_ptr<CounterConfig> config;
  CUpti_RangeProfiler_Object* object = nullptr;
  std::vector<std::uint8_t> counter_data;
  void* l2_flush = nullptr;
  std::size_t l2_flush_bytes = 0;

  ~Impl() {
    if (object) {
      auto p = cupti_params<CUpti_RangeProfiler_Disable_Params>(
          CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      p.pRangeProfilerObject = object;
      cupti_lib().RangeProfilerDisable(&p);
    }
    config.reset();
    if (l2_flush) cudaFree(l2_flush);
    if (profiler_initialized) {
      auto p = cupti_params<CUpti_Profiler_DeInitialize_Params>(
          CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cupti_lib().ProfilerDeInitialize(&p);
    }
  }

  void reset_counter_data() {
    auto p = cupti_params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = object;
    p.counterDataSize = counter_data.size();
    p.pCounterData = counter_data.data();
    MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerCounterDataImageInitialize(&p));
  }

  // Evicts the working set from L2 so each pass reads it from DRAM, as a cold decode step does.
  void flush_l2() {
    MACTUNE_CUDA_RT_CHECK(cudaMemsetAsync(l2_flush, 0x5a, l2_flush_bytes, nullptr));
    MACTUNE_CUDA_RT_CHECK(cudaDeviceSynchronize());
  }
};

bool RangeCounter::available(std::string* why) {
  return cuda_device_usable(why);
}

RangeCounter::RangeCounter(std::vector<std::string> metrics) : impl_(std::make_unique<Impl>()) {
  std::string why;
  if (!available(&why)) throw Error("hardware counters: " + why);
  Impl& s = *impl_;
  MACTUNE_CUDA_RT_CHECK(cudaGetDevice(&s.device));
  s.ctx = current_context();
  auto init =
      cupti_params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerInitialize(&init));
  s.profiler_initialized = true;
  auto chip =
      cupti_params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<std::size_t>(s.device);
  MACTUNE_CUPTI_CHECK(cupti_lib().DeviceGetChipName(&chip));
  s.chip = chip.pChipName ? chip.pChipName : "";
  // Counter availability: also where missing permission (ERR_NVGPUCTRPERM) shows up first.
  auto avail = cupti_params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = s.ctx;
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerGetCounterAvailability(&avail));
  std::vector<std::uint8_t> image(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = image.data();
  MACTUNE_CUPTI_CHECK(cupti_lib().ProfilerGetCounterAvailability(&avail));
  s.config = std::make_unique<CounterConfig>(s.chip, std::move(metrics), image);

  auto enable = cupti_params<CUpti_RangeProfiler_Enable_Params>(
      CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = s.ctx;
  MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerEnable(&enable));
  s.object = enable.pRangeProfilerObject;
  std::vector<const char*> names;
  for (const auto& m : s.config->metrics()) names.push_back(m.c_str());
  auto size = cupti_params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pRangeProfilerObject = s.object;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = 1;
  size.maxNumRangeTreeNodes = 1;
  MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerGetCounterDataSize(&size));
  s.counter_data.resize(size.counterDataSize);
  s.reset_counter_data();

  int l2 = 0;
  MACTUNE_CUDA_RT_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s.device));
  s.l2_flush_bytes = 2 * static_cast<std::size_t>(std::max(l2, 1 << 20));
  MACTUNE_CUDA_RT_CHECK(cudaMalloc(&s.l2_flush, s.l2_flush_bytes));
}

RangeCounter::~RangeCounter() = default;
const std::string& RangeCounter::chip() const {
  return impl_->chip;
}

CounterResult RangeCounter::measure(const std::function<void()>& work,
                                    const std::string& range_name) {
  Impl& s = *impl_;
  s.reset_counter_data();
  auto config = cupti_params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  config.pRangeProfilerObject = s.object;
  config.configSize = s.config->image().size();
  config.pConfig = s.config->image().data();
  config.counterDataImageSize = s.counter_data.size();
  config.pCounterDataImage = s.counter_data.data();
  config.range = CUPTI_UserRange;        // exactly the work, pushed and popped by us
  config.replayMode = CUPTI_UserReplay;  // we re-run the work per pass (it is idempotent)
  config.maxRangesPerPass = 1;
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerSetConfig(&config));

  CounterResult result;
  result.metrics = s.config->metrics();
  const std::size_t max_passes = s.config->passes() + 2;
  bool all_submitted = false;
  while (!all_submitted) {
    MACTUNE_CHECK(result.passes < max_passes, "range profiler still wants passes after ",
                  result.passes, " (config says ", s.config->passes(), ")");
    s.flush_l2();
    auto start = cupti_params<CUpti_RangeProfiler_Start_Params>(
        CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = s.object;
    MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerStart(&start));
    auto push = cupti_params<CUpti_RangeProfiler_PushRange_Params>(
        CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
    push.pRangeProfilerObject = s.object;
    push.pRangeName = range_name.c_str();
    MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerPushRange(&push));
    work();
    MACTUNE_CUDA_RT_CHECK(cudaDeviceSynchronize());
    auto pop = cupti_params<CUpti_RangeProfiler_PopRange_Params>(
        CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
    pop.pRangeProfilerObject = s.object;
    MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerPopRange(&pop));
    auto stop =
        cupti_params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = s.object;
    MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerStop(&stop));
    all_submitted = stop.isAllPassSubmitted != 0;
    ++result.passes;
  }
  auto decode = cupti_params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s.object;
  MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerDecodeData(&decode));
  MACTUNE_CHECK(decode.numOfRangeDropped == 0, "the range profiler dropped ",
                decode.numOfRangeDropped, " range(s)");
  auto info = cupti_params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.counter_data.data();
  info.counterDataImageSize = s.counter_data.size();
  MACTUNE_CUPTI_CHECK(cupti_lib().RangeProfilerGetCounterDataInfo(&info));
  MACTUNE_CHECK(info.numTotalRanges >= 1, "no range in the counter data");
  result.values = s.config->evaluate(s.counter_data, 0);
  return result;
}

}  // namespace mactune::prof
