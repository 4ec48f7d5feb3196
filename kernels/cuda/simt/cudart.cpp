// The CUDA runtime API over the simt runtime (include/cuda_runtime_api.h): one device with an
// H200's numbers, device memory from the runtime's tracked region, streams that run their work
// at once unless they are capturing a graph (then the work is recorded and replayed by
// cudaGraphLaunch), events that read the host clock. A kernel launch that failed (a check
// reported, a deadlock) surfaces as cudaErrorLaunchFailure from cudaGetLastError and from the
// next synchronization, as an asynchronous kernel fault does.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "kernels/cuda/simt/device.h"
#include "kernels/cuda/simt/runtime.h"

struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};
struct CUstream_st {
  CUgraph_st* capture = nullptr;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};

namespace mactune::simt {
namespace {
cudaError_t g_last = cudaSuccess;
std::map<const void*, int> g_max_dynamic_smem;
int g_device = 0;

cudaError_t note(cudaError_t e) {
  if (e != cudaSuccess) g_last = e;
  return e;
}
cudaError_t pending() {
  const cudaError_t e = g_last;
  return e == cudaErrorLaunchFailure ? e : cudaSuccess;
}
bool device_range_ok(const void* p, std::size_t bytes) {
  const int a = allocation_of(p, 1);
  if (a < 0) return true;  // host memory
  return allocation_of(p, bytes) >= 0;
}
}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> fn) {
  if (stream != nullptr && stream->capture != nullptr)
    stream->capture->ops.push_back(std::move(fn));
  else
    fn();
}
void set_last_error(cudaError_t e) {
  g_last = e;
}

cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > kSmemOptin) return note(cudaErrorInvalidValue);
    g_max_dynamic_smem[kernel] = value;
  }
  return cudaSuccess;
}
bool dynamic_smem_allowed(const void* kernel, std::size_t bytes) {
  if (bytes <= 48u * 1024u) return true;
  const auto it = g_max_dynamic_smem.find(kernel);
  return it != g_max_dynamic_smem.end() && bytes <= static_cast<std::size_t>(it->second);
}
cudaError_t occupancy(int* blocks, const void*, int threads, std::size_t dynamic_smem) {
  if (threads < 1 || threads > 1024) return note(cudaErrorInvalidValue);
  int b = std::min(kMaxBlocksPerSm, kMaxThreadsPerSm / threads);
  if (dynamic_smem > 0) b = std::min(b, static_cast<int>(kSmemPerSm / (dynamic_smem + 1024)));
  *blocks = b;  // registers are not modelled: shared memory and threads only
  return cudaSuccess;
}
cudaError_t func_get_attributes(cudaFuncAttributes* attr, const void*) {
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = 1024;
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  return cudaSuccess;
}

}  // namespace mactune::simt

using namespace mactune::simt;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return note(cudaErrorInvalidDevice);
  g_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return note(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = 48 * 1024;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = kSms;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = kSmemPerSm;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = kSmemOptin;
      break;
    default:
      return note(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return note(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "simt interpreter (H200 model)", sizeof prop->name - 1);
  prop->totalGlobalMem = std::size_t{141} << 30;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->multiProcessorCount = kSms;
  prop->major = 9;
  prop->minor = 0;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlockOptin = kSmemOptin;
  prop->sharedMemPerMultiprocessor = kSmemPerSm;
  prop->l2CacheSize = 60 << 20;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  return pending();
}
cudaError_t cudaDeviceReset() {
  g_last = cudaSuccess;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  return g_last;
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (a simt check reported, see stderr)";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    default:
      return "simt runtime error";
  }
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  *ptr = device_alloc(bytes);
  return *ptr ? cudaSuccess : note(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  return device_free(ptr) ? cudaSuccess : note(cudaErrorInvalidValue);
}
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  *ptr = std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) & ~std::size_t{255});
  return *ptr ? cudaSuccess : note(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  if (!device_range_ok(dst, bytes) || !device_range_ok(src, bytes))
    return note(cudaErrorInvalidValue);
  if (bytes) std::memmove(dst, src, bytes);
  return pending();
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (!device_range_ok(dst, bytes) || !device_range_ok(src, bytes))
    return note(cudaErrorInvalidValue);
  enqueue(stream, [=] {
    if (bytes) std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  if (!device_range_ok(ptr, bytes)) return note(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return pending();
}
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream) {
  if (!device_range_ok(ptr, bytes)) return note(cudaErrorInvalidValue);
  enqueue(stream, [=] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  *free = *total = std::size_t{64} << 30;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  return cudaStreamCreate(stream);
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return pending();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return cudaSuccess;  // work runs in issue order
}
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr || stream->capture != nullptr) return note(cudaErrorInvalidValue);
  stream->capture = new CUgraph_st;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || stream->capture == nullptr) return note(cudaErrorInvalidValue);
  *graph = stream->capture;
  stream->capture = nullptr;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  return cudaEventCreate(event);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  enqueue(stream, [event] {
    event->at = std::chrono::steady_clock::now();
    event->recorded = true;
  });
  return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned) {
  return cudaEventRecord(event, stream);
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return pending();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded) return note(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  for (const auto& op : exec->ops) enqueue(stream, op);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaProfilerStart() {
  return cudaSuccess;
}
cudaError_t cudaProfilerStop() {
  return cudaSuccess;
}
