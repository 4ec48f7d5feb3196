// gpu_status(), device_fingerprint() and the formatting of MACTUNE_CUDA_CHECK failures.
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include <sstream>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launchers.h"
#include "kernels/error.h"

namespace mactune::cuda {

namespace detail {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  std::ostringstream out;
  out << file << ':' << line << ": " << call << " failed: " << cudaGetErrorName(error) << " ("
      << cudaGetErrorString(error) << ')';
  throw Error(out.str());
}

}  // namespace detail

const GpuStatus& gpu_status() {
  static const GpuStatus status = [] {
    GpuStatus s;
    const cudaError_t e = cudaGetDeviceCount(&s.count);
    if (e != cudaSuccess) {
      s.count = 0;
      int runtime = 0;
      cudaRuntimeGetVersion(&runtime);
      if (e == cudaErrorInsufficientDriver)
        s.why_not = "no CUDA driver, or one older than the CUDA " + std::to_string(runtime / 1000) +
                    "." + std::to_string(runtime % 1000 / 10) + " runtime this binary carries";
      else if (e == cudaErrorNoDevice)
        s.why_not = "no CUDA device";
      else
        s.why_not = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
      cudaGetLastError();  // not sticky: leave no error behind
      return s;
    }
    if (s.count < 1) {
      s.why_not = "no CUDA device";
      return s;
    }
    if (const cudaError_t img = probe_kernel_image(); img != cudaSuccess) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
      s.why_not = "this build has no code for device 0 (sm_" + std::to_string(major) +
                  std::to_string(minor) + "): " + cudaGetErrorString(img);
      cudaGetLastError();
      return s;
    }
    s.usable = true;
    return s;
  }();
  return status;
}

DeviceFingerprint device_fingerprint(int device) {
  DeviceFingerprint f;
  f.backend = Backend::cuda;
  cudaDeviceProp prop{};
  MACTUNE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  f.name = prop.name;
  MACTUNE_CUDA_CHECK(
      cudaDeviceGetAttribute(&f.compute_units, cudaDevAttrMultiProcessorCount, device));
  f.memory_mib = static_cast<long long>(prop.totalGlobalMem >> 30) << 10;
  int major = 0, minor = 0;
  MACTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  MACTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  f.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  int driver = 0, runtime = 0;
  MACTUNE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  MACTUNE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  f.runtime = "driver " + std::to_string(driver) + " / runtime " + std::to_string(runtime);
  f.threads = 0;
  return f;
}

}  // namespace mactune::cuda
