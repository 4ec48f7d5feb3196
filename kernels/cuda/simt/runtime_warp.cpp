// The simt runtime's barriers and warp-collective operations (shuffles, __syncwarp, ldmatrix,
// mma.sync) with the PTX ISA's semantics and fragment layouts.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "kernels/cuda/simt/runtime_internal.h"
#include "kernels/dtype.h"

namespace mactune::simt {
namespace internal {

void complete_barrier() {
  const int waiting = g_arrived;
  if (g_options.checks && g_live < g_nthreads) {
    const void* pc = nullptr;
    for (const Thread& th : g_threads)
      if (th.state == State::barrier) pc = th.wait_pc;
    std::ostringstream s;
    s << "__syncthreads at " << site(pc) << " reached by " << waiting << " of " << g_nthreads
      << " threads of block (" << blockIdx.x << ',' << blockIdx.y << ',' << blockIdx.z << "); "
      << (g_nthreads - g_live) << " had exited";
    report(Check::barrier, pc, nullptr, s.str());
  }
  const void* first = nullptr;
  for (Thread& th : g_threads) {
    if (th.state != State::barrier) continue;
    if (first == nullptr) first = th.wait_pc;
    // Different return addresses can be one source barrier the compiler duplicated.
    if (g_options.checks && th.wait_pc != first && site(th.wait_pc) != site(first))
      report(Check::barrier, first, th.wait_pc,
             "threads of one block wait at different __syncthreads: " + site(first) + " and " +
                 site(th.wait_pc) + " (" + thread_name(th.tid) + ")");
    th.state = State::runnable;
  }
  g_arrived = 0;
  ++g_iv;
  if (g_stats) ++g_stats->barriers;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::shfl:
      return "a shuffle";
    case Op::syncwarp:
      return "__syncwarp";
    case Op::ldmatrix:
      return "ldmatrix";
    case Op::mma:
      return "mma.sync";
    default:
      return "nothing";
  }
}

void fatal(Check c, const void* pc, const std::string& text) {
  report(c, pc, nullptr, text);
  g_fatal = true;
}

std::uint32_t pack(std::uint16_t lo, std::uint16_t hi) {
  return std::uint32_t{lo} | (std::uint32_t{hi} << 16);
}

void perform(int warp, unsigned mask, Op op) {
  Thread* lanes[32] = {};
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u) lanes[l] = &g_threads[static_cast<std::size_t>(warp * 32 + l)];
  if (g_stats) ++g_stats->warp_ops;
  switch (op) {
    case Op::shfl: {
      for (int l = 0; l < 32; ++l) {
        if (!lanes[l]) continue;
        Thread& t = *lanes[l];
        const int w = t.width;
        const int base = l & ~(w - 1);
        int src = l;
        switch (t.kind) {
          case dev::Shfl::idx:
            src = base + (t.arg & (w - 1));
            break;
          case dev::Shfl::up:
            src = l - t.arg >= base ? l - t.arg : l;
            break;
          case dev::Shfl::down:
            src = l + t.arg < base + w ? l + t.arg : l;
            break;
          case dev::Shfl::bfly:
            src = (l ^ t.arg) < base + w ? (l ^ t.arg) : l;
            break;
        }
        if (!(mask >> src & 1u)) {
          report(Check::warp_op, t.wait_pc, nullptr,
                 thread_name(t.tid) + " shuffles from lane " + std::to_string(src) +
                     ", which is not in the mask (its value is undefined), at " + site(t.wait_pc));
          t.result = t.value;
        } else {
          t.result = lanes[src]->value;
        }
      }
      break;
    }
    case Op::syncwarp: {
      std::uint32_t clock = 0;
      for (Thread* t : lanes)
        if (t) clock = std::max(clock, t->ws);
      for (Thread* t : lanes)
        if (t) t->ws = clock + 1;
      break;
    }
    case Op::ldmatrix: {
      // Lane 8i + r gives row r of matrix i (8 b16 elements, 16 contiguous bytes).
      std::uint16_t m[4][8][8];
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < 8; ++r) {
          Thread& t = *lanes[8 * i + r];
          const auto a = reinterpret_cast<std::uintptr_t>(t.ptr);
          if (!is_shared(a) || (a & 15u) != 0) {
            report(Check::shared_bounds, t.wait_pc, nullptr,
                   thread_name(t.tid) +
                       " gives ldmatrix a row address that is not 16-byte "
                       "aligned shared memory, at " +
                       site(t.wait_pc));
            std::memset(m[i][r], 0, 16);
            continue;
          }
          shared_access(t, a, 16, false, t.wait_pc);
          std::memcpy(m[i][r], t.ptr, 16);
        }
      // Lane L receives, for matrix i, M_i[L/4][2(L%4) + {0,1}] (.trans: M_i[2(L%4) + {0,1}][L/4]),
      // the lower-indexed element in the low half.
      for (int L = 0; L < 32; ++L)
        for (int i = 0; i < 4; ++i) {
          const int g = L / 4, c = 2 * (L % 4);
          lanes[L]->regs_out[i] =
              lanes[L]->flag ? pack(m[i][c][g], m[i][c + 1][g]) : pack(m[i][g][c], m[i][g][c + 1]);
        }
      break;
    }
    case Op::mma: {
      // m16n8k16 .row.col, g = L/4, t = L%4: A regs (g, 2t..) (g+8, 2t..) (g, 2t+8..) (g+8,
      // 2t+8..); B regs (k = 2t.., n = g) (k = 2t+8.., n = g); C/D (g, 2t..) (g+8, 2t..).
      const bool bf16 = lanes[0]->flag;
      auto elem = [bf16](std::uint32_t reg, int half) -> double {
        const auto bits = static_cast<std::uint16_t>(half ? reg >> 16 : reg & 0xffffu);
        return bf16 ? mactune::bf16_to_float({bits}) : mactune::f16_to_float({bits});
      };
      double A[16][16], B[16][8];
      for (int L = 0; L < 32; ++L) {
        const Thread& t = *lanes[L];
        const int g = L / 4, q = L % 4;
        for (int k = 0; k < 2; ++k) {
          A[g][2 * q + k] = elem(t.a[0], k);
          A[g + 8][2 * q + k] = elem(t.a[1], k);
          A[g][2 * q + 8 + k] = elem(t.a[2], k);
          A[g + 8][2 * q + 8 + k] = elem(t.a[3], k);
          B[2 * q + k][g] = elem(t.b0, k);
          B[2 * q + 8 + k][g] = elem(t.b1, k);
        }
      }
      for (int L = 0; L < 32; ++L) {
        float* d = lanes[L]->d;
        for (int e = 0; e < 4; ++e) {
          const int row = L / 4 + (e >> 1) * 8, col = 2 * (L % 4) + (e & 1);
          double s = d[e];  // products are exact; one rounding of the fp32 sum
          for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
          d[e] = static_cast<float>(s);
        }
      }
      break;
    }
    default:
      break;
  }
  for (Thread* t : lanes)
    if (t) {
      t->op = Op::none;
      t->state = State::runnable;
    }
}

void leave_with_fatal() {
  const int from = g_current;
  g_current = -1;
  simt_switch(&g_threads[static_cast<std::size_t>(from)].sp, g_main_sp);
}

// The calling lane has filled in its operation: perform it if every lane of the mask is there.
void arrive_warp(Thread& t, Op op, unsigned mask, const void* pc) {
  t.op = op;
  t.mask = mask;
  t.wait_pc = pc;
  t.state = State::warp;
  const int lane = t.tid % 32, warp = t.tid / 32;
  unsigned& waiting = g_warp_waiting[static_cast<std::size_t>(warp)];
  waiting |= 1u << lane;
  if (!(mask >> lane & 1u))
    fatal(Check::warp_op, pc,
          thread_name(t.tid) + " executes " + op_name(op) + " with a mask that leaves it out, at " +
              site(pc));
  const unsigned present = g_warp_present[static_cast<std::size_t>(warp)];
  if ((mask & ~present) != 0)
    fatal(Check::warp_op, pc,
          std::string(op_name(op)) + " at " + site(pc) + " names lanes the block does not have");
  if (const unsigned gone = mask & g_warp_exited[static_cast<std::size_t>(warp)]; gone && !g_fatal)
    fatal(Check::warp_op, pc,
          thread_name(t.tid) + " waits at " + op_name(op) + " (" + site(pc) + ") for lane " +
              std::to_string(__builtin_ctz(gone)) + ", which has exited");
  if (!g_fatal && (waiting & mask) == mask) {
    for (int l = 0; l < 32; ++l) {
      if (!(mask >> l & 1u)) continue;
      const Thread& o = g_threads[static_cast<std::size_t>(warp * 32 + l)];
      if (o.op != op || o.mask != mask) {
        fatal(Check::warp_op, pc,
              "lanes of warp " + std::to_string(warp) +
                  " meet at different warp operations: " + op_name(op) + " at " + site(pc) +
                  " and " + op_name(o.op) + " at " + site(o.wait_pc));
        break;
      }
    }
    if (!g_fatal) {
      waiting &= ~mask;
      perform(warp, mask, op);
      return;
    }
  }
  if (g_fatal) {
    leave_with_fatal();
    return;
  }
  block_current();
}

unsigned full_warp_mask(const Thread& t) {
  const int warp = t.tid / 32;
  const int n = std::min(32, g_nthreads - warp * 32);
  return n == 32 ? 0xffffffffu : ((1u << n) - 1u);
}

}  // namespace internal

namespace dev {
using namespace internal;

void syncthreads() {
  Thread& t = cur();
  t.state = State::barrier;
  t.wait_pc = SIMT_PC;
  ++g_arrived;
  if (g_arrived == g_live) {
    complete_barrier();
    return;
  }
  block_current();
}

void syncwarp(unsigned mask) {
  Thread& t = cur();
  arrive_warp(t, Op::syncwarp, mask, SIMT_PC);
}

std::uint64_t shfl(Shfl kind, unsigned mask, std::uint64_t value, int arg, int width) {
  Thread& t = cur();
  t.kind = kind;
  t.value = value;
  t.arg = arg;
  t.width = width;
  arrive_warp(t, Op::shfl, mask, SIMT_PC);
  return t.result;
}

void ldmatrix_x4(std::uint32_t (&r)[4], const void* row, bool trans) {
  Thread& t = cur();
  t.ptr = row;
  t.regs_out = r;
  t.flag = trans;
  const unsigned m = full_warp_mask(t);
  arrive_warp(t, Op::ldmatrix, m, SIMT_PC);
}

void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
               bool bf16) {
  Thread& t = cur();
  t.a = a;
  t.b0 = b0;
  t.b1 = b1;
  t.d = d;
  t.flag = bf16;
  arrive_warp(t, Op::mma, full_warp_mask(t), SIMT_PC);
}

}  // namespace dev
}  // namespace mactune::simt
