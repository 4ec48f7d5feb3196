// nvcc's implicit header, as the simt build provides it: the runtime API and the device
// language (kernels/cuda/simt/device.h: __global__, threadIdx, __syncthreads, shuffles, ...).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/simt/device.h"
