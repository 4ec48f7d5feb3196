// The serial planner of kernels/plan_serial.h on the device, inside a CUDA graph: the graph is
// captured once, then replayed on different span sets written into the same device buffers
// (no host-visible data in the plan), and every replay equals the host plan (the same
// integer functions on the host). Labelled gpu; skips without a usable device. The parallel
// plan kernel of the CUDA step is checked against the same host plan in tests/cuda.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/plan_serial.h"

namespace mactune {
namespace {

#define CUDA_OK(call)                                                                \
  do {                                                                               \
    const cudaError_t status_ = (call);                                              \
    ASSERT_EQ(status_, cudaSuccess) << #call << ": " << cudaGetErrorString(status_); \
  } while (0)

__global__ void plan_kernel(const GroupSpan* groups, const std::int32_t* n, PlanLimits limits,
                            WorkItem* items, GroupItems* merge_plan, DispatchEntry* dispatch,
                            std::int32_t capacity, PlanChoice* choice) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *choice = plan_step(groups, *n, limits, items, merge_plan, dispatch, capacity);
}

std::vector<GroupSpan> spans(std::mt19937_64& rng, int n) {
  std::vector<GroupSpan> g;
  for (int i = 0; i < n; ++i) {
    GroupSpan s;
    s.batch_index = i / 8;
    s.kv_head = i % 8;
    s.kv_len = 4096 + static_cast<int>(rng() % 120000);
    s.cache_end = s.kv_len - 256;
    s.begin = static_cast<int>(rng() % static_cast<unsigned>(s.cache_end + 1));
    g.push_back(s);
  }
  return g;
}

TEST(PlanOnDevice, CudaGraphReplaysEqualTheHostPlan) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    GTEST_SKIP() << "no usable CUDA device";
  const int max_groups = 512;
  const PlanLimits limits = cuda_plan_limits(132 * 3, 128);
  const int capacity = plan_capacity(max_groups, limits);

  GroupSpan* d_groups = nullptr;
  std::int32_t* d_n = nullptr;
  WorkItem* d_items = nullptr;
  GroupItems* d_merge = nullptr;
  DispatchEntry* d_dispatch = nullptr;
  PlanChoice* d_choice = nullptr;
  CUDA_OK(cudaMalloc(&d_groups, sizeof(GroupSpan) * max_groups));
  CUDA_OK(cudaMalloc(&d_n, sizeof(std::int32_t)));
  CUDA_OK(cudaMalloc(&d_items, sizeof(WorkItem) * capacity));
  CUDA_OK(cudaMalloc(&d_merge, sizeof(GroupItems) * max_groups));
  CUDA_OK(cudaMalloc(&d_dispatch, sizeof(DispatchEntry) * capacity));
  CUDA_OK(cudaMalloc(&d_choice, sizeof(PlanChoice)));

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  plan_kernel<<<1, 1, 0, stream>>>(d_groups, d_n, limits, d_items, d_merge, d_dispatch, capacity,
                                   d_choice);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  std::mt19937_64 rng(17);
  for (int n : {8, 64, 200, 512, 300}) {
    std::vector<GroupSpan> g = spans(rng, n);
    if (n == 300)  // hit-like groups: short spans, where the uniform plan wins
      for (GroupSpan& s : g) s.begin = s.cache_end - static_cast<int>(rng() % 64);
    CUDA_OK(
        cudaMemcpyAsync(d_groups, g.data(), sizeof(GroupSpan) * n, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(d_n, &n, sizeof n, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemsetAsync(d_items, 0x7f, sizeof(WorkItem) * capacity, stream));  // poison
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<WorkItem> items(static_cast<std::size_t>(capacity));
    std::vector<GroupItems> merge(static_cast<std::size_t>(n));
    std::vector<DispatchEntry> dispatch(static_cast<std::size_t>(capacity));
    PlanChoice choice;
    CUDA_OK(cudaMemcpyAsync(items.data(), d_items, sizeof(WorkItem) * capacity,
                            cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(merge.data(), d_merge, sizeof(GroupItems) * n, cudaMemcpyDeviceToHost,
                            stream));
    CUDA_OK(cudaMemcpyAsync(dispatch.data(), d_dispatch, sizeof(DispatchEntry) * capacity,
                            cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(&choice, d_choice, sizeof choice, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));

    std::vector<WorkItem> want(static_cast<std::size_t>(capacity));
    std::vector<GroupItems> want_merge(static_cast<std::size_t>(n));
    std::vector<DispatchEntry> want_dispatch(static_cast<std::size_t>(capacity));
    const PlanChoice host = plan_step(g.data(), n, limits, want.data(), want_merge.data(),
                                      want_dispatch.data(), capacity);
    ASSERT_GT(host.items, 0);
    EXPECT_EQ(choice.kind, host.kind) << n << " groups";
    EXPECT_EQ(choice.chunk, host.chunk) << n << " groups";
    EXPECT_EQ(choice.items, host.items) << n << " groups";
    EXPECT_EQ(choice.entries, host.entries) << n << " groups";
    EXPECT_EQ(choice.makespan, host.makespan) << n << " groups";
    for (int i = 0; i < host.entries; ++i) {
      ASSERT_EQ(dispatch[static_cast<std::size_t>(i)].first,
                want_dispatch[static_cast<std::size_t>(i)].first);
      ASSERT_EQ(dispatch[static_cast<std::size_t>(i)].last,
                want_dispatch[static_cast<std::size_t>(i)].last);
    }
    for (int i = 0; i < host.items; ++i) {
      const WorkItem& a = items[static_cast<std::size_t>(i)];
      const WorkItem& b = want[static_cast<std::size_t>(i)];
      ASSERT_EQ(a.group, b.group) << "slot " << i;
      ASSERT_EQ(a.kv_begin, b.kv_begin) << "slot " << i;
      ASSERT_EQ(a.kv_end, b.kv_end) << "slot " << i;
    }
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(merge[static_cast<std::size_t>(i)].first,
                want_merge[static_cast<std::size_t>(i)].first);
      ASSERT_EQ(merge[static_cast<std::size_t>(i)].split,
                want_merge[static_cast<std::size_t>(i)].split);
      ASSERT_EQ(merge[static_cast<std::size_t>(i)].last,
                want_merge[static_cast<std::size_t>(i)].last);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(d_groups);
  cudaFree(d_n);
  cudaFree(d_items);
  cudaFree(d_merge);
  cudaFree(d_dispatch);
  cudaFree(d_choice);
}

}  // namespace
}  // namespace mactune
