// The CUDA device: whether one is usable (decided once per process), its fingerprint.
// No CUDA headers: any host code may include this.
#pragma once

#include <string>

#include "kernels/device.h"

namespace mactune::cuda {

struct GpuStatus {
  bool usable = false;
  std::string why_not;  // one line when !usable ("no CUDA device", the runtime's error, ...)
  int count = 0;        // devices the runtime reports
};

// cudaGetDeviceCount succeeded with > 0 devices and this binary has code for device 0.
// Decided on the first call; later calls return the same answer.
const GpuStatus& gpu_status();

// Name, SMs, memory (MiB rounded down to 1 GiB), "sm_90", "driver 13000 / runtime 13000".
// Throws mactune::Error when the device cannot be queried.
DeviceFingerprint device_fingerprint(int device = 0);

}  // namespace mactune::cuda
