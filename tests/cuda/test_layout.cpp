// The attend kernel's shared-memory layout and MMA fragment plumbing, checked on the host: an
// emulated warp executes ldmatrix(.trans) and mma.m16n8k16 exactly as the PTX ISA defines
// them, fed by the same address functions the kernel uses (kernels/cuda/detail/layout.h), and
// must reproduce S = Q K^T and O = P V. A wrong swizzle, lane map or register order fails here,
// without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <set>
#include <vector>

#include "kernels/cuda/detail/layout.h"
#include "kernels/cuda/launch.h"

namespace mactune::cuda::detail {
namespace {

using Pair = std::array<float, 2>;  // a 32-bit register holding two 16-bit elements (lo, hi)
using Regs4 = std::array<std::array<Pair, 4>, 32>;

// ldmatrix.sync.aligned.m8n8.x4[.trans].b16: lane 8i + r gives the address of row r of matrix
// i; lane L receives, for matrix i, M_i[L/4][2(L%4) + {0,1}] (or M_i[2(L%4) + {0,1}][L/4]).
Regs4 ldmatrix_x4(const std::vector<float>& smem, const std::array<int, 32>& row_addr, bool trans) {
  Regs4 out{};
  for (int L = 0; L < 32; ++L)
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 2; ++k) {
        const int r = trans ? 2 * (L % 4) + k : L / 4;
        const int c = trans ? L / 4 : 2 * (L % 4) + k;
        out[L][i][k] = smem.at(static_cast<std::size_t>(row_addr[8 * i + r] + c));
      }
  return out;
}

// mma.sync.aligned.m16n8k16.row.col.f32: with g = L/4, t = L%4, A regs hold (g, 2t..), (g+8,
// 2t..), (g, 2t+8..), (g+8, 2t+8..); B regs hold (k = 2t.., n = g), (k = 2t+8.., n = g);
// C holds (g, 2t..) and (g+8, 2t..).
void mma(std::array<std::array<float, 4>, 32>& c, const std::array<std::array<Pair, 4>, 32>& a,
         const std::array<std::array<Pair, 2>, 32>& b) {
  float A[16][16], B[16][8];
  for (int L = 0; L < 32; ++L) {
    const int g = L / 4, t = L % 4;
    for (int k = 0; k < 2; ++k) {
      A[g][2 * t + k] = a[L][0][k];
      A[g + 8][2 * t + k] = a[L][1][k];
      A[g][2 * t + 8 + k] = a[L][2][k];
      A[g + 8][2 * t + 8 + k] = a[L][3][k];
      B[2 * t + k][g] = b[L][0][k];
      B[2 * t + 8 + k][g] = b[L][1][k];
    }
  }
  for (int L = 0; L < 32; ++L)
    for (int e = 0; e < 4; ++e) {
      const int row = acc_row(L, e), col = acc_col(L, e);
      double s = 0;
      for (int k = 0; k < 16; ++k) s += double(A[row][k]) * B[k][col];
      c[L][e] += static_cast<float>(s);
    }
}

// A [rows][D] tile stored the way the kernel stores it (16-byte chunks swizzled by row).
std::vector<float> store_swizzled(const std::vector<std::vector<float>>& m, int head_dim) {
  std::vector<float> smem(m.size() * static_cast<std::size_t>(head_dim), NAN);
  for (int r = 0; r < static_cast<int>(m.size()); ++r)
    for (int d = 0; d < head_dim; ++d)
      smem[static_cast<std::size_t>(swizzled_offset(r, d >> 3, head_dim) + (d & 7))] =
          m[static_cast<std::size_t>(r)][static_cast<std::size_t>(d)];
  return smem;
}

std::vector<std::vector<float>> random_matrix(int rows, int cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> m(static_cast<std::size_t>(rows),
                                    std::vector<float>(static_cast<std::size_t>(cols)));
  for (auto& row : m)
    for (float& x : row) x = u(rng);
  return m;
}

class Layout : public ::testing::TestWithParam<int> {};

// S = Q K^T for 16 query rows x 16 tokens, through ldsm_a_rc / ldsm_k_rc and the kernel's
// register order (b[0], b[1] -> n-block 0; b[2], b[3] -> n-block 1).
TEST_P(Layout, ScoresEqualQKt) {
  const int D = GetParam();
  std::mt19937 rng(7 + D);
  const auto q = random_matrix(16, D, rng);
  const auto k = random_matrix(32, D, rng);  // a 32-token tile; the warp's step starts at t0
  const auto qs = store_swizzled(q, D), ks = store_swizzled(k, D);
  for (int t0 : {0, 16}) {
    std::array<std::array<float, 4>, 32> s[2] = {};
    for (int kk = 0; kk < D / 16; ++kk) {
      std::array<int, 32> qa{}, kb{};
      for (int L = 0; L < 32; ++L) {
        const RowChunk a = ldsm_a_rc(L, kk), b = ldsm_k_rc(L, t0, kk);
        qa[L] = swizzled_offset(a.row, a.chunk, D);
        kb[L] = swizzled_offset(b.row, b.chunk, D);
      }
      const Regs4 A = ldmatrix_x4(qs, qa, false), B = ldmatrix_x4(ks, kb, false);
      for (int nb = 0; nb < 2; ++nb) {
        std::array<std::array<Pair, 2>, 32> b{};
        for (int L = 0; L < 32; ++L) b[L] = {B[L][2 * nb], B[L][2 * nb + 1]};
        mma(s[nb], A, b);
      }
    }
    for (int nb = 0; nb < 2; ++nb)
      for (int L = 0; L < 32; ++L)
        for (int e = 0; e < 4; ++e) {
          const int row = acc_row(L, e), tok = t0 + nb * 8 + acc_col(L, e);
          double want = 0;
          for (int d = 0; d < D; ++d) want += double(q[row][d]) * k[tok][d];
          ASSERT_NEAR(s[nb][L][e], want, 1e-4) << "row " << row << " token " << tok;
        }
  }
}

// O = P V: P enters as the A operand straight from the score accumulators (a0a1 = n-block 0
// rows g, a2a3 = n-block 0 rows g+8, a4a5 / a6a7 = n-block 1), V through ldsm_v_rc + .trans;
// for D = 256 each of the two dim parts covers its half of the dims.
TEST_P(Layout, OutputEqualsPV) {
  const int D = GetParam();
  std::mt19937 rng(11 + D);
  const auto p = random_matrix(16, 16, rng);
  const auto v = random_matrix(32, D, rng);
  const auto vs = store_swizzled(v, D);
  const AttendConfig cfg{D, 16, 64, 2, DType::bf16};
  const int parts = attend_dim_parts(cfg), part_dim = D / parts;
  for (int t0 : {0, 16}) {
    // The score accumulators of the two n-blocks, as the kernel holds them per lane.
    std::array<std::array<Pair, 4>, 32> a{};
    for (int L = 0; L < 32; ++L) {
      auto at = [&](int nb, int e) { return p[acc_row(L, e)][nb * 8 + acc_col(L, e)]; };
      a[L][0] = {at(0, 0), at(0, 1)};
      a[L][1] = {at(0, 2), at(0, 3)};
      a[L][2] = {at(1, 0), at(1, 1)};
      a[L][3] = {at(1, 2), at(1, 3)};
    }
    for (int part = 0; part < parts; ++part)
      for (int dc = 0; dc < part_dim / 16; ++dc) {
        std::array<int, 32> vb{};
        for (int L = 0; L < 32; ++L) {
          const RowChunk r = ldsm_v_rc(L, t0, part * (part_dim / 16) + dc);
          vb[L] = swizzled_offset(r.row, r.chunk, D);
        }
        const Regs4 B = ldmatrix_x4(vs, vb, true);
        for (int half = 0; half < 2; ++half) {
          std::array<std::array<float, 4>, 32> o{};
          std::array<std::array<Pair, 2>, 32> b{};
          for (int L = 0; L < 32; ++L) b[L] = {B[L][2 * half], B[L][2 * half + 1]};
          mma(o, a, b);
          for (int L = 0; L < 32; ++L)
            for (int e = 0; e < 4; ++e) {
              const int row = acc_row(L, e);
              const int d = part * part_dim + (2 * dc + half) * 8 + acc_col(L, e);
              double want = 0;
              for (int j = 0; j < 16; ++j) want += double(p[row][j]) * v[t0 + j][d];
              ASSERT_NEAR(o[L][e], want, 1e-4) << "row " << row << " dim " << d;
            }
        }
      }
  }
}

// The kernel's cp.async loop covers every (row, chunk) of a tile exactly once.
TEST_P(Layout, TileCopiesCoverTheTileOnce) {
  const int D = GetParam();
  for (int T : {64, 128, 192, 256}) {
    const int loads = T * (D / 8) / kAttendThreads;
    std::set<std::pair<int, int>> seen;
    for (int tid = 0; tid < kAttendThreads; ++tid)
      for (int j = 0; j < loads; ++j) {
        const RowChunk rc = tile_load_rc(tid, j, D, kAttendThreads);
        ASSERT_LT(rc.row, T);
        ASSERT_LT(rc.chunk, D / 8);
        ASSERT_TRUE(seen.insert({rc.row, rc.chunk}).second) << "tid " << tid << " j " << j;
      }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(T) * (D / 8));
  }
}

// The swizzle is a bijection of the tile, and the 8 rows one ldmatrix phase reads at one
// logical chunk fall in 8 distinct 16-byte bank groups (no conflicts).
TEST_P(Layout, SwizzleIsConflictFreeBijection) {
  const int D = GetParam();
  std::set<int> offsets;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < D / 8; ++c) {
      const int off = swizzled_offset(r, c, D);
      ASSERT_EQ(off % 8, 0);
      ASSERT_TRUE(offsets.insert(off).second);
      ASSERT_GE(off, r * D);
      ASSERT_LT(off, (r + 1) * D);
    }
  for (int r0 = 0; r0 < 64; r0 += 8)
    for (int c = 0; c < D / 8; ++c) {
      std::set<int> groups;
      for (int r = r0; r < r0 + 8; ++r) groups.insert((swizzled_offset(r, c, D) * 2 / 16) % 8);
      EXPECT_EQ(groups.size(), 8u) << "rows " << r0 << ".., chunk " << c;
    }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, Layout, ::testing::Values(64, 128, 256),
                         [](const auto& param_info) {
                           return "Hd" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace mactune::cuda::detail
