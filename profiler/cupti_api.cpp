#include "profiler/cupti_api.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

namespace mactune::prof::cupti {
namespace {

constexpr const char* kSoname = "libcupti.so.13";  // the CUPTI 13 ABI these headers describe

template <class Fn>
bool bind(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("MACTUNE_CUPTI_LIBRARY")) c.emplace_back(p);
  c.emplace_back(kSoname);
  if (const std::string dir = executable_dir(); !dir.empty()) c.push_back(dir + "/" + kSoname);
  if (const char* home = std::getenv("CUDA_HOME")) {
    c.push_back(std::string(home) + "/lib64/" + kSoname);
    c.push_back(std::string(home) + "/extras/CUPTI/lib64/" + kSoname);
  }
#ifdef MACTUNE_CUPTI_LIBRARY_DIR
  c.push_back(std::string(MACTUNE_CUPTI_LIBRARY_DIR) + "/" + kSoname);
#endif
  c.push_back(std::string("/usr/local/cuda/lib64/") + kSoname);
  c.push_back(std::string("/usr/local/cuda/extras/CUPTI/lib64/") + kSoname);
  return c;
}

struct Loaded {
  Api api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded r;
  void* lib = nullptr;
  std::string tried;
  for (const std::string& path : candidates()) {
    lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (!lib) {
    r.why = std::string(kSoname) + " not found (tried " + tried +
            "; set MACTUNE_CUPTI_LIBRARY or LD_LIBRARY_PATH)";
    return r;
  }
  Api& a = r.api;
  const bool all =
      bind(lib, "cuptiActivityDisable", a.ActivityDisable) &&
      bind(lib, "cuptiActivityEnable", a.ActivityEnable) &&
      bind(lib, "cuptiActivityEnableRuntimeApi", a.ActivityEnableRuntimeApi) &&
      bind(lib, "cuptiActivityFlushAll", a.ActivityFlushAll) &&
      bind(lib, "cuptiActivityGetNextRecord", a.ActivityGetNextRecord) &&
      bind(lib, "cuptiActivityGetNumDroppedRecords", a.ActivityGetNumDroppedRecords) &&
      bind(lib, "cuptiActivityRegisterCallbacks", a.ActivityRegisterCallbacks) &&
      bind(lib, "cuptiActivityRegisterTimestampCallback", a.ActivityRegisterTimestampCallback) &&
      bind(lib, "cuptiDeviceGetChipName", a.DeviceGetChipName) &&
      bind(lib, "cuptiGetCallbackName", a.GetCallbackName) &&
      bind(lib, "cuptiGetResultString", a.GetResultString) &&
      bind(lib, "cuptiGetTimestamp", a.GetTimestamp) &&
      bind(lib, "cuptiGetVersion", a.GetVersion) &&
      bind(lib, "cuptiProfilerDeInitialize", a.ProfilerDeInitialize) &&
      bind(lib, "cuptiProfilerGetCounterAvailability", a.ProfilerGetCounterAvailability) &&
      bind(lib, "cuptiProfilerHostConfigAddMetrics", a.ProfilerHostConfigAddMetrics) &&
      bind(lib, "cuptiProfilerHostDeinitialize", a.ProfilerHostDeinitialize) &&
      bind(lib, "cuptiProfilerHostEvaluateToGpuValues", a.ProfilerHostEvaluateToGpuValues) &&
      bind(lib, "cuptiProfilerHostGetBaseMetrics", a.ProfilerHostGetBaseMetrics) &&
      bind(lib, "cuptiProfilerHostGetConfigImage", a.ProfilerHostGetConfigImage) &&
      bind(lib, "cuptiProfilerHostGetConfigImageSize", a.ProfilerHostGetConfigImageSize) &&
      bind(lib, "cuptiProfilerHostGetMetricProperties", a.ProfilerHostGetMetricProperties) &&
      bind(lib, "cuptiProfilerHostGetNumOfPasses", a.ProfilerHostGetNumOfPasses) &&
      bind(lib, "cuptiProfilerHostGetSupportedChips", a.ProfilerHostGetSupportedChips) &&
      bind(lib, "cuptiProfilerHostInitialize", a.ProfilerHostInitialize) &&
      bind(lib, "cuptiProfilerInitialize", a.ProfilerInitialize) &&
      bind(lib, "cuptiRangeProfilerCounterDataImageInitialize",
           a.RangeProfilerCounterDataImageInitialize) &&
      bind(lib, "cuptiRangeProfilerDecodeData", a.RangeProfilerDecodeData) &&
      bind(lib, "cuptiRangeProfilerDisable", a.RangeProfilerDisable) &&
      bind(lib, "cuptiRangeProfilerEnable", a.RangeProfilerEnable) &&
      bind(lib, "cuptiRangeProfilerGetCounterDataInfo", a.RangeProfilerGetCounterDataInfo) &&
      bind(lib, "cuptiRangeProfilerGetCounterDataSize", a.RangeProfilerGetCounterDataSize) &&
      bind(lib, "cuptiRangeProfilerPopRange", a.RangeProfilerPopRange) &&
      bind(lib, "cuptiRangeProfilerPushRange", a.RangeProfilerPushRange) &&
      bind(lib, "cuptiRangeProfilerSetConfig", a.RangeProfilerSetConfig) &&
      bind(lib, "cuptiRangeProfilerStart", a.RangeProfilerStart) &&
      bind(lib, "cuptiRangeProfilerStop", a.RangeProfilerStop) && true;
  if (!all) {
    r.why = std::string(kSoname) + " lacks an entry point mactune uses (older than CUPTI 13.0?)";
    return r;
  }
  r.ok = true;
  return r;  // the library stays loaded for the life of the process
}

}  // namespace

const Api* api(std::string* why) {
  static const Loaded loaded = load();
  if (why) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  if (const Api* a = api()) a->GetResultString(result, &text);
  return text ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

}  // namespace mactune::prof::cupti
