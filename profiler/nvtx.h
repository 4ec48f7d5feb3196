// NVTX3 ranges in the domain "mactune", for Nsight Systems (`nsys profile --trace=nvtx`) and any
// other NVTX tool. Phase ranges use registered strings named "<phase>/<instance>" (e.g.
// "attend/attend_cuda_hd128_g4_t64_s2_bf16"), which nsys needs for NVTX capture ranges and
// which `mactune db import-nsys` splits back into phase and instance.
//
// Without a tool attached, NVTX hands out a null domain and every call here returns after one
// branch; built without the NVTX headers (no CUDA toolkit) everything compiles to nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/phase.h"

namespace mactune::prof {

// Whether this build has NVTX at all, and whether a tool took the NVTX injection in this process
// (decided at the first NVTX call, from NVTX_INJECTION64_PATH; nsys sets it).
bool nvtx_compiled();
bool nvtx_tool_attached();

// The message of a phase range: "<phase>/<instance>", or "<phase>" without an instance.
std::string nvtx_message(Phase phase, std::string_view instance);
// Splits a message back: true when `message` is a phase range (instance may come back empty).
bool parse_nvtx_message(std::string_view message, std::string* phase, std::string* instance);

// A PhaseSink that pushes and pops one NVTX range per phase on the calling thread (NVTX push/pop
// ranges are per thread, like the phases). Colors are fixed per phase.
class NvtxPhaseSink final : public PhaseSink {
 public:
  // `default_instance` names the ranges of phases reported without an instance.
  explicit NvtxPhaseSink(std::string default_instance = {});
  void begin(Phase phase, std::string_view instance) override;
  void end(Phase phase) override;
  bool active() const { return domain_ != nullptr; }

 private:
  void* domain_;  // nvtxDomainHandle_t; null when no tool is attached
  std::string default_instance_;
};

// A scoped NVTX range in domain "mactune" around anything: a tuner point, a warm-up, the
// measured steps. `registered` interns the message (use it for names repeated many times and for
// capture-range triggers, `nsys -c nvtx -p "<message>@mactune"`); `payload` (>= 0) is shown by
// nsys.
class NvtxRange {
 public:
  explicit NvtxRange(std::string_view message, std::int64_t payload = -1, bool registered = false);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool pushed_ = false;
};

// An instantaneous NVTX marker in domain "mactune".
void nvtx_mark(std::string_view message);

}  // namespace mactune::prof
