// CUPTI, loaded at run time: the profiler calls libcupti through this table instead of linking
// it, so every mactune binary starts on machines without the CUDA toolkit (a GPU box with only
// the driver, a CPU-only host) and the collector reports "libcupti not found" in one line there.
// The headers (struct layouts, enums) come from the toolkit the build used.
#pragma once

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <cupti_version.h>

#include <string>

namespace mactune::prof::cupti {

// Every CUPTI entry point the profiler uses, named without the "cupti" prefix.
struct Api {
  decltype(&::cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&::cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&::cuptiActivityEnableRuntimeApi) ActivityEnableRuntimeApi = nullptr;
  decltype(&::cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&::cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) ActivityRegisterTimestampCallback = nullptr;
  decltype(&::cuptiDeviceGetChipName) DeviceGetChipName = nullptr;
  decltype(&::cuptiGetCallbackName) GetCallbackName = nullptr;
  decltype(&::cuptiGetResultString) GetResultString = nullptr;
  decltype(&::cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&::cuptiGetVersion) GetVersion = nullptr;
  decltype(&::cuptiProfilerDeInitialize) ProfilerDeInitialize = nullptr;
  decltype(&::cuptiProfilerGetCounterAvailability) ProfilerGetCounterAvailability = nullptr;
  decltype(&::cuptiProfilerHostConfigAddMetrics) ProfilerHostConfigAddMetrics = nullptr;
  decltype(&::cuptiProfilerHostDeinitialize) ProfilerHostDeinitialize = nullptr;
  decltype(&::cuptiProfilerHostEvaluateToGpuValues) ProfilerHostEvaluateToGpuValues = nullptr;
  decltype(&::cuptiProfilerHostGetBaseMetrics) ProfilerHostGetBaseMetrics = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImage) ProfilerHostGetConfigImage = nullptr;
  decltype(&::cuptiProfilerHostGetConfigImageSize) ProfilerHostGetConfigImageSize = nullptr;
  decltype(&::cuptiProfilerHostGetMetricProperties) ProfilerHostGetMetricProperties = nullptr;
  decltype(&::cuptiProfilerHostGetNumOfPasses) ProfilerHostGetNumOfPasses = nullptr;
  decltype(&::cuptiProfilerHostGetSupportedChips) ProfilerHostGetSupportedChips = nullptr;
  decltype(&::cuptiProfilerHostInitialize) ProfilerHostInitialize = nullptr;
  decltype(&::cuptiProfilerInitialize) ProfilerInitialize = nullptr;
  decltype(&::cuptiRangeProfilerCounterDataImageInitialize)
      RangeProfilerCounterDataImageInitialize = nullptr;
  decltype(&::cuptiRangeProfilerDecodeData) RangeProfilerDecodeData = nullptr;
  decltype(&::cuptiRangeProfilerDisable) RangeProfilerDisable = nullptr;
  decltype(&::cuptiRangeProfilerEnable) RangeProfilerEnable = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataInfo) RangeProfilerGetCounterDataInfo = nullptr;
  decltype(&::cuptiRangeProfilerGetCounterDataSize) RangeProfilerGetCounterDataSize = nullptr;
  decltype(&::cuptiRangeProfilerPopRange) RangeProfilerPopRange = nullptr;
  decltype(&::cuptiRangeProfilerPushRange) RangeProfilerPushRange = nullptr;
  decltype(&::cuptiRangeProfilerSetConfig) RangeProfilerSetConfig = nullptr;
  decltype(&::cuptiRangeProfilerStart) RangeProfilerStart = nullptr;
  decltype(&::cuptiRangeProfilerStop) RangeProfilerStop = nullptr;
};

// The table, or null when libcupti cannot be loaded (then `why` gets one line). Searched once per
// process, in order: $MACTUNE_CUPTI_LIBRARY; "libcupti.so.13" through the loader
// (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache); beside the executable;
// $CUDA_HOME/lib64 and $CUDA_HOME/extras/CUPTI/lib64; the toolkit the build used;
// /usr/local/cuda/lib64. libcupti itself loads libnvperf_host.so (counters) from its directory.
const Api* api(std::string* why = nullptr);

// CUPTI's text for a result ("CUPTI_ERROR_NOT_INITIALIZED"), or the number without libcupti.
std::string result_text(CUptiResult result);

}  // namespace mactune::prof::cupti
