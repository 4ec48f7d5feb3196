// Internal to the simt runtime (runtime*.cpp): the state one launch shares between its parts
// (fibers and the block scheduler, barriers and warp operations, device memory and the shared
// memory shadow with its checks, the ThreadSanitizer callbacks), and the functions they call
// across files. Single-threaded by design: one block runs at a time on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/simt/runtime.h"

#if !defined(__x86_64__)
#error "the simt runtime's context switch is written for x86-64"
#endif

// The return address of the runtime function this expands in: the kernel's call site.
#define SIMT_PC __builtin_extract_return_addr(__builtin_return_address(0))

// Static __shared__ variables (device.h puts them in this section); the linker defines these.
extern "C" unsigned char __start_simt_shared[] __attribute__((weak));
extern "C" unsigned char __stop_simt_shared[] __attribute__((weak));

// The built-in variables of the running thread and block (runtime_fibers.cpp; device.h declares
// them for kernel code).
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

// Saves the running context's callee-saved registers on its stack, stores its stack pointer in
// *save_sp and continues the context whose stack pointer is new_sp (runtime_fibers.cpp).
extern "C" void simt_switch(void** save_sp, void* new_sp);

namespace mactune::simt::internal {

using Clock = std::chrono::steady_clock;
constexpr std::uint16_t kManyReaders = 0xffff;

enum class State : std::uint8_t { runnable, barrier, warp, done };
enum class Op : std::uint8_t { none, shfl, syncwarp, ldmatrix, mma };

struct Copy {
  unsigned char* dst;
  unsigned char data[16];
  const void* pc;
};

struct StoreRange {
  std::uintptr_t lo, hi;
  const void* pc;
};

struct Thread {
  void* sp = nullptr;
  unsigned char* stack = nullptr;
  State state = State::runnable;
  uint3 idx{0, 0, 0};
  int tid = 0;
  std::uint32_t ws = 0;  // warp-sync clock (Lamport) for the race check
  const void* wait_pc = nullptr;
  // The pending warp operation.
  Op op = Op::none;
  unsigned mask = 0;
  dev::Shfl kind = dev::Shfl::idx;
  int arg = 0, width = 32;
  bool flag = false;
  std::uint64_t value = 0, result = 0;
  const void* ptr = nullptr;
  std::uint32_t* regs_out = nullptr;
  const std::uint32_t* a = nullptr;
  std::uint32_t b0 = 0, b1 = 0;
  float* d = nullptr;
  // cp.async: copies not yet committed, then committed groups, oldest first.
  std::vector<Copy> open;
  std::deque<std::vector<Copy>> groups;
  // Global stores since the last fence (the fence check).
  StoreRange stores[8];
  int n_stores = 0;
};

struct Shadow {
  std::uint32_t w_iv = 0, r_iv = 0;
  std::uint16_t w_tid = 0, r_tid = 0;
  std::uint32_t w_ws = 0, r_ws = 0;
  std::uint32_t inflight = 0;
  bool w_atomic = false;  // the last write was an atomic (atomics do not race with atomics)
  const void* w_pc = nullptr;
  const void* r_pc = nullptr;
  const void* f_pc = nullptr;
};

struct Alloc {
  std::uintptr_t lo = 0, hi = 0;
  int serial = 0;
  bool live = true;
  std::uint64_t read = 0, written = 0;
};

struct Published {
  std::uintptr_t hi;
  int block;
  const void* store_pc;
  const void* atomic_pc;
};

// ---- State (defined in runtime.cpp).
extern Options g_options;
extern std::vector<Report> g_reports;
extern std::vector<LaunchStats> g_launches;
extern std::set<std::tuple<int, const void*, const void*>> g_seen;

// Device memory: one reserved region, bump-allocated with guard gaps, never reused.
constexpr std::size_t kRegionBytes = std::size_t{64} << 30;
extern unsigned char* g_region;
extern std::size_t g_region_used;
extern std::vector<Alloc> g_allocs;  // in address order (bump allocation)

// Shared memory: the static section, then the dynamic arena (twice the opt-in size, so an
// access past the launch's bytes lands in the arena and is reported, never elsewhere).
constexpr std::size_t kArenaBytes = 2 * static_cast<std::size_t>(kSmemOptin);
alignas(128) extern unsigned char g_arena[kArenaBytes];
extern std::uintptr_t g_sec_lo, g_sec_hi;
extern std::vector<Shadow> g_shadow;  // section bytes, then arena bytes

// The running launch and block.
extern bool g_in_kernel;
extern bool g_fatal;
extern const char* g_kernel;
extern LaunchStats* g_stats;
extern std::size_t g_dyn_bytes;
extern std::vector<Thread> g_threads;
extern int g_nthreads, g_live, g_arrived, g_current;
extern int g_block_linear;
extern void* g_main_sp;
extern std::uint32_t g_iv, g_block_iv0;  // barrier intervals (monotonic over the process)
extern const std::function<void()>* g_body;
extern std::map<std::uintptr_t, Published> g_published;  // lo -> range stored before an atomic
extern std::vector<unsigned char*> g_stacks;
// Per warp of the running block (bit = lane): waiting at a warp operation, present, exited.
extern std::vector<unsigned> g_warp_waiting, g_warp_present, g_warp_exited;

// ---- Reports (runtime.cpp).
std::string site(const void* pc);
std::string thread_name(int tid);
void report(Check c, const void* pc1, const void* pc2, const std::string& text);

// ---- Fibers and the block scheduler (runtime_fibers.cpp).
inline Thread& cur() {
  return g_threads[static_cast<std::size_t>(g_current)];
}
// The calling fiber cannot go on: run the next runnable one (or return to the scheduler).
void block_current();
void run_block(int linear, dim3 bid);

// ---- Barriers and warp operations (runtime_warp.cpp).
void complete_barrier();
const char* op_name(Op op);
void fatal(Check c, const void* pc, const std::string& text);
void leave_with_fatal();

// ---- Device memory and the shared-memory shadow (runtime_memory.cpp).
bool shared_range(std::uintptr_t a, std::size_t& index);
bool is_shared(std::uintptr_t a);
// A kernel access (or the runtime's on a lane's behalf) of n shared bytes at a. An atomic is a
// write that reads the bytes first; two atomics of one interval do not race (the hardware
// orders them), an atomic and a plain access do.
void shared_access(Thread& t, std::uintptr_t a, std::size_t n, bool write, const void* pc,
                   bool check_inflight = true, bool atomic = false);
Alloc* find_alloc(std::uintptr_t a, std::size_t n);
// A cp.async copy lands: its 16 bytes written into shared memory on the lane's behalf.
void land(Thread& t, const Copy& c);
// A kernel load or store of n bytes at p (the TSan callbacks): global or shared, checked.
void checked_access(const void* p, std::size_t n, bool write, const void* pc);
inline void access(const void* p, std::size_t n, bool write, const void* pc) {
  if (!g_in_kernel || g_current < 0 || !g_options.checks) return;
  checked_access(p, n, write, pc);
}

}  // namespace mactune::simt::internal
