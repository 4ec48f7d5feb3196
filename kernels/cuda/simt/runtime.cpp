// The simt runtime (runtime.h): the state of a launch, the reports and the public API. Its parts:
// runtime_fibers.cpp (fibers and the block scheduler), runtime_warp.cpp (barriers and warp
// operations with the PTX ISA's semantics), runtime_memory.cpp (device memory, the shared-memory
// shadow and the checks on it, atomics, cp.async), runtime_tsan.cpp (the ThreadSanitizer
// callbacks through which every kernel access arrives); runtime_internal.h holds what they share.
// Single-threaded by design: one block runs at a time on the calling thread.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "kernels/cuda/simt/runtime_internal.h"

namespace mactune::simt {
namespace internal {

// ---- State.
Options g_options;
std::vector<Report> g_reports;
std::vector<LaunchStats> g_launches;
std::set<std::tuple<int, const void*, const void*>> g_seen;

// Device memory: one reserved region, bump-allocated with guard gaps, never reused.
unsigned char* g_region = nullptr;
std::size_t g_region_used = 0;
std::vector<Alloc> g_allocs;  // in address order (bump allocation)

// Shared memory: the static section, then the dynamic arena (twice the opt-in size, so an
// access past the launch's bytes lands in the arena and is reported, never elsewhere).
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

}  // namespace internal

using namespace internal;

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
  // A launch that reported (with fail_on_report) fails anyway: like a kernel that trapped, it
  // stops after that block (the rest would meet the same bug at every access, slowly).
  const auto failed = [&] {
    return g_fatal || (g_options.fail_on_report && g_reports.size() > reports_before);
  };
  for (long long k = 0; k < blocks && !failed(); ++k) {
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
  st.failed = failed();
  return !st.failed;
}

}  // namespace mactune::simt
