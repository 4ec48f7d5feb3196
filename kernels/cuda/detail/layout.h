// Where each lane of the attend kernel reads and writes shared memory, and which element of an
// MMA tile each accumulator register holds. Plain constexpr host+device functions: the kernel
// uses them as is, and tests/cuda checks them on the host against the PTX ISA's definitions of
// ldmatrix and mma.m16n8k16 (an emulated warp), so a layout mistake fails without a GPU.
//
// Tiles are [rows][D] of 16-bit elements, rows of D/8 16-byte chunks. Chunk c of row r is stored
// at chunk c ^ (r & 7): the 8 rows an ldmatrix phase reads fall in 8 different bank groups.
#pragma once

#include "kernels/config.h"

namespace mactune::cuda::detail {

struct RowChunk {
  int row;    // tile row (a query row, or a token of a K/V tile)
  int chunk;  // 16-byte chunk of the row: elements [8 chunk, 8 chunk + 8)
};

// Element offset of (row, chunk) in a swizzled [rows][head_dim] tile.
MACTUNE_HD constexpr int swizzled_offset(int row, int chunk, int head_dim) {
  return row * head_dim + ((chunk ^ (row & 7)) << 3);
}

// The j-th 16-byte chunk that thread `tid` of `threads` copies into a [T][head_dim] tile.
MACTUNE_HD constexpr RowChunk tile_load_rc(int tid, int j, int head_dim, int threads) {
  const int chunks = head_dim / 8;
  return {tid / chunks + j * (threads / chunks), tid % chunks};
}

// ldmatrix.x4 row address of `lane` for the A fragment of k-step kk (query rows x dims):
// matrices (rows 0-7, dims lo), (rows 8-15, dims lo), (rows 0-7, dims hi), (rows 8-15, dims hi)
// give registers a0a1, a2a3, a4a5, a6a7 of mma.m16n8k16 (row-major A).
MACTUNE_HD constexpr RowChunk ldsm_a_rc(int lane, int kk) {
  const int i = lane >> 3, r = lane & 7;
  return {r + ((i & 1) << 3), 2 * kk + (i >> 1)};
}

// ldmatrix.x4 row address for the B fragments of S = Q K^T over tokens [t0, t0 + 16), k-step
// kk: matrices (tokens 0-7, dims lo), (tokens 0-7, dims hi), (tokens 8-15, dims lo),
// (tokens 8-15, dims hi) give b0b1, b2b3 of the n-block t0 and b0b1, b2b3 of t0 + 8.
MACTUNE_HD constexpr RowChunk ldsm_k_rc(int lane, int t0, int kk) {
  const int i = lane >> 3, r = lane & 7;
  return {t0 + r + ((i >> 1) << 3), 2 * kk + (i & 1)};
}

// ldmatrix.x4.trans row address for the B fragments of O += P V over tokens [t0, t0 + 16) and
// dims [16 dc, 16 dc + 16): matrices (tokens 0-7, dims lo), (tokens 8-15, dims lo),
// (tokens 0-7, dims hi), (tokens 8-15, dims hi) give b0b1, b2b3 of n-block 2 dc, then 2 dc + 1.
MACTUNE_HD constexpr RowChunk ldsm_v_rc(int lane, int t0, int dc) {
  const int i = lane >> 3, r = lane & 7;
  return {t0 + r + ((i & 1) << 3), 2 * dc + (i >> 1)};
}

// Accumulator register e (0..3) of `lane` in a 16x8 fp32 tile of mma.m16n8k16.
MACTUNE_HD constexpr int acc_row(int lane, int e) {
  return (lane >> 2) + ((e >> 1) << 3);
}
MACTUNE_HD constexpr int acc_col(int lane, int e) {
  return ((lane & 3) << 1) + (e & 1);
}

}  // namespace mactune::cuda::detail
