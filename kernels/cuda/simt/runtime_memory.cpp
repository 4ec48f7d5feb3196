// The simt runtime's device memory (one reserved region, guard gaps, never reused), the
// shared-memory shadow and the checks on it (bounds, races, uninitialized reads, cp.async in
// flight), the fence check, atomics and cp.async.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "kernels/cuda/simt/runtime_internal.h"

namespace mactune::simt {
namespace internal {

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

void shared_access(Thread& t, std::uintptr_t a, std::size_t n, bool write, const void* pc,
                   bool check_inflight, bool atomic) {
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
      if (s.w_iv == g_iv && written && !ordered(s.w_tid, s.w_ws, t) && !(atomic && s.w_atomic)) {
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

void checked_access(const void* p, std::size_t n, bool write, const void* pc) {
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

void land(Thread& t, const Copy& c) {
  std::size_t base;
  const bool sh = shared_range(reinterpret_cast<std::uintptr_t>(c.dst), base);
  if (sh && g_options.checks)
    for (std::size_t i = 0; i < 16 && base + i < g_shadow.size(); ++i)
      if (g_shadow[base + i].inflight > 0) --g_shadow[base + i].inflight;
  std::memcpy(c.dst, c.data, 16);
  if (sh) shared_access(t, reinterpret_cast<std::uintptr_t>(c.dst), 16, true, c.pc, false);
}

}  // namespace internal

using namespace internal;

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

namespace dev {

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
