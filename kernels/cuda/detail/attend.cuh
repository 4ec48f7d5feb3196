// Split-KV decode attention over planned work items (attend and full share this device code).
//
// A CTA (4 warps) takes dispatch entries of the device plan (kernels/plan.h), each a range of
// work items; an item is one (request, KV head)
// group over [kv_begin, kv_end). All G query heads of the group are the rows of one 16-row MMA
// tile, so each K/V tile is read once for the whole group. Per item:
//   1. q of the G heads, pre-scaled by softmax_scale * log2(e), goes to shared memory split in
//      two 16-bit halves (hi + lo): scores keep fp32-class accuracy on the tensor cores.
//   2. K/V tiles of `tile_tokens` stream through a `stages`-deep cp.async ring (16-byte copies,
//      zero-filled past kv_end, swizzled against bank conflicts).
//   3. Each warp owns a share of a tile's tokens: S = Q K^T and O += P V with mma.m16n8k16
//      (fp32 accumulators), an online softmax per row in the exp2 domain; each row (head)
//      masks positions below its own start (attend) and at or past kv_end. For D = 256 the
//      warps pair up: both warps of a pair take the same tokens (S computed twice, cheap on the
//      tensor cores) and each accumulates half of the dims, keeping O at 64 registers a thread.
//   4. The warps' states merge through shared memory into the item's partial state per head:
//      o normalized (fp32) and lse in natural log (converted at this boundary).
// An item wholly below a head's start yields that head's empty partial (o = 0, lse = -inf).
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda/detail/layout.h"
#include "kernels/cuda/detail/ptx.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/params.h"

namespace mactune::cuda::detail {

template <AttendConfig C, bool kMasked>
struct AttendCta {
  static constexpr int D = C.head_dim;
  static constexpr int G = C.group;
  static constexpr int T = C.tile_tokens;
  static constexpr int S = C.stages;
  static constexpr DType kT = C.kv_dtype;
  static constexpr int kChunks = D / 8;                    // 16-byte chunks per row
  static constexpr int kDimParts = D > 128 ? D / 128 : 1;  // warps sharing a token range
  static constexpr int kTokenParts = kAttendWarps / kDimParts;
  static constexpr int kPartDim = D / kDimParts;       // output dims one warp accumulates
  static constexpr int kWarpTokens = T / kTokenParts;  // tokens of a tile one warp owns
  static constexpr int kSteps = kWarpTokens / 16;      // 16-token MMA steps per warp and tile
  static constexpr int kLoads = T * kChunks / kAttendThreads;  // 16-byte copies per thread/matrix
  static constexpr int kNBlocks = kPartDim / 8;                // 8-dim n-blocks of a warp's O tile
  static constexpr bool kHighRows = G > 8;  // rows 8..15 of the MMA tile carry heads
  static constexpr float kNegInf = -__builtin_huge_valf();
  static constexpr float kLn2 = 0.693147180559945309f;

  static_assert(config_error(C).empty(), "invalid AttendConfig (see config_error)");
  static_assert(kWarpTokens % 16 == 0, "each warp takes whole 16-token MMA steps");
  static_assert(T * kChunks % kAttendThreads == 0, "tile copies split evenly over the threads");
  static_assert(kAttendThreads % kChunks == 0, "a copy pass covers whole rows");
  static_assert(kAttendWarps % kDimParts == 0, "dim parts split the warps evenly");

  // The dynamic shared memory this layout uses (the pointers below): q hi + lo, then the K/V
  // ring, which the epilogue reuses for acc_s and ml_s. The launchers allocate
  // attend_smem_bytes(C) (launch.h), the formula the instance grid is filtered by: each of its
  // terms is this layout's.
  static constexpr std::size_t kQBytes = 2u * kMmaRows * D * sizeof(std::uint16_t);
  static constexpr std::size_t kPipeBytes = std::size_t{S} * 2u * T * D * sizeof(std::uint16_t);
  static constexpr std::size_t kScratchBytes =
      (std::size_t{kTokenParts} * G * D + std::size_t{kTokenParts} * kMmaRows * 2u) * sizeof(float);
  static_assert(attend_q_bytes(C) == kQBytes, "attend_q_bytes (launch.h) is not this layout's");
  static_assert(attend_pipeline_bytes(C) == kPipeBytes,
                "attend_pipeline_bytes (launch.h) is not this layout's");
  static_assert(attend_scratch_bytes(C) == kScratchBytes,
                "attend_scratch_bytes (launch.h) is not this layout's");

  const AttendParams& p;
  std::uint16_t* q_hi;  // [16][D] swizzled
  std::uint16_t* q_lo;  // [16][D] swizzled
  std::uint16_t* pipe;  // S x (K [T][D], V [T][D]) swizzled
  float* acc_s;         // epilogue: [token parts][G][D]  (aliases pipe)
  float* ml_s;          // epilogue: [token parts][16][2] (max, sum) (aliases pipe)
  int tid, lane, warp, token_part, dim_part;

  __device__ AttendCta(const AttendParams& params, unsigned char* smem) : p(params) {
    q_hi = reinterpret_cast<std::uint16_t*>(smem);
    q_lo = q_hi + kMmaRows * D;
    pipe = reinterpret_cast<std::uint16_t*>(smem + kQBytes);
    acc_s = reinterpret_cast<float*>(smem + kQBytes);
    ml_s = acc_s + kTokenParts * G * D;
    tid = static_cast<int>(threadIdx.x);
    lane = tid & 31;
    warp = tid >> 5;
    token_part = warp % kTokenParts;
    dim_part = warp / kTokenParts;
  }

  __device__ std::uint16_t* k_tile(int buf) const { return pipe + buf * 2 * T * D; }
  __device__ std::uint16_t* v_tile(int buf) const { return pipe + buf * 2 * T * D + T * D; }

  // q of the group's heads -> shared memory (hi/lo halves); rows >= group are zero.
  __device__ void load_q(const WorkItem& it) const {
    const int h0 = it.kv_head * p.group;
    for (int e = tid; e < kMmaRows * (D / 2); e += kAttendThreads) {
      const int r = e / (D / 2), d = 2 * (e % (D / 2));
      float x0 = 0.0f, x1 = 0.0f;
      if (r < p.group) {
        const float2 q = *reinterpret_cast<const float2*>(
            p.q_rot + (static_cast<long long>(it.batch_index) * p.q_heads + h0 + r) * D + d);
        x0 = q.x * p.q_scale;
        x1 = q.y * p.q_scale;
      }
      std::uint32_t hi, lo;
      split_pair<kT>(x0, x1, hi, lo);
      const int off = swizzled_offset(r, d >> 3, D) + (d & 7);
      *reinterpret_cast<std::uint32_t*>(q_hi + off) = hi;
      *reinterpret_cast<std::uint32_t*>(q_lo + off) = lo;
    }
  }

  // First position row r attends (INT_MAX: the row is padding).
  __device__ int row_start(const WorkItem& it, int r) const {
    if (r >= p.group) return INT_MAX;
    if constexpr (!kMasked) return 0;
    return p
        .decisions[static_cast<long long>(it.batch_index) * p.q_heads + it.kv_head * p.group + r]
        .start;
  }

  // Issues the cp.async copies of tile `tile` of the item into ring buffer `buf`.
  __device__ void load_tile(const WorkItem& it, int slot, int tile, int buf) const {
    const int tb = it.kv_begin + tile * T;
    const std::uint16_t* kg = static_cast<const std::uint16_t*>(p.kv.k);
    const std::uint16_t* vg = static_cast<const std::uint16_t*>(p.kv.v);
    const std::int32_t* pages =
        p.kv.page_table + static_cast<long long>(slot) * p.kv.pages_per_request;
    std::uint16_t* ks = k_tile(buf);
    std::uint16_t* vs = v_tile(buf);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const RowChunk rc = tile_load_rc(tid, j, D, kAttendThreads);
      const int pos = tb + rc.row;
      const bool valid = pos < it.kv_end;
      const int at = valid ? pos : it.kv_begin;  // a mapped address even when nothing is read
      const long long off = static_cast<long long>(pages[at / p.kv.page_size]) * p.kv.stride_page +
                            static_cast<long long>(it.kv_head) * p.kv.stride_head +
                            static_cast<long long>(at % p.kv.page_size) * p.kv.stride_token +
                            rc.chunk * 8;
      const int so = swizzled_offset(rc.row, rc.chunk, D);
      cp_async_16(ks + so, kg + off, valid);
      cp_async_16(vs + so, vg + off, valid);
    }
  }

  // Online-softmax state of this thread's two rows (r0 = lane / 4, r1 = r0 + 8) and its share
  // of the O accumulator (rows r0, r1; dims 8 nb + 2 (lane % 4) + {0, 1}).
  struct State {
    float m0, m1, l0, l1;
    float o[kNBlocks][4];
  };

  __device__ void compute_tile(State& st, const WorkItem& it, int tile, int buf, int start0,
                               int start1) const {
    const std::uint16_t* ks = k_tile(buf);
    const std::uint16_t* vs = v_tile(buf);
    const int tb = it.kv_begin + tile * T;
#pragma unroll 1  // steps one after the other: interleaving them costs registers, not time
    for (int step = 0; step < kSteps; ++step) {
      const int t0 = token_part * kWarpTokens + step * 16;  // tile-local first token
      // S = Q K^T for 16 rows x 16 tokens (two 8-token n-blocks), hi and lo halves of q.
      float s[2][4] = {};
#pragma unroll 2
      for (int kk = 0; kk < D / 16; ++kk) {
        std::uint32_t a_hi[4], a_lo[4], b[4];
        const RowChunk qa = ldsm_a_rc(lane, kk);
        ldsm_x4(a_hi, q_hi + swizzled_offset(qa.row, qa.chunk, D));
        ldsm_x4(a_lo, q_lo + swizzled_offset(qa.row, qa.chunk, D));
        const RowChunk kb = ldsm_k_rc(lane, t0, kk);
        ldsm_x4(b, ks + swizzled_offset(kb.row, kb.chunk, D));
        mma_16816<kT>(s[0], a_hi, b[0], b[1]);
        mma_16816<kT>(s[0], a_lo, b[0], b[1]);
        mma_16816<kT>(s[1], a_hi, b[2], b[3]);
        mma_16816<kT>(s[1], a_lo, b[2], b[3]);
      }
      // Masks: past the item's end, below the row's start, padding rows.
      float mx0 = kNegInf, mx1 = kNegInf;
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int pos = tb + t0 + nb * 8 + acc_col(lane, e);
          const int start = e < 2 ? start0 : start1;
          const bool ok = pos < it.kv_end && pos >= start;
          s[nb][e] = ok ? s[nb][e] : kNegInf;
          if (e < 2)
            mx0 = fmaxf(mx0, s[nb][e]);
          else
            mx1 = fmaxf(mx1, s[nb][e]);
        }
      // Row maxima over the 4 lanes of a quad (the lanes that share a row).
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      const float new0 = fmaxf(st.m0, mx0);
      const float base0 = new0 == kNegInf ? 0.0f : new0;  // all masked so far: no -inf - -inf
      const float alpha0 = exp2f(st.m0 - base0);
      float new1 = kNegInf, base1 = 0.0f, alpha1 = 1.0f;
      if constexpr (kHighRows) {
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        new1 = fmaxf(st.m1, mx1);
        base1 = new1 == kNegInf ? 0.0f : new1;
        alpha1 = exp2f(st.m1 - base1);
      }
      float pr[2][4];
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        pr[nb][0] = exp2f(s[nb][0] - base0);  // exp2(-inf) = 0 for masked scores
        pr[nb][1] = exp2f(s[nb][1] - base0);
        pr[nb][2] = kHighRows ? exp2f(s[nb][2] - base1) : 0.0f;
        pr[nb][3] = kHighRows ? exp2f(s[nb][3] - base1) : 0.0f;
      }
      st.l0 = st.l0 * alpha0 + (pr[0][0] + pr[0][1]) + (pr[1][0] + pr[1][1]);
      st.m0 = new0;
      if constexpr (kHighRows) {
        st.l1 = st.l1 * alpha1 + (pr[0][2] + pr[0][3]) + (pr[1][2] + pr[1][3]);
        st.m1 = new1;
      }
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb) {
        st.o[nb][0] *= alpha0;
        st.o[nb][1] *= alpha0;
        if constexpr (kHighRows) {
          st.o[nb][2] *= alpha1;
          st.o[nb][3] *= alpha1;
        }
      }
      // P as the A operand of the PV product: the accumulator layout of the two n-blocks is
      // exactly the A fragment of one 16-token k-step (a0a1, a2a3 = n-block 0; a4a5, a6a7 = 1).
      std::uint32_t p_hi[4], p_lo[4];
      split_pair<kT>(pr[0][0], pr[0][1], p_hi[0], p_lo[0]);
      split_pair<kT>(pr[0][2], pr[0][3], p_hi[1], p_lo[1]);
      split_pair<kT>(pr[1][0], pr[1][1], p_hi[2], p_lo[2]);
      split_pair<kT>(pr[1][2], pr[1][3], p_hi[3], p_lo[3]);
#pragma unroll
      for (int dc = 0; dc < kPartDim / 16; ++dc) {
        std::uint32_t b[4];
        const RowChunk vb = ldsm_v_rc(lane, t0, dim_part * (kPartDim / 16) + dc);
        ldsm_x4_trans(b, vs + swizzled_offset(vb.row, vb.chunk, D));
        mma_16816<kT>(st.o[2 * dc], p_hi, b[0], b[1]);
        mma_16816<kT>(st.o[2 * dc], p_lo, b[0], b[1]);
        mma_16816<kT>(st.o[2 * dc + 1], p_hi, b[2], b[3]);
        mma_16816<kT>(st.o[2 * dc + 1], p_lo, b[2], b[3]);
      }
    }
  }

  // Merges the 4 warps' states of each head and writes the item's partials.
  __device__ void write_partials(State& st, long long item) const {
    st.l0 += __shfl_xor_sync(0xffffffffu, st.l0, 1);
    st.l0 += __shfl_xor_sync(0xffffffffu, st.l0, 2);
    if constexpr (kHighRows) {
      st.l1 += __shfl_xor_sync(0xffffffffu, st.l1, 1);
      st.l1 += __shfl_xor_sync(0xffffffffu, st.l1, 2);
    }
    const int r0 = acc_row(lane, 0), r1 = acc_row(lane, 2);
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb) {
      const int d = dim_part * kPartDim + nb * 8 + acc_col(lane, 0);
      if (r0 < G)
        *reinterpret_cast<float2*>(acc_s + (token_part * G + r0) * D + d) =
            make_float2(st.o[nb][0], st.o[nb][1]);
      if constexpr (kHighRows)
        if (r1 < G)
          *reinterpret_cast<float2*>(acc_s + (token_part * G + r1) * D + d) =
              make_float2(st.o[nb][2], st.o[nb][3]);
    }
    // Warps of one token part hold the same (max, sum): dim part 0 writes them.
    if ((lane & 3) == 0 && dim_part == 0) {
      ml_s[(token_part * kMmaRows + r0) * 2] = st.m0;
      ml_s[(token_part * kMmaRows + r0) * 2 + 1] = st.l0;
      if constexpr (kHighRows) {
        ml_s[(token_part * kMmaRows + r1) * 2] = st.m1;
        ml_s[(token_part * kMmaRows + r1) * 2 + 1] = st.l1;
      }
    }
    __syncthreads();
    for (int e = tid; e < p.group * D; e += kAttendThreads) {
      const int r = e / D, d = e % D;
      float mx = kNegInf;
#pragma unroll
      for (int w = 0; w < kTokenParts; ++w) mx = fmaxf(mx, ml_s[(w * kMmaRows + r) * 2]);
      float o = 0.0f, lse = kNegInf;
      if (mx != kNegInf) {
        float sum = 0.0f, acc = 0.0f;
#pragma unroll
        for (int w = 0; w < kTokenParts; ++w) {
          const float scale = exp2f(ml_s[(w * kMmaRows + r) * 2] - mx);
          sum += ml_s[(w * kMmaRows + r) * 2 + 1] * scale;
          acc += acc_s[(w * G + r) * D + d] * scale;
        }
        o = acc / sum;  // sum >= 1: the warp holding the maximum contributes exp2(0)
        lse = (mx + log2f(sum)) * kLn2;
      }
      p.partial_o[(item * p.group + r) * D + d] = o;
      if (d == 0) p.partial_lse[item * p.group + r] = lse;
    }
  }

  // The dispatch rule of kernels/plan.h: CTA b starts with entry first_claim(b); when done,
  // it takes entry next_claim(grid, ticket) with the next ticket, until none is left.
  __device__ void run(int* ticket_s) const {
    const int entries = p.choice->entries;
    for (int e = first_claim(static_cast<int>(blockIdx.x)); e < entries;) {
      const DispatchEntry d = p.dispatch[e];
      for (int idx = d.first; idx < d.last; ++idx) run_item(idx);
      if (tid == 0) *ticket_s = static_cast<int>(atomicAdd(p.work_counter, 1u));
      __syncthreads();
      e = next_claim(static_cast<int>(gridDim.x), *ticket_s);
      __syncthreads();  // everyone has read the ticket before the next one is written
    }
  }

  __device__ void run_item(int idx) const {
    __syncthreads();  // the previous item's epilogue is done with shared memory
    const WorkItem it = p.items[idx];
    const int slot = p.rows[it.batch_index].slot;
    load_q(it);
    const int start0 = row_start(it, acc_row(lane, 0));
    const int start1 = kHighRows ? row_start(it, acc_row(lane, 2)) : INT_MAX;
    const int tiles = (it.kv_end - it.kv_begin + T - 1) / T;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < tiles) load_tile(it, slot, s, s);
      cp_async_commit();  // empty groups keep the wait count uniform
    }
    State st;
    st.m0 = st.m1 = kNegInf;
    st.l0 = st.l1 = 0.0f;
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[nb][e] = 0.0f;
    for (int t = 0; t < tiles; ++t) {
      const int next = t + S - 1;
      if (next < tiles) load_tile(it, slot, next, next % S);  // refills the buffer of t - 1
      cp_async_commit();
      cp_async_wait<S - 1>();  // tile t has landed (this thread's copies)
      __syncthreads();         // ... and everyone's; q is visible on the first pass
      compute_tile(st, it, t, t % S, start0, start1);
      __syncthreads();  // buffer t % S is free for the copies issued next iteration
    }
    cp_async_wait<0>();
    write_partials(st, idx);
  }
};

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

// Kernels are templates over an instance tag (instances.h: `struct <canonical name> { static
// constexpr AttendConfig config; }`), so profilers show the canonical name in the kernel name.
// Resident CTAs per SM the register allocation must allow: as many as shared memory lets
// reside (kMaxSmemPerCta, 227 KB, an SM), at most 3 (<= 168 registers a thread), at most 2 when
// rows 8-15 of the MMA tile carry heads (G > 8 needs ~175). Without a bound ptxas picked 128
// registers on sm_80 and spilled; with 3 everywhere the large-tile and G = 16 configs spilled.
template <AttendConfig C>
inline constexpr int kAttendMinBlocks = [] {
  const int by_smem = static_cast<int>(kMaxSmemPerCta / attend_smem_bytes(C));
  const int cap = C.group > 8 ? 2 : 3;
  return by_smem < 1 ? 1 : (by_smem > cap ? cap : by_smem);
}();

template <class Instance>
__global__ void __launch_bounds__(kAttendThreads, kAttendMinBlocks<Instance::config>)
    attend_kernel(const __grid_constant__ AttendParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int ticket;
  detail::AttendCta<Instance::config, true>(p, smem).run(&ticket);
}

template <class Instance>
__global__ void __launch_bounds__(kAttendThreads, kAttendMinBlocks<as_attend(Instance::config)>)
    full_kernel(const __grid_constant__ AttendParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int ticket;
  detail::AttendCta<as_attend(Instance::config), false>(p, smem).run(&ticket);
}

}  // namespace mactune::cuda
