// The simt runtime (runtime.h): fibers, the block scheduler, warp-collective operations with
// the PTX ISA's semantics, the shared-memory shadow state behind the checks, device memory and
// the ThreadSanitizer-instrumentation callbacks through which every kernel access arrives.
// Single-threaded by design: one block runs at a time on the calling thread.
#include "kernels/cuda/simt/runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "kernels/dtype.h"

#if !defined(__x86_64__)
#error "the simt runtime's context switch is written for x86-64"
#endif

uint3 threadIdx{0, 0, 0};
uint3 blockIdx{0, 0, 0};
dim3 blockDim{1, 1, 1};
dim3 gridDim{1, 1, 1};

// Static __shared__ variables (device.h puts them in this section); the linker defines these.
extern "C" unsigned char __start_simt_shared[] __attribute__((weak));
extern "C" unsigned char __stop_simt_shared[] __attribute__((weak));

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

namespace mactune::simt {
namespace {

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

// ---- State.
Options g_options;
std::vector<Report> g_reports;
std::vector<LaunchStats> g_launches;
std::set<std::tuple<int, const void*, const void*>> g_seen;

// Device memory: one reserved region, bump-allocated with guard gaps, never reused.
constexpr std::size_t kRegionBytes = std::size_t{64} << 30;
unsigned char* g_region = nullptr;
std::size_t g_region_used = 0;
std::vector<Alloc> g_allocs;  // in address order (bump allocation)

// Shared memory: the static section, then the dynamic arena (twice the opt-in size, so an
// access past the launch's bytes lands in the arena and is reported, never elsewhere).
constexpr std::size_t kArenaBytes = 2 * static_cast<std::size_t>(kSmemOptin);
alignas(128) unsigned char g_arena[kArenaBytes];
std::uintptr_t g_sec_lo = 0, g_sec_hi = 0;
std::vector<Shadow> g_shadow;  // section bytes, then arena bytes

// The running launch and block.
bool g_in_kernel = false;
bool g_fatal = false;
const char* g_kernel = "";
LaunchStats* g_stats = nullptr;
std::size_t g_dyn_bytes = 0;
std::vector<Thread> g_threads;
int g_nthreads = 0, g_live = 0, g_arrived = 0, g_current = -1;
int g_block_linear = 0;
void* g_main_sp = nullptr;
std::uint32_t g_iv = 1, g_block_iv0 = 1;  // barrier intervals (monotonic over the process)
const std::function<void()>* g_body = nullptr;
std::map<std::uintptr_t, Published> g_published;  // lo -> range stored before an atomic, unfenced
std::vector<unsigned char*> g_stacks;
// Per warp of the running block (bit = lane): waiting at a warp operation, present, exited.
std::vector<unsigned> g_warp_waiting, g_warp_present, g_warp_exited;

const char* op_name(Op op);
void fatal(Check c, const void* pc, const std::string& text);
void leave_with_fatal();

// ---- Reports.
std::uintptr_t load_base() {
  static const std::uintptr_t base = [] {
    std::uintptr_t b = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) {
          *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;
          return 1;  // the first object is the executable
        },
        &b);
    return b;
  }();
  return base;
}

std::string site(const void* pc) {
  if (pc == nullptr) return "(unknown site)";
  static std::map<const void*, std::string> cache;
  if (auto it = cache.find(pc); it != cache.end()) return it->second;
  const std::uintptr_t rel = reinterpret_cast<std::uintptr_t>(pc) - load_base() - 1;
  char cmd[256];
  std::snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e /proc/%d/exe 0x%lx 2>/dev/null",
                static_cast<int>(getpid()), static_cast<unsigned long>(rel));
  std::string text;
  if (FILE* f = popen(cmd, "r")) {
    // -i: the innermost inlined frame first, then its callers. Skip the runtime's own wrappers
    // (kernels/cuda/simt/): the site is the kernel line that called them.
    std::vector<std::pair<std::string, std::string>> frames;
    char line[4096];
    auto trim = [](std::string x) {
      while (!x.empty() && (x.back() == '\n' || x.back() == ' ')) x.pop_back();
      return x;
    };
    while (std::fgets(line, sizeof line, f)) {
      std::string fn = trim(line), loc;
      if (std::fgets(line, sizeof line, f)) loc = trim(line);
      frames.emplace_back(fn, loc);
    }
    pclose(f);
    std::size_t pick = 0;
    while (pick + 1 < frames.size() &&
           frames[pick].second.find("kernels/cuda/simt/") != std::string::npos)
      ++pick;
    if (!frames.empty()) {
      std::string fn = frames[pick].first, loc = frames[pick].second;
      if (const auto p = fn.find('('); p != std::string::npos) fn = fn.substr(0, p);
      if (fn.size() > 90) fn = "..." + fn.substr(fn.size() - 87);
      if (const auto sl = loc.rfind('/'); sl != std::string::npos) {
        const auto k = loc.find("/kernels/");
        const auto t = loc.find("/tests/");
        const auto cut = k != std::string::npos ? k + 1 : (t != std::string::npos ? t + 1 : sl + 1);
        loc = loc.substr(cut);
      }
      if (const auto d = loc.find(" (discriminator"); d != std::string::npos)
        loc = loc.substr(0, d);
      text = loc + " (" + fn + ")";
    }
  }
  if (text.empty() || text[0] == '?') {
    char buf[64];
    std::snprintf(buf, sizeof buf, "pc 0x%lx", static_cast<unsigned long>(rel));
    text = buf;
  }
  cache.emplace(pc, text);
  return text;
}

std::string thread_name(int tid) {
  std::ostringstream s;
  s << "thread " << tid << " (warp " << tid / 32 << " lane " << tid % 32 << ") of block ("
    << blockIdx.x << ',' << blockIdx.y << ',' << blockIdx.z << ')';
  return s.str();
}

void report(Check c, const void* pc1, const void* pc2, const std::string& text) {
  if (!g_seen.emplace(static_cast<int>(c), pc1, pc2).second) return;
  if (g_reports.size() >= 200) return;
  Report r{c, g_kernel, text};
  if (g_options.print_reports)
    std::fprintf(stderr, "simt: %s in %s: %s\n", std::string(check_name(c)).c_str(), g_kernel,
                 text.c_str());
  g_reports.push_back(std::move(r));
}

// ---- Fibers.
Thread& cur() {
  return g_threads[static_cast<std::size_t>(g_current)];
}

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

// The calling fiber cannot go on: run the next runnable one (or return to the scheduler).
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

void land(Thread& t, const Copy& c);
void complete_barrier();

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

// ---- Shared memory shadow and checks.
bool shared_range(std::uintptr_t a, std::size_t& index) {
  if (a >= g_sec_lo && a < g_sec_hi) {
    index = a - g_sec_lo;
    return true;
  }
  const auto arena = reinterpret_cast<std::uintptr_t>(g_arena);
  if (a >= arena && a < arena + kArenaBytes) {
    index = (g_sec_hi - g_sec_lo) + (a - arena);
    return true;
  }
  return false;
}

bool is_shared(std::uintptr_t a) {
  std::size_t i;
  return shared_range(a, i);
}

bool ordered(int other_tid, std::uint32_t other_ws, const Thread& t) {
  return other_tid == t.tid || (other_tid / 32 == t.tid / 32 && t.ws > other_ws);
}

void shared_bounds_check(const Thread& t, std::uintptr_t a, std::size_t n, const void* pc) {
  const auto arena = reinterpret_cast<std::uintptr_t>(g_arena);
  if (a >= arena && a + n > arena + g_dyn_bytes) {
    std::ostringstream s;
    s << thread_name(t.tid) << " accesses " << n << " bytes at dynamic shared offset "
      << (a - arena) << ", past the launch's " << g_dyn_bytes << " bytes, at " << site(pc);
    report(Check::shared_bounds, pc, nullptr, s.str());
  }
}

// A kernel access (or the runtime's on a lane's behalf) of n shared bytes at a. An atomic is a
// write that reads the bytes first; two atomics of one interval do not race (the hardware
// orders them), an atomic and a plain access do.
void shared_access(Thread& t, std::uintptr_t a, std::size_t n, bool write, const void* pc,
                   bool check_inflight = true, bool atomic = false) {
  if (g_stats) (write ? g_stats->shared_written : g_stats->shared_read) += n;
  if (!g_options.checks) return;
  shared_bounds_check(t, a, n, pc);
  std::size_t base;
  if (!shared_range(a, base)) return;
  for (std::size_t i = 0; i < n; ++i) {
    if (base + i >= g_shadow.size()) break;
    Shadow& s = g_shadow[base + i];
    if (check_inflight && s.inflight > 0) {
      report(Check::cp_async, s.f_pc, pc,
             thread_name(t.tid) + (write ? " writes" : " reads") +
                 " shared bytes a cp.async is still copying into (issued at " + site(s.f_pc) +
                 ", not yet retired by cp.async.wait_group) at " + site(pc) +
                 (write ? "" : ": the read sees stale bytes"));
    }
    const bool written = s.w_iv >= g_block_iv0;
    if (atomic && !written)
      report(Check::uninit_shared, pc, nullptr,
             thread_name(t.tid) + " updates (atomic) shared bytes no thread wrote since the " +
                 "block began, at " + site(pc));
    if (!write) {
      if (!written) {
        report(Check::uninit_shared, pc, nullptr,
               thread_name(t.tid) +
                   " reads shared bytes no thread wrote since the block began, at " + site(pc));
      } else if (s.w_iv == g_iv && !ordered(s.w_tid, s.w_ws, t)) {
        report(Check::shared_race, s.w_pc, pc,
               "read-after-write race: " + thread_name(s.w_tid) + " wrote at " + site(s.w_pc) +
                   ", " + thread_name(t.tid) + " reads at " + site(pc) +
                   " with no barrier between");
      }
      if (s.r_iv != g_iv) {
        s.r_iv = g_iv;
        s.r_tid = static_cast<std::uint16_t>(t.tid);
        s.r_ws = t.ws;
        s.r_pc = pc;
      } else if (s.r_tid != t.tid && !(s.r_tid != kManyReaders && ordered(s.r_tid, s.r_ws, t))) {
        s.r_tid = kManyReaders;
      }
    } else {
      if (s.w_iv == g_iv && written && !ordered(s.w_tid, s.w_ws, t) &&
          !(atomic && s.w_atomic)) {
        report(Check::shared_race, s.w_pc, pc,
               "write-after-write race: " + thread_name(s.w_tid) + " wrote at " + site(s.w_pc) +
                   ", " + thread_name(t.tid) + " writes at " + site(pc) +
                   " with no barrier between");
      }
      if (s.r_iv == g_iv && (s.r_tid == kManyReaders || !ordered(s.r_tid, s.r_ws, t))) {
        report(
            Check::shared_race, s.r_pc, pc,
            "write-after-read race: " +
                (s.r_tid == kManyReaders ? std::string("several threads") : thread_name(s.r_tid)) +
                " read at " + site(s.r_pc) + ", " + thread_name(t.tid) + " writes at " + site(pc) +
                " with no barrier between");
      }
      s.w_iv = g_iv;
      s.w_tid = static_cast<std::uint16_t>(t.tid);
      s.w_ws = t.ws;
      s.w_pc = pc;
      s.w_atomic = atomic;
      s.r_iv = 0;
    }
  }
}

// ---- Device memory.
// The allocation holding [a, a + n): a 4-entry most-recently-used cache in front of a binary
// search (kernels touch a few buffers in turn).
Alloc* find_alloc(std::uintptr_t a, std::size_t n) {
  static Alloc* mru[4] = {};
  static std::size_t mru_gen = 0;
  if (mru_gen != g_allocs.size()) {  // g_allocs grew: the cached pointers may have moved
    for (Alloc*& m : mru) m = nullptr;
    mru_gen = g_allocs.size();
  }
  for (Alloc* m : mru)
    if (m && a >= m->lo && a + n <= m->hi && m->live) return m;
  if (g_allocs.empty()) return nullptr;
  auto it = std::upper_bound(g_allocs.begin(), g_allocs.end(), a,
                             [](std::uintptr_t x, const Alloc& al) { return x < al.lo; });
  if (it == g_allocs.begin()) return nullptr;
  --it;
  if (!it->live || a + n > it->hi) return nullptr;
  mru[3] = mru[2];
  mru[2] = mru[1];
  mru[1] = mru[0];
  mru[0] = &*it;
  return &*it;
}

bool in_region(std::uintptr_t a) {
  const auto lo = reinterpret_cast<std::uintptr_t>(g_region);
  return g_region != nullptr && a - lo < kRegionBytes;
}

std::string describe_miss(std::uintptr_t a) {
  std::ostringstream s;
  auto it = std::upper_bound(g_allocs.begin(), g_allocs.end(), a,
                             [](std::uintptr_t x, const Alloc& al) { return x < al.lo; });
  if (it != g_allocs.begin()) {
    --it;
    s << (a < it->hi ? "" : "") << (a - it->lo) << " bytes from the start of allocation #"
      << it->serial << " (" << (it->hi - it->lo) << " bytes" << (it->live ? "" : ", freed") << ")";
  } else {
    s << "below every allocation";
  }
  return s.str();
}

void check_published(const Thread& t, std::uintptr_t a, std::size_t n, const void* pc) {
  if (g_published.empty()) return;
  auto it = g_published.upper_bound(a + n - 1);
  if (it == g_published.begin()) return;
  --it;
  if (it->second.hi <= a || it->second.block == g_block_linear) return;
  report(Check::fence, it->second.store_pc, pc,
         "block " + std::to_string(it->second.block) + " stored these bytes at " +
             site(it->second.store_pc) + " and then did an atomic at " +
             site(it->second.atomic_pc) + " with no __threadfence between; " + thread_name(t.tid) +
             " reads them at " + site(pc) + " (the store may not be visible when the atomic is)");
}

// A kernel access of n global bytes at a (loads, stores, cp.async sources, atomics).
void global_access(Thread* t, std::uintptr_t a, std::size_t n, bool write, const void* pc) {
  Alloc* al = find_alloc(a, n);
  if (al == nullptr) {
    std::ostringstream s;
    s << (t ? thread_name(t->tid) : std::string("a thread")) << (write ? " writes " : " reads ")
      << n << " bytes at 0x" << std::hex << a << std::dec << ", outside every live device "
      << "allocation (" << describe_miss(a) << "), at " << site(pc);
    report(Check::global_bounds, pc, nullptr, s.str());
    return;
  }
  if (g_stats) {
    (write ? g_stats->global_written : g_stats->global_read) += n;
    (write ? al->written : al->read) += n;
  }
  if (t == nullptr || !g_options.checks) return;
  if (write) {
    if (t->n_stores > 0) {
      StoreRange& r = t->stores[(t->n_stores - 1) % 8];
      if (r.hi == a) {
        r.hi = a + n;
        return;
      }
    }
    // The 8 newest ranges (older ones are forgotten: a store long before an atomic, in a kernel
    // without a fence, is the pattern the check is for only when it is recent).
    t->stores[t->n_stores % 8] = StoreRange{a, a + n, pc};
    ++t->n_stores;
  } else {
    check_published(*t, a, n, pc);
  }
}

inline void access(const void* p, std::size_t n, bool write, const void* pc) {
  if (!g_in_kernel || g_current < 0 || !g_options.checks) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (in_region(a)) {
    global_access(&cur(), a, n, write, pc);
  } else if (is_shared(a)) {
    shared_access(cur(), a, n, write, pc);
  }
}

void atomic_access(void* p, std::size_t n, const void* pc) {
  if (!g_in_kernel || g_current < 0) return;
  Thread& t = cur();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (g_stats) ++g_stats->atomic_ops;
  if (is_shared(a)) {
    shared_access(t, a, n, true, pc, true, true);
    return;
  }
  global_access(&t, a, n, false, pc);
  if (Alloc* al = find_alloc(a, n); al && g_stats) {
    g_stats->global_written += n;
    al->written += n;
  }
  // The stores since the last fence are now published by this atomic without a fence.
  for (int i = 0; i < std::min(t.n_stores, 8); ++i)
    g_published[t.stores[i].lo] = Published{t.stores[i].hi, g_block_linear, t.stores[i].pc, pc};
  t.n_stores = 0;
}

// ---- Barriers and warp operations.
void complete_barrier() {
  const int waiting = g_arrived;
  if (g_options.checks && g_live < g_nthreads) {
    const void* pc = nullptr;
    for (const Thread& th : g_threads)
      if (th.state == State::barrier) pc = th.wait_pc;
    std::ostringstream s;
    s << "__syncthreads at " << site(pc) << " reached by " << waiting << " of " << g_nthreads
      << " threads of block (" << blockIdx.x << ',' << blockIdx.y << ',' << blockIdx.z << "); "
      << (g_nthreads - g_live) << " had exited";
    report(Check::barrier, pc, nullptr, s.str());
  }
  const void* first = nullptr;
  for (Thread& th : g_threads) {
    if (th.state != State::barrier) continue;
    if (first == nullptr) first = th.wait_pc;
    // Different return addresses can be one source barrier the compiler duplicated.
    if (g_options.checks && th.wait_pc != first && site(th.wait_pc) != site(first))
      report(Check::barrier, first, th.wait_pc,
             "threads of one block wait at different __syncthreads: " + site(first) + " and " +
                 site(th.wait_pc) + " (" + thread_name(th.tid) + ")");
    th.state = State::runnable;
  }
  g_arrived = 0;
  ++g_iv;
  if (g_stats) ++g_stats->barriers;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::shfl:
      return "a shuffle";
    case Op::syncwarp:
      return "__syncwarp";
    case Op::ldmatrix:
      return "ldmatrix";
    case Op::mma:
      return "mma.sync";
    default:
      return "nothing";
  }
}

void fatal(Check c, const void* pc, const std::string& text) {
  report(c, pc, nullptr, text);
  g_fatal = true;
}

std::uint32_t pack(std::uint16_t lo, std::uint16_t hi) {
  return std::uint32_t{lo} | (std::uint32_t{hi} << 16);
}

void perform(int warp, unsigned mask, Op op) {
  Thread* lanes[32] = {};
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u) lanes[l] = &g_threads[static_cast<std::size_t>(warp * 32 + l)];
  if (g_stats) ++g_stats->warp_ops;
  switch (op) {
    case Op::shfl: {
      for (int l = 0; l < 32; ++l) {
        if (!lanes[l]) continue;
        Thread& t = *lanes[l];
        const int w = t.width;
        const int base = l & ~(w - 1);
        int src = l;
        switch (t.kind) {
          case dev::Shfl::idx:
            src = base + (t.arg & (w - 1));
            break;
          case dev::Shfl::up:
            src = l - t.arg >= base ? l - t.arg : l;
            break;
          case dev::Shfl::down:
            src = l + t.arg < base + w ? l + t.arg : l;
            break;
          case dev::Shfl::bfly:
            src = (l ^ t.arg) < base + w ? (l ^ t.arg) : l;
            break;
        }
        if (!(mask >> src & 1u)) {
          report(Check::warp_op, t.wait_pc, nullptr,
                 thread_name(t.tid) + " shuffles from lane " + std::to_string(src) +
                     ", which is not in the mask (its value is undefined), at " + site(t.wait_pc));
          t.result = t.value;
        } else {
          t.result = lanes[src]->value;
        }
      }
      break;
    }
    case Op::syncwarp: {
      std::uint32_t clock = 0;
      for (Thread* t : lanes)
        if (t) clock = std::max(clock, t->ws);
      for (Thread* t : lanes)
        if (t) t->ws = clock + 1;
      break;
    }
    case Op::ldmatrix: {
      // Lane 8i + r gives row r of matrix i (8 b16 elements, 16 contiguous bytes).
      std::uint16_t m[4][8][8];
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < 8; ++r) {
          Thread& t = *lanes[8 * i + r];
          const auto a = reinterpret_cast<std::uintptr_t>(t.ptr);
          if (!is_shared(a) || (a & 15u) != 0) {
            report(Check::shared_bounds, t.wait_pc, nullptr,
                   thread_name(t.tid) +
                       " gives ldmatrix a row address that is not 16-byte "
                       "aligned shared memory, at " +
                       site(t.wait_pc));
            std::memset(m[i][r], 0, 16);
            continue;
          }
          shared_access(t, a, 16, false, t.wait_pc);
          std::memcpy(m[i][r], t.ptr, 16);
        }
      // Lane L receives, for matrix i, M_i[L/4][2(L%4) + {0,1}] (.trans: M_i[2(L%4) + {0,1}][L/4]),
      // the lower-indexed element in the low half.
      for (int L = 0; L < 32; ++L)
        for (int i = 0; i < 4; ++i) {
          const int g = L / 4, c = 2 * (L % 4);
          lanes[L]->regs_out[i] =
              lanes[L]->flag ? pack(m[i][c][g], m[i][c + 1][g]) : pack(m[i][g][c], m[i][g][c + 1]);
        }
      break;
    }
    case Op::mma: {
      // m16n8k16 .row.col, g = L/4, t = L%4: A regs (g, 2t..) (g+8, 2t..) (g, 2t+8..) (g+8,
      // 2t+8..); B regs (k = 2t.., n = g) (k = 2t+8.., n = g); C/D (g, 2t..) (g+8, 2t..).
      const bool bf16 = lanes[0]->flag;
      auto elem = [bf16](std::uint32_t reg, int half) -> double {
        const auto bits = static_cast<std::uint16_t>(half ? reg >> 16 : reg & 0xffffu);
        return bf16 ? mactune::bf16_to_float({bits}) : mactune::f16_to_float({bits});
      };
      double A[16][16], B[16][8];
      for (int L = 0; L < 32; ++L) {
        const Thread& t = *lanes[L];
        const int g = L / 4, q = L % 4;
        for (int k = 0; k < 2; ++k) {
          A[g][2 * q + k] = elem(t.a[0], k);
          A[g + 8][2 * q + k] = elem(t.a[1], k);
          A[g][2 * q + 8 + k] = elem(t.a[2], k);
          A[g + 8][2 * q + 8 + k] = elem(t.a[3], k);
          B[2 * q + k][g] = elem(t.b0, k);
          B[2 * q + 8 + k][g] = elem(t.b1, k);
        }
      }
      for (int L = 0; L < 32; ++L) {
        float* d = lanes[L]->d;
        for (int e = 0; e < 4; ++e) {
          const int row = L / 4 + (e >> 1) * 8, col = 2 * (L % 4) + (e & 1);
          double s = d[e];  // products are exact; one rounding of the fp32 sum
          for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
          d[e] = static_cast<float>(s);
        }
      }
      break;
    }
    default:
      break;
  }
  for (Thread* t : lanes)
    if (t) {
      t->op = Op::none;
      t->state = State::runnable;
    }
}

void leave_with_fatal() {
  const int from = g_current;
  g_current = -1;
  simt_switch(&g_threads[static_cast<std::size_t>(from)].sp, g_main_sp);
}

// The calling lane has filled in its operation: perform it if every lane of the mask is there.
void arrive_warp(Thread& t, Op op, unsigned mask, const void* pc) {
  t.op = op;
  t.mask = mask;
  t.wait_pc = pc;
  t.state = State::warp;
  const int lane = t.tid % 32, warp = t.tid / 32;
  unsigned& waiting = g_warp_waiting[static_cast<std::size_t>(warp)];
  waiting |= 1u << lane;
  if (!(mask >> lane & 1u))
    fatal(Check::warp_op, pc,
          thread_name(t.tid) + " executes " + op_name(op) + " with a mask that leaves it out, at " +
              site(pc));
  const unsigned present = g_warp_present[static_cast<std::size_t>(warp)];
  if ((mask & ~present) != 0)
    fatal(Check::warp_op, pc,
          std::string(op_name(op)) + " at " + site(pc) + " names lanes the block does not have");
  if (const unsigned gone = mask & g_warp_exited[static_cast<std::size_t>(warp)]; gone && !g_fatal)
    fatal(Check::warp_op, pc,
          thread_name(t.tid) + " waits at " + op_name(op) + " (" + site(pc) + ") for lane " +
              std::to_string(__builtin_ctz(gone)) + ", which has exited");
  if (!g_fatal && (waiting & mask) == mask) {
    for (int l = 0; l < 32; ++l) {
      if (!(mask >> l & 1u)) continue;
      const Thread& o = g_threads[static_cast<std::size_t>(warp * 32 + l)];
      if (o.op != op || o.mask != mask) {
        fatal(Check::warp_op, pc,
              "lanes of warp " + std::to_string(warp) +
                  " meet at different warp operations: " + op_name(op) + " at " + site(pc) +
                  " and " + op_name(o.op) + " at " + site(o.wait_pc));
        break;
      }
    }
    if (!g_fatal) {
      waiting &= ~mask;
      perform(warp, mask, op);
      return;
    }
  }
  if (g_fatal) {
    leave_with_fatal();
    return;
  }
  block_current();
}

unsigned full_warp_mask(const Thread& t) {
  const int warp = t.tid / 32;
  const int n = std::min(32, g_nthreads - warp * 32);
  return n == 32 ? 0xffffffffu : ((1u << n) - 1u);
}

void land(Thread& t, const Copy& c) {
  std::size_t base;
  const bool sh = shared_range(reinterpret_cast<std::uintptr_t>(c.dst), base);
  if (sh && g_options.checks)
    for (std::size_t i = 0; i < 16 && base + i < g_shadow.size(); ++i)
      if (g_shadow[base + i].inflight > 0) --g_shadow[base + i].inflight;
  std::memcpy(c.dst, c.data, 16);
  if (sh) shared_access(t, reinterpret_cast<std::uintptr_t>(c.dst), 16, true, c.pc, false);
}

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

}  // namespace

// ---- Public API.
std::string_view check_name(Check c) {
  switch (c) {
    case Check::global_bounds:
      return "global_bounds";
    case Check::shared_bounds:
      return "shared_bounds";
    case Check::shared_race:
      return "shared_race";
    case Check::uninit_shared:
      return "uninit_shared";
    case Check::cp_async:
      return "cp_async";
    case Check::barrier:
      return "barrier";
    case Check::deadlock:
      return "deadlock";
    case Check::warp_op:
      return "warp_op";
    case Check::fence:
      return "fence";
  }
  return "?";
}

Options& options() {
  return g_options;
}
const std::vector<Report>& reports() {
  return g_reports;
}
void clear_reports() {
  g_reports.clear();
  g_seen.clear();
}
std::size_t count_reports(Check c) {
  return static_cast<std::size_t>(std::count_if(g_reports.begin(), g_reports.end(),
                                                [c](const Report& r) { return r.check == c; }));
}
const std::vector<LaunchStats>& launches() {
  return g_launches;
}
void clear_launches() {
  g_launches.clear();
}

void* device_alloc(std::size_t bytes) {
  if (g_region == nullptr) {
    void* p = mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    g_region = static_cast<unsigned char*>(p);
  }
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 4095) & ~std::size_t{4095};
  if (g_region_used + rounded + 4096 > kRegionBytes) return nullptr;
  unsigned char* p = g_region + g_region_used;
  g_region_used += rounded + 4096;  // a guard gap after every allocation
  Alloc a;
  a.lo = reinterpret_cast<std::uintptr_t>(p);
  a.hi = a.lo + bytes;
  a.serial = static_cast<int>(g_allocs.size());
  g_allocs.push_back(a);
  return p;
}

bool device_free(void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (Alloc& al : g_allocs)
    if (al.lo == a && al.live) {
      al.live = false;
      const std::size_t rounded = ((al.hi - al.lo) + 4095) & ~std::size_t{4095};
      madvise(p, std::max<std::size_t>(rounded, 4096), MADV_DONTNEED);
      return true;
    }
  return false;
}

int allocation_of(const void* p, std::size_t bytes) {
  Alloc* a = find_alloc(reinterpret_cast<std::uintptr_t>(p), bytes);
  return a ? a->serial : -1;
}
std::size_t allocation_bytes(int serial) {
  if (serial < 0 || serial >= static_cast<int>(g_allocs.size())) return 0;
  const Alloc& a = g_allocs[static_cast<std::size_t>(serial)];
  return a.hi - a.lo;
}

int allocation_count() {
  return static_cast<int>(g_allocs.size());
}

bool run_grid(const char* kernel, dim3 grid, dim3 block, std::size_t dynamic_smem,
              const std::function<void()>& body) {
  const long long threads = static_cast<long long>(block.x) * block.y * block.z;
  const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
  g_kernel = kernel;
  if (threads < 1 || threads > 1024 || blocks < 1 ||
      dynamic_smem > static_cast<std::size_t>(kSmemOptin)) {
    report(Check::deadlock, nullptr, nullptr,
           "invalid launch configuration: " + std::to_string(blocks) + " blocks of " +
               std::to_string(threads) + " threads, " + std::to_string(dynamic_smem) +
               " bytes of dynamic shared memory");
    return false;
  }
  if (g_sec_lo == 0 && __start_simt_shared != nullptr) {
    g_sec_lo = reinterpret_cast<std::uintptr_t>(__start_simt_shared);
    g_sec_hi = reinterpret_cast<std::uintptr_t>(__stop_simt_shared);
  }
  if (g_shadow.empty()) g_shadow.resize((g_sec_hi - g_sec_lo) + kArenaBytes);
  const std::size_t reports_before = g_reports.size();
  g_launches.emplace_back();
  LaunchStats& st = g_launches.back();
  st.kernel = kernel;
  st.grid = grid;
  st.block = block;
  st.dynamic_smem = dynamic_smem;
  g_stats = &st;
  g_fatal = false;
  g_dyn_bytes = dynamic_smem;
  g_nthreads = static_cast<int>(threads);
  g_threads.resize(static_cast<std::size_t>(threads));
  g_published.clear();
  gridDim = grid;
  blockDim = block;
  g_body = &body;
  const auto t0 = Clock::now();
  g_in_kernel = true;
  for (long long k = 0; k < blocks && !g_fatal; ++k) {
    const long long b = g_options.reverse_blocks ? blocks - 1 - k : k;
    const dim3 bid(static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                   static_cast<unsigned>(b / (static_cast<long long>(grid.x) * grid.y)));
    run_block(static_cast<int>(b), bid);
  }
  g_in_kernel = false;
  st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Alloc& a : g_allocs)
    if (a.read || a.written) {
      st.by_allocation.push_back({a.serial, a.read, a.written});
      a.read = a.written = 0;
    }
  g_stats = nullptr;
  g_published.clear();
  st.failed = g_fatal || (g_options.fail_on_report && g_reports.size() > reports_before);
  return !st.failed;
}

// ---- Device side.
namespace dev {

#define SIMT_PC __builtin_extract_return_addr(__builtin_return_address(0))

void syncthreads() {
  Thread& t = cur();
  t.state = State::barrier;
  t.wait_pc = SIMT_PC;
  ++g_arrived;
  if (g_arrived == g_live) {
    complete_barrier();
    return;
  }
  block_current();
}

void syncwarp(unsigned mask) {
  Thread& t = cur();
  arrive_warp(t, Op::syncwarp, mask, SIMT_PC);
}

std::uint64_t shfl(Shfl kind, unsigned mask, std::uint64_t value, int arg, int width) {
  Thread& t = cur();
  t.kind = kind;
  t.value = value;
  t.arg = arg;
  t.width = width;
  arrive_warp(t, Op::shfl, mask, SIMT_PC);
  return t.result;
}

void threadfence() {
  if (g_current >= 0) cur().n_stores = 0;
}

std::uint32_t atomic_add_u32(std::uint32_t* p, std::uint32_t v) {
  atomic_access(p, 4, SIMT_PC);
  const std::uint32_t old = *p;
  *p = old + v;
  return old;
}
std::int32_t atomic_add_i32(std::int32_t* p, std::int32_t v) {
  atomic_access(p, 4, SIMT_PC);
  const std::int32_t old = *p;
  *p = static_cast<std::int32_t>(static_cast<std::uint32_t>(old) + static_cast<std::uint32_t>(v));
  return old;
}
float atomic_add_f32(float* p, float v) {
  atomic_access(p, 4, SIMT_PC);
  const float old = *p;
  *p = old + v;
  return old;
}
std::uint32_t atomic_exch_u32(std::uint32_t* p, std::uint32_t v) {
  atomic_access(p, 4, SIMT_PC);
  const std::uint32_t old = *p;
  *p = v;
  return old;
}
std::uint32_t atomic_cas_u32(std::uint32_t* p, std::uint32_t cmp, std::uint32_t v) {
  atomic_access(p, 4, SIMT_PC);
  const std::uint32_t old = *p;
  if (old == cmp) *p = v;
  return old;
}
std::uint32_t atomic_max_u32(std::uint32_t* p, std::uint32_t v) {
  atomic_access(p, 4, SIMT_PC);
  const std::uint32_t old = *p;
  if (v > old) *p = v;
  return old;
}

void load_global(void* dst, const void* src, std::size_t bytes) {
  access(src, bytes, false, SIMT_PC);
  std::memcpy(dst, src, bytes);
}

void cp_async_16(void* dst, const void* src, bool valid) {
  Thread& t = cur();
  const void* pc = SIMT_PC;
  Copy c;
  c.dst = static_cast<unsigned char*>(dst);
  c.pc = pc;
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  std::size_t base = 0;
  if (!shared_range(d, base) || (d & 15u) != 0) {
    report(Check::shared_bounds, pc, nullptr,
           thread_name(t.tid) +
               " issues cp.async to a destination that is not 16-byte aligned "
               "shared memory, at " +
               site(pc));
    return;
  }
  shared_bounds_check(t, d, 16, pc);
  if (valid) {
    global_access(&t, reinterpret_cast<std::uintptr_t>(src), 16, false, pc);
    if (g_stats) g_stats->cp_async_read += 16;
    std::memcpy(c.data, src, 16);
  } else {
    std::memset(c.data, 0, 16);  // src-size 0: nothing read, 16 zero bytes written
  }
  if (g_options.checks) {
    // The copy may land any time from now: it conflicts like a write with this interval's
    // accesses by other threads.
    for (std::size_t i = 0; i < 16 && base + i < g_shadow.size(); ++i) {
      Shadow& s = g_shadow[base + i];
      if (s.inflight > 0)
        report(Check::cp_async, s.f_pc, pc,
               "two cp.async copies into the same shared bytes are in flight: issued at " +
                   site(s.f_pc) + " and " + site(pc));
      if (s.r_iv == g_iv && (s.r_tid == kManyReaders || !ordered(s.r_tid, s.r_ws, t)))
        report(
            Check::shared_race, s.r_pc, pc,
            "write-after-read race: " +
                (s.r_tid == kManyReaders ? std::string("several threads") : thread_name(s.r_tid)) +
                " read at " + site(s.r_pc) + ", " + thread_name(t.tid) +
                " issues a cp.async into the same bytes at " + site(pc) +
                " with no barrier between");
      ++s.inflight;
      s.f_pc = pc;
    }
  }
  t.open.push_back(c);
}

void cp_async_commit() {
  Thread& t = cur();
  t.groups.push_back(std::move(t.open));
  t.open.clear();
}

void cp_async_wait(int n) {
  Thread& t = cur();
  while (static_cast<int>(t.groups.size()) > n) {
    for (const Copy& c : t.groups.front()) land(t, c);
    t.groups.pop_front();
  }
}

void ldmatrix_x4(std::uint32_t (&r)[4], const void* row, bool trans) {
  Thread& t = cur();
  t.ptr = row;
  t.regs_out = r;
  t.flag = trans;
  const unsigned m = full_warp_mask(t);
  arrive_warp(t, Op::ldmatrix, m, SIMT_PC);
}

void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
               bool bf16) {
  Thread& t = cur();
  t.a = a;
  t.b0 = b0;
  t.b1 = b1;
  t.d = d;
  t.flag = bf16;
  arrive_warp(t, Op::mma, full_warp_mask(t), SIMT_PC);
}

unsigned char* dynamic_shared() {
  return g_arena;
}

std::uint32_t shared_offset(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t i = 0;
  if (!shared_range(a, i) && g_in_kernel && g_current >= 0)
    report(Check::shared_bounds, SIMT_PC, nullptr,
           thread_name(cur().tid) + " converts a non-shared address to the shared window, at " +
               site(SIMT_PC));
  return static_cast<std::uint32_t>(i);
}

}  // namespace dev
}  // namespace mactune::simt

// ---- ThreadSanitizer instrumentation callbacks (GCC/Clang -fsanitize=thread on the kernel
// translation units, no TSan runtime): every load and store of kernel code arrives here.
#define SIMT_PC_HOOK __builtin_extract_return_addr(__builtin_return_address(0))
extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
#define SIMT_HOOKS(N)                                 \
  void __tsan_read##N(void* p) {                      \
    mactune::simt::access(p, N, false, SIMT_PC_HOOK); \
  }                                                   \
  void __tsan_write##N(void* p) {                     \
    mactune::simt::access(p, N, true, SIMT_PC_HOOK);  \
  }                                                   \
  void __tsan_unaligned_read##N(void* p) {            \
    mactune::simt::access(p, N, false, SIMT_PC_HOOK); \
  }                                                   \
  void __tsan_unaligned_write##N(void* p) {           \
    mactune::simt::access(p, N, true, SIMT_PC_HOOK);  \
  }                                                   \
  void __tsan_volatile_read##N(void* p) {             \
    mactune::simt::access(p, N, false, SIMT_PC_HOOK); \
  }                                                   \
  void __tsan_volatile_write##N(void* p) {            \
    mactune::simt::access(p, N, true, SIMT_PC_HOOK);  \
  }
SIMT_HOOKS(1)
SIMT_HOOKS(2)
SIMT_HOOKS(4)
SIMT_HOOKS(8)
SIMT_HOOKS(16)
void __tsan_read_range(void* p, unsigned long n) {
  mactune::simt::access(p, n, false, SIMT_PC_HOOK);
}
void __tsan_write_range(void* p, unsigned long n) {
  mactune::simt::access(p, n, true, SIMT_PC_HOOK);
}
}
