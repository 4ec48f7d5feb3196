// The simt runtime's fibers (one per thread of the running block, a hand-written x86-64
// context switch) and the block scheduler.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "kernels/cuda/simt/runtime_internal.h"

uint3 threadIdx{0, 0, 0};
uint3 blockIdx{0, 0, 0};
dim3 blockDim{1, 1, 1};
dim3 gridDim{1, 1, 1};

// ---- The context switch: saves callee-saved registers, MXCSR and the x87 control word on the
// old stack, stores its pointer, loads the new one and returns into it.
extern "C" void simt_switch(void** save_sp, void* new_sp);
asm(R"(
.text
.globl simt_switch
.type simt_switch,@function
simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size simt_switch,.-simt_switch
)");

namespace mactune::simt::internal {
namespace {

void set_builtins(const Thread& t) {
  threadIdx = t.idx;
}

void switch_to(int next) {
  const int from = g_current;
  g_current = next;
  if (g_stats) ++g_stats->switches;
  set_builtins(g_threads[static_cast<std::size_t>(next)]);
  void* target = g_threads[static_cast<std::size_t>(next)].sp;
  simt_switch(from < 0 ? &g_main_sp : &g_threads[static_cast<std::size_t>(from)].sp, target);
}

}  // namespace

void block_current() {
  const int n = g_nthreads;
  for (int k = 1; k <= n; ++k) {
    const int i = (g_current + k) % n;
    if (g_threads[static_cast<std::size_t>(i)].state == State::runnable) {
      if (i == g_current) return;
      switch_to(i);
      return;
    }
  }
  // Nobody can run: back to the scheduler, which reports the deadlock (or the block is done).
  const int from = g_current;
  g_current = -1;
  simt_switch(&g_threads[static_cast<std::size_t>(from)].sp, g_main_sp);
}

namespace {

[[noreturn]] void fiber_main() {
  (*g_body)();
  Thread& t = cur();
  if (!t.open.empty() || !t.groups.empty()) {
    report(Check::cp_async, t.groups.empty() ? t.open.front().pc : t.groups.front().front().pc,
           nullptr,
           thread_name(t.tid) + " exited with cp.async copies never waited for (issued at " +
               site(t.groups.empty() ? t.open.front().pc : t.groups.front().front().pc) + ")");
    for (auto& g : t.groups)
      for (const Copy& c : g) land(t, c);
    for (const Copy& c : t.open) land(t, c);
    t.groups.clear();
    t.open.clear();
  }
  t.state = State::done;
  --g_live;
  {
    const int warp = t.tid / 32;
    g_warp_exited[static_cast<std::size_t>(warp)] |= 1u << (t.tid % 32);
    const unsigned waiting = g_warp_waiting[static_cast<std::size_t>(warp)];
    for (int l = 0; l < 32 && waiting; ++l) {
      if (!(waiting >> l & 1u)) continue;
      const Thread& o = g_threads[static_cast<std::size_t>(warp * 32 + l)];
      if (o.mask >> (t.tid % 32) & 1u) {
        fatal(Check::warp_op, o.wait_pc,
              thread_name(o.tid) + " waits at " + op_name(o.op) + " (" + site(o.wait_pc) +
                  ") for lane " + std::to_string(t.tid % 32) + ", which exited");
        break;
      }
    }
  }
  if (g_fatal) leave_with_fatal();
  if (g_arrived > 0 && g_arrived == g_live) complete_barrier();
  block_current();
  __builtin_unreachable();
}

void init_fiber(Thread& t, unsigned char* stack, std::size_t bytes) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t{15};
  auto* sp = reinterpret_cast<std::uint64_t*>(top);
  *--sp = 0;                                             // fake return address of fiber_main
  *--sp = reinterpret_cast<std::uint64_t>(&fiber_main);  // simt_switch's ret goes here
  for (int i = 0; i < 6; ++i) *--sp = 0;                 // rbp rbx r12..r15
  *--sp = 0x0000037f00001f80ull;                         // MXCSR (low), x87 control word
  t.sp = sp;
}

unsigned char* stack_for(int i) {
  while (static_cast<int>(g_stacks.size()) <= i) {
    const std::size_t bytes = g_options.stack_bytes + 4096;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "simt: cannot map a fiber stack\n");
      std::abort();
    }
    mprotect(p, 4096, PROT_NONE);  // guard page below the stack
    g_stacks.push_back(static_cast<unsigned char*>(p));
  }
  return g_stacks[static_cast<std::size_t>(i)] + 4096;
}

}  // namespace

void run_block(int linear, dim3 bid) {
  blockIdx = uint3{bid.x, bid.y, bid.z};
  g_block_linear = linear;
  const int n = g_nthreads;
  ++g_iv;
  g_block_iv0 = g_iv;
  g_live = n;
  g_arrived = 0;
  const int warps = (n + 31) / 32;
  g_warp_waiting.assign(static_cast<std::size_t>(warps), 0u);
  g_warp_present.assign(static_cast<std::size_t>(warps), 0u);
  g_warp_exited.assign(static_cast<std::size_t>(warps), 0u);
  for (int w = 0; w < warps; ++w) {
    const int lanes = std::min(32, n - 32 * w);
    g_warp_present[static_cast<std::size_t>(w)] = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  }
  for (int i = 0; i < n; ++i) {
    Thread& t = g_threads[static_cast<std::size_t>(i)];
    t.state = State::runnable;
    t.tid = i;
    t.idx = uint3{static_cast<unsigned>(i) % blockDim.x,
                  static_cast<unsigned>(i) / blockDim.x % blockDim.y,
                  static_cast<unsigned>(i) / (blockDim.x * blockDim.y)};
    t.ws = 0;
    t.op = Op::none;
    t.open.clear();
    t.groups.clear();
    t.n_stores = 0;
    t.stack = stack_for(i);
    init_fiber(t, t.stack, g_options.stack_bytes);
  }
  g_current = -1;
  switch_to(0);
  // Back here when no fiber can run.
  g_current = -1;
  if (g_live > 0 && !g_fatal) {
    std::ostringstream s;
    s << "block (" << bid.x << ',' << bid.y << ',' << bid.z << ") cannot go on:";
    const void* pc = nullptr;
    for (const Thread& t : g_threads) {
      if (t.state == State::done || &t - g_threads.data() >= n) continue;
      if (pc == nullptr) pc = t.wait_pc;
      if (t.tid % 32 == 0 || t.wait_pc != g_threads[static_cast<std::size_t>(t.tid - 1)].wait_pc)
        s << "\n  " << thread_name(t.tid) << " waits at "
          << (t.state == State::barrier ? "__syncthreads" : op_name(t.op)) << ", "
          << site(t.wait_pc);
    }
    s << "\n  " << (n - g_live) << " of " << n << " threads exited";
    fatal(Check::deadlock, pc, s.str());
  }
}

}  // namespace mactune::simt::internal
