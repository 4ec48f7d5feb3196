// The CPU engine's instances, described (kernels/instance.h): {mac, full} x ISA x head_dim x
// KV dtype. Header-only and free of kernel code: the engine (session.cpp) checks shapes with
// the same shape_error(), and the dispatch catalog lists these descriptions without linking the
// engine.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_api.h"
#include "kernels/instance.h"
#include "kernels/problem.h"

namespace mactune::cpu {

// "" when the CPU engine has a path for the shape (head_dim 64, 128 or 256; G in 1..16), else
// the sentence that says why not.
inline std::string shape_error(const Problem& p) {
  std::ostringstream e;
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    e << "head_dim = " << p.head_dim << " is not supported by the CPU engine (64, 128 or 256)";
  else if (p.group_size() > kMaxGroupSize)
    e << "group size G = q_heads / kv_heads = " << p.q_heads << " / " << p.kv_heads << " = "
      << p.group_size() << " is not supported by the CPU engine (1.." << kMaxGroupSize << ")";
  return e.str();
}

// "mac_cpu_avx2_hd128_bf16" / "full_cpu_avx2_hd128_bf16".
inline std::string instance_name(bool mac, std::string_view isa, int head_dim, DType kv_dtype) {
  std::ostringstream n;
  n << (mac ? "mac" : "full") << "_cpu_" << isa << "_hd" << head_dim << '_' << dtype_name(kv_dtype);
  return n.str();
}

inline InstanceDesc describe(bool mac, Isa isa, int head_dim, DType kv_dtype) {
  InstanceDesc d;
  d.name = instance_name(mac, isa_name(isa), head_dim, kv_dtype);
  d.backend = Backend::cpu;
  d.family = mac ? Family::mac : Family::full;
  d.config = "isa=" + std::string(isa_name(isa)) + ",head_dim=" + std::to_string(head_dim) +
             ",kv_dtype=" + std::string(dtype_name(kv_dtype));
  d.selects = {{"isa", std::string(isa_name(isa))}};
  d.can_implement = [isa, head_dim, kv_dtype](const Problem& p) -> std::string {
    if (std::string why = validate(p); !why.empty()) return why;
    if (std::string why = shape_error(p); !why.empty()) return why;
    if (p.head_dim != head_dim)
      return "head_dim " + std::to_string(p.head_dim) + " != the instance's " +
             std::to_string(head_dim);
    if (p.kv_dtype != kv_dtype)
      return "KV dtype " + std::string(dtype_name(p.kv_dtype)) + " != the instance's " +
             std::string(dtype_name(kv_dtype));
    if (!isa_supported(isa)) return "this CPU does not run " + std::string(isa_name(isa));
    return "";
  };
  d.workspace_bytes = [](const Problem&, int) { return std::size_t{0}; };  // host memory
  return d;
}

// Every CPU instance this machine runs, widest ISA first: the order a fallback prefers, and
// the path `isa = auto` takes.
inline std::vector<InstanceDesc> instances() {
  std::vector<InstanceDesc> out;
  const std::vector<Isa> isas = supported_isas();
  for (auto isa = isas.rbegin(); isa != isas.rend(); ++isa)
    for (const bool mac : {true, false})
      for (const int d : {64, 128, 256})
        for (const DType t : {DType::f32, DType::f16, DType::bf16})
          out.push_back(describe(mac, *isa, d, t));
  return out;
}

}  // namespace mactune::cpu
