// The compute kernels of the CPU engine, as plain function pointers per (ISA, head_dim, KV
// dtype): `attend` (all heads of one group over one KV range, online softmax in fp32), `dist2`
// (squared distances of one query to every ring slot), and the pruned match's `sketch_dot`
// (the bound's dot product over 4-bit codes) and `dist2_some` (dist2 of chosen slots). The session
// orchestrates them; each ISA's translation unit instantiates them from one templated body
// (kernel_body.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/prune.h"
#include "kernels/dtype.h"

namespace mactune::cpu {

inline constexpr int kMaxGroupSize = 16;   // heads per group (G) the kernels take at once
inline constexpr int kMaxBlockRows = 128;  // EngineConfig::block_rows upper bound
inline constexpr int kMaxHeadDim = 256;

inline constexpr int kKTileRows = 16;  // rows of a tiled K block (KvView::k_tile)

// Where the KV rows of one (request, KV head) live: pages of `page_size` tokens (storage.h has
// the layout). The bytes of row j: pages[j / page_size] + head_offset + (j % page_size) *
// row_bytes for K, the same + v_offset for V; a page's rows of one head are contiguous. V rows
// are row-major. K rows are too when k_tile = 1; when k_tile = kKTileRows, each 16 rows' K
// bytes hold those rows column-major: element (j, d) is element d * 16 + j % 16 of the tile.
struct KvView {
  const std::byte* const* pages = nullptr;  // [pages of the request]
  int page_size = 16;
  int k_tile = 1;               // 1 or kKTileRows
  std::size_t head_offset = 0;  // bytes: kv_head * page_size * row_bytes
  std::size_t v_offset = 0;     // bytes from a page's K block to its V block
  std::size_t row_bytes = 0;    // always D * sizeof(kv): the kernels step rows by D elements
};

// Attention of nh query heads of one group over KV rows [lo, hi); head i masks every row
// below start[i]. Writes one partial state per head: o normalized [D], lse natural log;
// a head with no row left (start[i] >= hi) gets the empty state (o = 0, lse = -inf).
struct AttendArgs {
  const float* q = nullptr;    // [nh, D] post-RoPE, pre-multiplied by scale * log2(e)
  const int* start = nullptr;  // [nh]
  int nh = 0;                  // 1..kMaxGroupSize
  KvView kv;
  int lo = 0, hi = 0;
  int block_rows = 16;   // rows per online-softmax block, 1..kMaxBlockRows
  float* o = nullptr;    // [nh, D]
  float* lse = nullptr;  // [nh]
};

// d2[s] = sum_i (qa_i - c_s * ring_q[s, i])^2 for every slot s in [0, slots), in fp32, with
// c_s = 1, or with `normalized` c_s = sqrt(D / |ring_q[s]|^2) (1 when that norm is 0) and qa
// the caller's already normalized query. Slots hold the ring's q in the KV dtype.
struct DistArgs {
  const float* q = nullptr;           // [D] the current query, rounded to the KV dtype
  const std::byte* ring_q = nullptr;  // [slots, D] in the KV dtype
  int slots = 0;
  bool normalized = false;
  float* d2 = nullptr;  // [slots]
};

// The pruned match's bound pass (prune.h has the bound and its proof), for every slot s in
// [0, slots):
// - dot[s] = sum_i a_i * n_{s,i}, exact in int32: a the query's int8 codes (prune::prepare), n
//   the slot's 4-bit codes (0..15), D/2 bytes a slot, byte j holding dimension j in its low
//   nibble and dimension j + D/2 in its high one. Integer sums are exact, so every ISA path
//   writes the same values.
// - keep[s] = 0 where the bound shows the scan's d2 >= the threshold (prune::e_lo and
//   reaches from dot[s] and the slot's sketch floats, root = prune::root_for), else 1. In
//   double, vectorized by the ISA; an ISA that fuses a multiply-add rounds less, which the
//   bound's slack covers (prune.h), so keep[s] = 0 is proven on every path.
struct SketchArgs {
  const std::int8_t* q = nullptr;       // [D] the query's int8 codes, in memory order
  const std::uint8_t* codes = nullptr;  // [slots, D/2]
  int slots = 0;
  std::int32_t* dot = nullptr;  // [slots]
  const prune::Query* query = nullptr;
  double root = 0.0;
  const float* scale = nullptr;  // [slots] the ring's sketch floats (Ring::sk_*)
  const float* c2 = nullptr;
  const float* norm = nullptr;
  const float* err = nullptr;
  std::uint8_t* keep = nullptr;  // [slots]
};
// The d2 that DistArgs{q, ring_q, slots, false, ...} writes for slot list[i], bit for bit
// (the same chains and the same lane reduction per slot), into d2[i]; nothing else is read.
struct SomeDistArgs {
  const float* q = nullptr;
  const std::byte* ring_q = nullptr;  // [slots, D] in the KV dtype
  int slots = 0;                      // as the exhaustive scan would pass it
  const int* list = nullptr;          // [n] slots in [0, slots)
  int n = 0;
  float* d2 = nullptr;  // [n]
  // Optional, for a caller that reads rows of one query a few at a time: a [D] buffer for q
  // in the kernel's lane order, which a call with q_ready = false fills (q_ready = true: it
  // holds this q's, from an earlier call of the same kernel, and is read instead of q).
  float* q_kernel = nullptr;
  bool q_ready = false;
};

using AttendFn = void (*)(const AttendArgs&);
using DistFn = void (*)(const DistArgs&);
using SketchFn = void (*)(const SketchArgs&);
using SomeDistFn = void (*)(const SomeDistArgs&);

struct KernelSet {
  AttendFn attend = nullptr;
  DistFn dist2 = nullptr;
  SketchFn sketch_dot = nullptr;
  SomeDistFn dist2_some = nullptr;
};

// Each ISA translation unit defines its own; returns {} when head_dim has no instance.
namespace generic {
KernelSet kernel_set(int head_dim, DType kv_dtype);
}
namespace avx2 {
KernelSet kernel_set(int head_dim, DType kv_dtype);
}
namespace avx512 {
KernelSet kernel_set(int head_dim, DType kv_dtype);
}

// The kernels of one ISA: throws InputError when the ISA does not run here or head_dim has no
// instance (64, 128 and 256 are compiled).
KernelSet kernel_set(Isa isa, int head_dim, DType kv_dtype);

}  // namespace mactune::cpu
