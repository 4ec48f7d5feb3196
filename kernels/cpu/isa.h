// The x86 vector ISAs the CPU engine has code paths for, and the run-time choice among them.
// Every path is compiled into every binary (per-ISA translation units with function-level
// target attributes, never TU-wide -m flags); cpuid decides which ones may run.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/device.h"
#include "kernels/error.h"

namespace mactune::cpu {

enum class Isa : std::uint8_t {
  generic,  // portable C++ (GCC vector extensions): any CPU
  avx2,     // AVX2 + FMA + F16C (Haswell, Zen and later)
  avx512,   // AVX-512 F/BW/VL (Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4 and later)
};

inline constexpr std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return "generic";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

// Whether this CPU can run the path (cpuid through the compiler's builtins).
inline bool isa_supported(Isa isa) {
  if (isa == Isa::generic) return true;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // F16C: clang 14 has no builtin name for it
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (isa == Isa::avx2) return avx2;
  return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// The widest path this CPU runs.
inline Isa best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::generic;
}

// Every path this CPU runs, narrowest first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

// "auto" -> best_isa(); a named path must exist and run on this CPU.
inline Isa resolve_isa(std::string_view name) {
  if (name == "auto") return best_isa();
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (name != isa_name(i)) continue;
    MACTUNE_REQUIRE(isa_supported(i), "isa = '", name, "' is not supported by this CPU (",
                    cpu_model_name(), "; best is ", isa_name(best_isa()), ")");
    return i;
  }
  input_error("isa = '", name, "' is unknown (expected auto, avx512, avx2 or generic)");
}

}  // namespace mactune::cpu
