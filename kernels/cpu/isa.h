// The x86 vector ISAs the CPU engine has code paths for, and the run-time choice among them.
// Every path is compiled into every binary (per-ISA translation units with function-level
// target attributes, never TU-wide -m flags); cpuid decides which ones may run.
//
// MACTUNE_CPU_ISA=generic|avx2|avx512 caps the paths this process treats as present, as
// ATEN_CPU_CAPABILITY does for PyTorch: with MACTUNE_CPU_ISA=avx2 an AVX-512 host behaves like
// an AVX2-only one everywhere (`auto`, the instance list, the device fingerprint, tests that
// skip what the CPU lacks). Unset, empty or `auto`: no cap. Any other value is an input error.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/enum_names.h"
#include "kernels/error.h"
#include "kernels/host_cpu.h"

namespace mactune::cpu {

enum class Isa : std::uint8_t {  // in order of width: a cap admits every path up to it
  generic,                       // portable C++ (GCC vector extensions): any CPU
  avx2,                          // AVX2 + FMA + F16C (Haswell, Zen and later)
  avx512,                        // AVX-512 F/BW/VL (Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4)
};

inline constexpr Isa kAllIsas[] = {Isa::generic, Isa::avx2, Isa::avx512};

}  // namespace mactune::cpu
template <>
struct mactune::EnumNames<mactune::cpu::Isa> {
  using Isa = cpu::Isa;
  static constexpr std::string_view what = "isa";
  static constexpr EnumName<Isa> names[] = {
      {Isa::generic, "generic"}, {Isa::avx2, "avx2"}, {Isa::avx512, "avx512"}};
};
namespace mactune::cpu {

inline constexpr std::string_view isa_name(Isa isa) {
  return name_of(isa);
}

// Whether the hardware has what the path needs (cpuid through the compiler's builtins).
inline bool cpu_has(Isa isa) {
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

// Whether this build compiled the path. Every path by default; MACTUNE_CPU_ISAS (CMake, in
// kernels/cpu/CMakeLists.txt) may leave AVX2 or AVX-512 out (the quick preset builds only the
// paths the building CPU runs), and defines MACTUNE_CPU_SKIP_<ISA> for every user of this header
// (on mactune::kernels). The generic path is always built.
inline constexpr bool isa_built(Isa isa) {
#ifdef MACTUNE_CPU_SKIP_AVX2
  if (isa == Isa::avx2) return false;
#endif
#ifdef MACTUNE_CPU_SKIP_AVX512
  if (isa == Isa::avx512) return false;
#endif
  (void)isa;
  return true;
}

// The widest path MACTUNE_CPU_ISA admits (the widest there is when it is unset or auto).
inline Isa isa_cap() {
  const char* env = std::getenv("MACTUNE_CPU_ISA");
  const std::string_view v = env ? env : "";
  if (v.empty() || v == "auto") return std::end(kAllIsas)[-1];
  for (const Isa i : kAllIsas)
    if (v == isa_name(i)) return i;
  std::string expected = "auto";
  for (const Isa i : kAllIsas) expected += ", " + std::string(isa_name(i));
  input_error("MACTUNE_CPU_ISA = '", v, "' is unknown (expected ", expected, ")");
}

// Whether this process may run the path: the build has it, the CPU has it and MACTUNE_CPU_ISA
// does not cap it.
inline bool isa_supported(Isa isa) {
  return isa_built(isa) && isa <= isa_cap() && cpu_has(isa);
}

// The widest path this process runs.
inline Isa best_isa() {
  for (auto i = std::rbegin(kAllIsas); i != std::rend(kAllIsas); ++i)
    if (isa_supported(*i)) return *i;
  return Isa::generic;
}

// Every path this process runs, narrowest first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (const Isa i : kAllIsas)
    if (isa_supported(i)) out.push_back(i);
  return out;
}

// Why the path does not run here ("" when it does), for errors and test skips.
inline std::string isa_unsupported_reason(Isa isa) {
  if (!isa_built(isa))
    return "this build leaves the " + std::string(isa_name(isa)) + " path out (MACTUNE_CPU_ISAS)";
  if (!cpu_has(isa))
    return "this CPU (" + cpu_model_name() + ") lacks the " + std::string(isa_name(isa)) + " path";
  if (!isa_supported(isa))
    return "MACTUNE_CPU_ISA=" + std::string(isa_name(isa_cap())) + " leaves the " +
           std::string(isa_name(isa)) + " path out";
  return "";
}

// "auto" -> best_isa(); a named path must exist and run here.
inline Isa resolve_isa(std::string_view name) {
  if (name == "auto") return best_isa();
  for (const Isa i : kAllIsas) {
    if (name != isa_name(i)) continue;
    MACTUNE_REQUIRE(isa_supported(i), "isa = '", name, "' is not supported here (",
                    isa_unsupported_reason(i), "; best is ", isa_name(best_isa()), ")");
    return i;
  }
  input_error("isa = '", name, "' is unknown (expected auto, avx512, avx2 or generic)");
}

}  // namespace mactune::cpu
