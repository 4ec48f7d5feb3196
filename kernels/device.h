// Device fingerprints: what a measurement, a database row and a dispatch table were taken on.
// The CPU half lives here; the CUDA half (kernels/cuda/device.h) fills the same struct.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <thread>

#include "kernels/backend.h"
#include "kernels/cpu/isa.h"
#include "kernels/host_cpu.h"

namespace mactune {

struct DeviceFingerprint {
  Backend backend = Backend::cpu;
  std::string name;          // CPU model name, or GPU name
  int compute_units = 0;     // logical CPUs, or SMs
  long long memory_mib = 0;  // host memory, or device memory (MiB, rounded down to 1 GiB)
  std::string arch;          // "avx512" / "avx2" / "generic", or "sm_90"
  std::string runtime;       // "", or "driver 13000 / runtime 13000"
  int threads = 0;           // worker threads used (CPU); 0 on GPUs

  // Stable identity: two machines with equal keys are interchangeable for tuning.
  std::string key() const {
    std::ostringstream k;
    k << name_of(backend) << '|' << name << '|' << compute_units << '|' << memory_mib << '|' << arch
      << '|' << runtime << '|' << threads;
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

// The CPU this process runs on, with `threads` workers (0: all logical CPUs).
inline DeviceFingerprint cpu_fingerprint(int threads = 0) {
  DeviceFingerprint d;
  d.backend = Backend::cpu;
  d.name = cpu_model_name();
  d.compute_units = static_cast<int>(std::thread::hardware_concurrency());
  const long long bytes = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<long long>(sysconf(_SC_PAGESIZE));
  d.memory_mib = (bytes >> 30) << 10;
  d.arch = std::string(cpu::isa_name(cpu::best_isa()));  // under MACTUNE_CPU_ISA's cap
  d.threads = threads > 0 ? threads : d.compute_units;
  return d;
}

}  // namespace mactune
