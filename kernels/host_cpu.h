// Facts about the host CPU read from the operating system: its model name and the size of its
// last-level cache. (Which vector paths it runs is kernels/cpu/isa.h.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <string>

namespace mactune {

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

}  // namespace mactune
