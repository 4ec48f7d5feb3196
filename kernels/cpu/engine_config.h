// The launch parameters of the CPU engine (not compiled in, so not part of instance names
// except the ISA, which picks the code path): what the tuner sweeps under `kernels.cpu`, what
// `mactune profile` and bench_cpu take as flags, what a dispatch table carries in `params`.
#pragma once

#include <string>
#include <vector>

#include "kernels/cpu/kernel_api.h"
#include "kernels/fields.h"
#include "kernels/match_mode.h"

namespace mactune::cpu {

struct EngineConfig {
  int chunk_tokens = 256;  // minimum KV tokens per work item (the planner's min chunk)
  // KV rows per inner block (online-softmax granularity); with pages of a multiple of 16
  // tokens (K in 16-row tiles, storage.h) rounded up to whole tiles.
  int block_rows = 16;
  int threads = 0;           // worker threads; 0 = all logical CPUs
  std::string isa = "auto";  // auto | avx512 | avx2 | generic
  // How the match reads the ring: `scan` computes every candidate's d2; `pruned` (prune.h)
  // first bounds each from a 4-bit copy and reads in full only the rows the bound cannot
  // rule out. The same decisions either way (pick `normalized` always scans).
  MatchMode match_mode = MatchMode::scan;
  bool operator==(const EngineConfig&) const = default;
};

}  // namespace mactune::cpu

template <>
struct mactune::FieldTable<mactune::cpu::EngineConfig> {
  static const std::vector<Field<cpu::EngineConfig>>& fields() {
    using E = cpu::EngineConfig;
    static const std::vector<Field<E>> t = {
        field<&E::isa>("isa", "isa", "vector ISA: auto, avx512, avx2, generic")
            .only({"auto", "avx512", "avx2", "generic"})
            .selects(),
        field<&E::threads>("threads", "threads", "worker threads (0: all logical CPUs)")
            .range(0, 1024),
        field<&E::chunk_tokens>("chunk_tokens", "chunk_tokens", "minimum KV tokens per work item")
            .range(1),
        field<&E::block_rows>("block_rows", "block_rows", "KV rows per inner block")
            .range(1, cpu::kMaxBlockRows),
        field<&E::match_mode>("match_mode", "match_mode",
                              "scan (every ring row) or pruned (rows a bound cannot rule out)"),
    };
    return t;
  }
};
