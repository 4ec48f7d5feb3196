// Device fingerprints: what a measurement, a database row and a dispatch table were taken on.
// The CPU half lives here; the CUDA half (kernels/cuda/device.h) fills the same struct.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace mactune {

struct DeviceFingerprint {
  std::string backend;       // "cpu" or "cuda"
  std::string name;          // CPU model name, or GPU name
  int compute_units = 0;     // logical CPUs, or SMs
  long long memory_mib = 0;  // host memory, or device memory (MiB, rounded down to 1 GiB)
  std::string arch;          // "avx512" / "avx2" / "generic", or "sm_90"
  std::string runtime;       // "", or "driver 13000 / runtime 13000"
  int threads = 0;           // worker threads used (CPU); 0 on GPUs

  // Stable identity: two machines with equal keys are interchangeable for tuning.
  std::string key() const {
    std::ostringstream k;
    k << backend << '|' << name << '|' << compute_units << '|' << memory_mib << '|' << arch << '|'
      << runtime << '|' << threads;
    return k.str();
  }
  // Short hex digest of key(), for file names and table headers.
  std::string digest() const {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bit
    for (unsigned char c : key()) h = (h ^ c) * 1099511628211ull;
    std::ostringstream out;
    out << std::hex << h;
    return out.str();
  }
};

// The widest x86 vector ISA this CPU runs that mactune has a path for.
inline std::string cpu_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
#endif
  return "generic";
}

inline std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        const auto b = v.find_first_not_of(" \t");
        return b == std::string::npos ? v : v.substr(b);
      }
    }
  }
  return "unknown CPU";
}

// Size of the largest cache level of cpu0 in bytes, from sysfs (0 when unknown): what a cold
// sample must evict, and what a bandwidth probe's buffer must dwarf.
inline std::size_t cpu_llc_bytes() {
  std::size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(in >> s) || s.empty()) continue;
    std::size_t mult = 1;
    if (s.back() == 'K') mult = std::size_t{1} << 10;
    if (s.back() == 'M') mult = std::size_t{1} << 20;
    if (mult != 1) s.pop_back();
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) continue;
    best = std::max(best, static_cast<std::size_t>(std::stoull(s)) * mult);
  }
  return best;
}

// The CPU this process runs on, with `threads` workers (0: all logical CPUs).
inline DeviceFingerprint cpu_fingerprint(int threads = 0) {
  DeviceFingerprint d;
  d.backend = "cpu";
  d.name = cpu_model_name();
  d.compute_units = static_cast<int>(std::thread::hardware_concurrency());
  const long long bytes = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<long long>(sysconf(_SC_PAGESIZE));
  d.memory_mib = (bytes >> 30) << 10;
  d.arch = cpu_isa();
  d.threads = threads > 0 ? threads : d.compute_units;
  return d;
}

}  // namespace mactune
