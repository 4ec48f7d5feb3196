// The checks a GPU sanitizer makes, made by the simt runtime: each test kernel trips one of them
// (and a clean twin does not). Reports name the check, the threads and the source sites.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/detail/ptx.cuh"
#include "simt_test_util.h"

namespace mactune::simt::testing {
namespace {

// Occurrences of this file's name in a report: one per source site named.
int sites(const Report* r) {
  if (r == nullptr) return 0;
  int n = 0;
  for (std::size_t at = r->text.find("test_simt_checks.cu"); at != std::string::npos;
       at = r->text.find("test_simt_checks.cu", at + 1))
    ++n;
  return n;
}

__global__ void read_past_end(const float* p, int n, float* out) {
  out[threadIdx.x] = p[n - 1 + static_cast<int>(threadIdx.x)];  // thread 1 reads p[n]
}

TEST(SimtChecks, GlobalOutOfBounds) {
  ReportScope scope(true);
  DeviceArray<float> p(10), out(2);
  read_past_end<<<1, 2>>>(p.p, 10, out.p);
  const Report* r = ReportScope::first(Check::global_bounds);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("thread 1"), std::string::npos) << r->text;
  EXPECT_EQ(sites(r), 1) << r->text;
  EXPECT_EQ(reports().size(), 1u) << ReportScope::all();
}

TEST(SimtChecks, GlobalOutOfBoundsFailsTheLaunch) {
  ReportScope scope;
  options().print_reports = false;
  DeviceArray<float> p(10), out(2);
  read_past_end<<<1, 2>>>(p.p, 10, out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  read_past_end<<<1, 1>>>(p.p, 10, out.p);  // in bounds
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

__global__ void dynamic_smem_past_end(float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* s = reinterpret_cast<float*>(smem);
  s[threadIdx.x] = 1.0f;  // 32 floats = 128 bytes; the launch has 64
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

TEST(SimtChecks, SharedOutOfBounds) {
  ReportScope scope(true);
  DeviceArray<float> out(32);
  dynamic_smem_past_end<<<1, 32, 64>>>(out.p);
  const Report* r = ReportScope::first(Check::shared_bounds);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("past the launch's 64 bytes"), std::string::npos) << r->text;
  reports().size();
  clear_reports();
  dynamic_smem_past_end<<<1, 32, 128>>>(out.p);
  EXPECT_TRUE(reports().empty()) << ReportScope::all();
}

__global__ void racy(int* out, bool barrier) {
  __shared__ int s[64];
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) s[0] = 42;  // the write
  if (barrier) __syncthreads();
  if (t == 40) out[0] = s[0];      // the read, another warp
  s[t + 1 < 64 ? t + 1 : 63] = t;  // (thread 62 and 63 both write s[63]: a write-write race)
}

TEST(SimtChecks, SharedRaceNamesBothSites) {
  ReportScope scope(true);
  DeviceArray<int> out(1);
  racy<<<1, 64>>>(out.p, false);
  const Report* r = ReportScope::first(Check::shared_race);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_EQ(sites(r), 2) << r->text;
  bool raw = false, waw = false;
  for (const Report& x : reports()) {
    raw = raw || x.text.find("read-after-write") != std::string::npos;
    waw = waw || x.text.find("write-after-write") != std::string::npos;
  }
  EXPECT_TRUE(raw) << ReportScope::all();
  EXPECT_TRUE(waw) << ReportScope::all();
}

__global__ void ordered(int* out) {
  __shared__ int s[64];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = t;
  __syncthreads();
  out[t] = s[63 - t];
  __syncthreads();
  s[63 - t] = 0;
}

TEST(SimtChecks, NoRaceAcrossBarriers) {
  ReportScope scope(true);
  DeviceArray<int> out(64);
  ordered<<<2, 64>>>(out.p);
  EXPECT_TRUE(reports().empty()) << ReportScope::all();
  EXPECT_EQ(out.download()[5], 58);
}

__global__ void partial_barrier(int* out) {
  if (threadIdx.x < 64) {
    __syncthreads();
    out[threadIdx.x] = 1;
  }
}

TEST(SimtChecks, BarrierReachedByPartOfTheBlock) {
  ReportScope scope(true);
  DeviceArray<int> out(128);
  partial_barrier<<<1, 128>>>(out.p);
  const Report* r = ReportScope::first(Check::barrier);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("reached by 64 of 128 threads"), std::string::npos) << r->text;
}

__global__ void deadlocked(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < 16)
    __syncwarp(0xffffffffu);  // waits for lanes 16-31, which wait at the barrier
  else
    __syncthreads();
  out[t] = t;
}

TEST(SimtChecks, DeadlockNamesWhereEveryoneWaits) {
  ReportScope scope(true);
  DeviceArray<int> out(64);
  deadlocked<<<1, 64>>>(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  const Report* r = ReportScope::first(Check::deadlock);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("__syncwarp"), std::string::npos) << r->text;
  EXPECT_NE(r->text.find("__syncthreads"), std::string::npos) << r->text;
  EXPECT_GE(sites(r), 2) << r->text;
}

__global__ void uninit_read(int* out) {
  __shared__ int s[32];
  if (threadIdx.x < 16) s[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];  // lanes 16-31 read what nobody wrote
}

TEST(SimtChecks, UninitializedSharedRead) {
  ReportScope scope(true);
  DeviceArray<int> out(32);
  uninit_read<<<1, 32>>>(out.p);
  const Report* r = ReportScope::first(Check::uninit_shared);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_EQ(sites(r), 1) << r->text;
  EXPECT_EQ(reports().size(), 1u) << ReportScope::all();
}

// Shared memory of one block is not the next block's: written by block 0 only, read by all.
__global__ void stale_from_previous_block(int* out) {
  __shared__ int s[32];
  if (blockIdx.x == 0) s[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}

TEST(SimtChecks, SharedMemoryStartsUnwrittenInEveryBlock) {
  ReportScope scope(true);
  DeviceArray<int> out(64);
  stale_from_previous_block<<<2, 32>>>(out.p);
  EXPECT_EQ(count_reports(Check::uninit_shared), 1u) << ReportScope::all();
}

__global__ void early_read(const uint4* src, unsigned* out, bool wait_first) {
  __shared__ uint4 buf[32];
  buf[threadIdx.x] = uint4{1, 2, 3, 4};
  __syncthreads();
  cuda::detail::cp_async_16(&buf[threadIdx.x], &src[threadIdx.x], true);
  cuda::detail::cp_async_commit();
  if (wait_first) cuda::detail::cp_async_wait<0>();
  out[threadIdx.x] = buf[threadIdx.x].x;  // before the wait: stale, and reported
  cuda::detail::cp_async_wait<0>();
}

TEST(SimtChecks, CpAsyncReadBeforeItsWait) {
  ReportScope scope(true);
  DeviceArray<uint4> src(std::vector<uint4>(32, uint4{9, 9, 9, 9}));
  DeviceArray<unsigned> out(32);
  early_read<<<1, 32>>>(src.p, out.p, false);
  const Report* r = ReportScope::first(Check::cp_async);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_EQ(sites(r), 2) << r->text;
  EXPECT_EQ(out.download()[3], 1u) << "the read saw the bytes before the copy";
  clear_reports();
  early_read<<<1, 32>>>(src.p, out.p, true);
  EXPECT_TRUE(reports().empty()) << ReportScope::all();
  EXPECT_EQ(out.download()[3], 9u);
}

// A thread reads another thread's cp.async destination after its own wait_group but with no
// barrier after the other's: the data is visible to others only after wait_group + barrier.
__global__ void no_barrier_after_wait(const uint4* src, unsigned* out) {
  __shared__ uint4 buf[64];
  cuda::detail::cp_async_16(&buf[threadIdx.x], &src[threadIdx.x], true);
  cuda::detail::cp_async_commit();
  __syncthreads();  // every copy issued; none waited for
  cuda::detail::cp_async_wait<0>();
  out[threadIdx.x] = buf[63 - threadIdx.x].x;  // thread 63's copy: not retired by this thread
}

TEST(SimtChecks, CpAsyncDataNeedsABarrierForOtherThreads) {
  ReportScope scope(true);
  DeviceArray<uint4> src(std::vector<uint4>(64, uint4{9, 9, 9, 9}));
  DeviceArray<unsigned> out(64);
  no_barrier_after_wait<<<1, 64>>>(src.p, out.p);
  EXPECT_GE(count_reports(Check::shared_race) + count_reports(Check::cp_async), 1u)
      << ReportScope::all();
}

__global__ void never_waits(const uint4* src) {
  __shared__ uint4 buf[1];
  cuda::detail::cp_async_16(&buf[0], src, true);
  cuda::detail::cp_async_commit();
}

TEST(SimtChecks, CpAsyncPendingAtExit) {
  ReportScope scope(true);
  DeviceArray<uint4> src(1);
  never_waits<<<1, 1>>>(src.p);
  const Report* r = ReportScope::first(Check::cp_async);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("never waited"), std::string::npos) << r->text;
}

// The last-block reduction: each block stores its value, then counts itself in; the last one
// reads every value. Without __threadfence between store and atomic the read may see old data.
__global__ void last_block_sum(float* values, unsigned* counter, float* total, bool fence) {
  __shared__ bool last;
  if (threadIdx.x == 0) {
    values[blockIdx.x] = static_cast<float>(blockIdx.x + 1);
    if (fence) __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence();
    float s = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) s += __ldcg(&values[b]);
    *total = s;
  }
}

TEST(SimtChecks, MissingFenceBeforeTheAtomic) {
  ReportScope scope(true);
  DeviceArray<float> values(4), total(1);
  DeviceArray<unsigned> counter(1);
  last_block_sum<<<4, 32>>>(values.p, counter.p, total.p, true);
  EXPECT_TRUE(reports().empty()) << ReportScope::all();
  EXPECT_EQ(total.download()[0], 10.0f);
  cudaMemset(counter.p, 0, 4);
  last_block_sum<<<4, 32>>>(values.p, counter.p, total.p, false);
  const Report* r = ReportScope::first(Check::fence);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_GE(sites(r), 2) << r->text;
}

__global__ void shuffle_outside_mask(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane < 16) out[lane] = __shfl_sync(0x0000ffffu, lane, 20);  // lane 20 is not in the mask
}

TEST(SimtChecks, ShuffleFromALaneOutsideTheMask) {
  ReportScope scope(true);
  DeviceArray<int> out(32);
  shuffle_outside_mask<<<1, 32>>>(out.p);
  const Report* r = ReportScope::first(Check::warp_op);
  ASSERT_NE(r, nullptr) << ReportScope::all();
  EXPECT_NE(r->text.find("lane 20"), std::string::npos) << r->text;
}

__global__ void shuffle_with_exited_lanes(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane >= 16) return;
  out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

TEST(SimtChecks, FullMaskShuffleAfterHalfTheWarpExited) {
  ReportScope scope(true);
  DeviceArray<int> out(32);
  shuffle_with_exited_lanes<<<1, 32>>>(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_GE(count_reports(Check::warp_op) + count_reports(Check::deadlock), 1u)
      << ReportScope::all();
}

}  // namespace
}  // namespace mactune::simt::testing
