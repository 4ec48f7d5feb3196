// Memory a decode session will ask for, checked against what the machine has before anything
// is allocated: `replay --K 2000000000` or `profile --batch 1000000000` is one line naming the
// option and the bytes, not std::bad_alloc.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/problem.h"

namespace mactune {

// Address space this process may still map under `ulimit -v` (RLIMIT_AS), or +inf when
// unlimited: a 200 MB limit fails an allocation the machine's free memory would allow.
inline double address_space_left() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
    return std::numeric_limits<double>::infinity();
  std::ifstream statm("/proc/self/statm");
  long long pages = 0;  // VmSize in pages
  if (!(statm >> pages)) return std::numeric_limits<double>::infinity();
  const double used = static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return std::max(0.0, static_cast<double>(lim.rlim_cur) - used);
}

// Bytes the OS can still hand out (/proc/meminfo MemAvailable, and no more than the address
// space left under RLIMIT_AS), 0 when unknown.
inline double available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kib = 0;
  double have = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      have = static_cast<double>(kib) * 1024;
      break;
    }
  if (have <= 0) return 0;
  return std::min(have, address_space_left());
}

// The KV cache of `shape.batch` requests of `context` tokens (whole pages) and, with `mac`, the
// ring of every (request, query head): K entries of a query row, a summary row and an lse.
inline double session_bytes(const Problem& shape, double context, const MacParams* mac) {
  const double D = shape.head_dim;
  const double pages = std::ceil((context + 1.0) / shape.page_size) * shape.page_size;
  double b = double(shape.batch) * shape.kv_heads * pages * D * 2 * dtype_size(shape.kv_dtype);
  if (mac)
    b += double(shape.batch) * shape.q_heads * double(mac->ring_capacity) *
         (D * (dtype_size(shape.kv_dtype) + dtype_size(mac->summary_dtype)) + 4);
  return b;
}

inline std::string gib_text(double bytes) {
  char buf[64];
  if (bytes >= double(1ull << 40))
    std::snprintf(buf, sizeof buf, "%.1f TiB", bytes / double(1ull << 40));
  else if (bytes >= double(1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1ull << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

// Throws InputError "<what> needs 2.3 TiB of memory (<detail>); 20.1 GiB is available" when
// `bytes` is more than 80% of the available memory (the rest is the process's own and the
// OS's). Unknown availability (no /proc) passes.
inline void require_host_memory(double bytes, std::string_view what, std::string_view detail = "") {
  const double have = available_host_bytes();
  if (have <= 0 || bytes <= 0.8 * have) return;
  input_error(what, " needs ", gib_text(bytes), " of memory", detail.empty() ? "" : " (", detail,
              detail.empty() ? "" : ")", "; ", gib_text(have), " is available");
}

}  // namespace mactune
