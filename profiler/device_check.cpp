// Whether a CUDA device is usable, decided once per process, and the collector factory of builds
// without CUPTI.
#include <mutex>

#include "profiler/activity.h"

#if MACTUNE_PROFILER_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mactune::prof {

bool cupti_compiled() {
#if MACTUNE_HAVE_CUPTI
  return true;
#else
  return false;
#endif
}

bool cuda_device_usable(std::string* why) {
#if MACTUNE_PROFILER_CUDA
  // No driver: cudaErrorInsufficientDriver; the stub libcuda: cudaErrorStubLibrary; a driver
  // without a device: cudaErrorNoDevice. The count is left untouched on error.
  static const std::pair<bool, std::string> state = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      std::string reason = std::string("no usable CUDA device: cudaGetDeviceCount: ") +
                           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
      cudaGetLastError();
      return std::pair<bool, std::string>{false, reason};
    }
    if (n <= 0) return std::pair<bool, std::string>{false, "no CUDA device on this machine"};
    return std::pair<bool, std::string>{true, ""};
  }();
  if (why) *why = state.second;
  return state.first;
#else
  if (why) *why = "this build has no CUDA (configured without the CUDA toolkit)";
  return false;
#endif
}

#if !MACTUNE_HAVE_CUPTI
std::unique_ptr<ActivityCollector> make_activity_collector() {
  std::string why;
  if (!cuda_device_usable(&why)) return make_null_collector(why + "; host spans only");
  return make_null_collector(
      "this build has no CUPTI (MACTUNE_ENABLE_CUPTI=OFF); kernels are not recorded, host spans "
      "only");
}
#endif

}  // namespace mactune::prof
