// The simt runtime: CUDA kernels executed on the host, the threads of a block as fibers.
//
// A launch runs its blocks one at a time (in order, or reversed: Options::reverse_blocks). The
// threads of a block are fibers with their own stacks (a hand-written x86-64 context switch:
// no ucontext, no signal masks), each running until it reaches a barrier, a warp-collective
// operation (shuffle, __syncwarp, ldmatrix, mma) or a cp.async wait; the last thread to arrive
// performs the operation for all. Shared memory is one arena (static __shared__ variables in
// the section `simt_shared`, dynamic shared memory beside it), reused by every block.
//
// Checks (each a Check, reported once per pair of sites, the launch then fails with
// cudaErrorLaunchFailure like a kernel that trapped, its remaining blocks not run):
//   global_bounds   a kernel access outside every live device allocation (runtime's map)
//   shared_bounds   outside the static variables' section or past the launch's dynamic bytes
//   shared_race     two threads, one writing, the same shared bytes, no barrier between
//   uninit_shared   a shared read of bytes no thread wrote since the block started
//   cp_async        a shared access to bytes with a cp.async still in flight; copies pending
//                   at thread exit
//   barrier         __syncthreads reached by part of a block (the rest exited) or at
//                   different sites
//   deadlock        no thread can run: the waiting threads and where they wait
//   warp_op         a warp operation whose mask names exited or absent lanes, or lanes that
//                   wait at a different operation; a shuffle reading an inactive lane
//   fence           bytes stored before an atomic with no __threadfence between, read by
//                   another block of the same launch (the message-passing pattern)
// Every kernel memory access reaches the runtime through the compiler's ThreadSanitizer
// instrumentation (-fsanitize=thread on the kernel translation units), whose callbacks this
// runtime implements itself (as the Linux kernel's KCSAN does); it links no TSan runtime.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mactune::simt {

enum class Check {
  global_bounds,
  shared_bounds,
  shared_race,
  uninit_shared,
  cp_async,
  barrier,
  deadlock,
  warp_op,
  fence,
};
std::string_view check_name(Check c);

struct Report {
  Check check;
  std::string kernel;
  std::string text;  // one paragraph: what, which threads, the source sites
};

// Bytes a launch moved, by kind. Global bytes are what kernel code and cp.async read and
// wrote in device allocations; `by_allocation` splits them by allocation serial.
struct AllocationBytes {
  int serial = 0;
  std::uint64_t read = 0, written = 0;
};
struct LaunchStats {
  std::string kernel;
  dim3 grid, block;
  std::size_t dynamic_smem = 0;
  std::uint64_t global_read = 0, global_written = 0;  // loads/stores, cp.async sources, atomics
  std::uint64_t cp_async_read = 0;                    // of global_read: cp.async sources
  std::uint64_t atomic_ops = 0;
  std::uint64_t shared_read = 0, shared_written = 0;
  std::uint64_t barriers = 0, warp_ops = 0, switches = 0;
  std::vector<AllocationBytes> by_allocation;
  double seconds = 0;
  bool failed = false;
};

struct Options {
  bool checks = true;  // the checks and byte counts of kernel loads/stores (off: set-up kernels)
  bool reverse_blocks = false;  // run blocks last to first (other ticket orders, other races)
  bool fail_on_report = true;   // a launch with a new report fails (cudaErrorLaunchFailure)
  bool print_reports = true;    // reports to stderr as they happen
  std::size_t stack_bytes = 256 * 1024;
};
Options& options();

const std::vector<Report>& reports();
void clear_reports();
// Reports of one check (tests).
std::size_t count_reports(Check c);

const std::vector<LaunchStats>& launches();
void clear_launches();

// Device memory: page-aligned host memory with guard gaps, never reused (a use after free is an
// out-of-bounds access). serial = allocation order since the process started.
void* device_alloc(std::size_t bytes);
bool device_free(void* p);
// The live allocation holding [p, p + bytes), its serial, or -1.
int allocation_of(const void* p, std::size_t bytes = 1);
std::size_t allocation_bytes(int serial);
// Allocations made so far (the next one's serial).
int allocation_count();

// Runs `body` (a call of the kernel with its arguments) as every thread of grid x block.
// False when the launch reported (with fail_on_report) or deadlocked.
bool run_grid(const char* kernel, dim3 grid, dim3 block, std::size_t dynamic_smem,
              const std::function<void()>& body);

// The device the runtime reports (an H200's numbers: what occupancy and budgets are computed for).
inline constexpr int kSms = 132;
inline constexpr int kSmemPerSm = 228 * 1024;
inline constexpr int kSmemOptin = 227 * 1024;
inline constexpr int kMaxThreadsPerSm = 2048;
inline constexpr int kMaxBlocksPerSm = 32;

// ---- Device side (called by kernels/cuda/simt/device.h and ptx_host.h from kernel code).
namespace dev {
void syncthreads();
void syncwarp(unsigned mask);
enum class Shfl { idx, up, down, bfly };
std::uint64_t shfl(Shfl kind, unsigned mask, std::uint64_t value, int arg, int width);
void threadfence();
std::uint32_t atomic_add_u32(std::uint32_t* p, std::uint32_t v);
std::int32_t atomic_add_i32(std::int32_t* p, std::int32_t v);
float atomic_add_f32(float* p, float v);
std::uint32_t atomic_exch_u32(std::uint32_t* p, std::uint32_t v);
std::uint32_t atomic_cas_u32(std::uint32_t* p, std::uint32_t cmp, std::uint32_t v);
std::uint32_t atomic_max_u32(std::uint32_t* p, std::uint32_t v);
void load_global(void* dst, const void* src, std::size_t bytes);  // __ldcg and friends
void cp_async_16(void* dst, const void* src, bool valid);
void cp_async_commit();
void cp_async_wait(int n);
void ldmatrix_x4(std::uint32_t (&r)[4], const void* row, bool trans);
void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
               bool bf16);
unsigned char* dynamic_shared();
std::uint32_t shared_offset(const void* p);
}  // namespace dev

}  // namespace mactune::simt
