// The CPU kernels, written once over a SIMD abstraction `V` and instantiated per ISA.
//
// Included by each ISA translation unit (isa_generic.cpp, isa_avx2.cpp, isa_avx512.cpp) inside
// its own namespace, after that ISA's `V` and inside its target-attribute region, so that every
// function here is a distinct entity per ISA (no ODR sharing between an AVX-512 and an AVX2
// instantiation). Not a standalone header.
//
// V provides: reg, L (lanes, 8 or 16); zero, set1, load, store, add, mul, fma (a*b+c), max,
// hsum, hmax; exp2 (x <= 0; exactly 0 below -126); reduce8(acc[8], out[8]); for each storage
// type T, load_pair(const T*, a, b), which reads 2L stored elements as two fp32 registers in the
// ISA's own lane order, and pair_slot<T>(i), where element i of a 2L block lands in that order;
// with L = 16, load16(const T*), 16 elements in memory order. Query and accumulator vectors are
// kept in that order, so no kernel shuffles a KV row.
//
// attend() reads K in one of the two layouts of storage.h (KvView::k_tile):
// - tiled (k_tile = kKTileRows = 16, pages of a multiple of 16 tokens): K is column-major within
//   each 16-row tile, so one load gives one dimension of 16 rows, and the scores of 16 rows x a
//   tile of heads are a chain of broadcast-q FMAs with nothing to reduce across lanes (qk_cols:
//   no horizontal sums, no score scatter). Blocks are whole tiles, aligned to 16 rows; rows
//   outside [lo, hi) are masked, and P.V reads only the V rows inside.
// - row-major (any other page size): scores of head tile x row tile, each K row loaded once
//   per head tile, V::reduce8 turning 8 dot-product registers into 8 scores (qk_tile).
// Then per block: (2) per head, the online-softmax update in the log2 domain (q arrives
// pre-scaled by scale * log2 e); (3) P.V with each V row loaded once per head tile and the
// accumulators rescaled on load. The state leaves as (o normalized, lse in natural log).
//
// Measured on the Zen 3 build VM (G 4, bf16, D 128, AVX2; 8 interleaved processes against the
// row-major path): one thread, KV in cache, 30.6 against 34.0 ns a token (fastest process's
// minimum over 3000 calls); two threads, KV in DRAM (32K rows x 8 heads), 49.2 against 62.6
// ns (median over processes of each one's minimum). With S interleaved chains for head tiles
// of 1 and 2 (qk_cols) and the rescale factors a register at a time: G 1 15.1 ns a token in
// cache against 16.9 before and 17.0 for the row-major path; G 2 18.6 against 20.3; G 4 30.3
// against 30.8 (7 interleaved processes each, 2026-11-30). With row pointers taken a page's
// run at a time, the next block's V tiles prefetched by address (no pointer load per
// prefetch) and the running sums kept as registers: G 1 14.1 against 14.9, G 2 17.8 against
// 19.0, G 4 28.3 against 30.5, G 8 53.2 against 56.2 (5 interleaved processes, same day).

inline constexpr int kL2 = 2 * V::L;  // elements per load_pair

// Fixed-count loops over registers must unroll fully, or the register arrays below (acc, ka,
// oa, ...) live in memory and every FMA pays a store: -O2 alone does not do it.
#define MACTUNE_UNROLL _Pragma("GCC unroll 16")
#define MACTUNE_UNROLL4 _Pragma("GCC unroll 4")  // long loops: a few iterations per branch

// Rows of one score tile per head-tile height: 8 dot-product accumulators in flight.
template <int HT>
inline constexpr int kRowsPerTile = HT >= 8 ? 1 : 8 / HT;
// Pair blocks of D handled per P.V pass: about 8 accumulators in flight.
template <int HT, int D>
inline constexpr int kPairsPerPass = (4 / HT) < 1 ? 1 : ((4 / HT) > D / kL2 ? D / kL2 : 4 / HT);

// A tiled K column: kKTileRows elements of one dimension, in kColRegs registers, in the lane
// order of load_pair (bf16 on AVX2: by parity).
static_assert(V::L == 8 || V::L == 16);
static_assert(kMaxGroupSize % V::L == 0);  // the softmax reads heads a register at a time
inline constexpr int kColRegs = kKTileRows / V::L;

template <class T, class W = V>  // W: only 16-lane ISAs have load16
inline void load_col(const T* p, typename W::reg* c) {
  if constexpr (kColRegs == 2)
    W::load_pair(p, c[0], c[1]);
  else
    c[0] = W::load16(p);
}

// Puts a column's scores (load_col's lane order) into row order.
template <class T, class W = V>  // W: only ISAs that split bf16 by parity have unpair
inline void col_to_row_order(typename W::reg* c) {
  if constexpr (kColRegs == 2 && W::template pair_slot<T>(1) != 1) W::unpair(c[0], c[1]);
}

// Tiles of 16 rows per score pass: about 8 accumulators in flight.
template <int HT>
inline constexpr int kTilesPerPass = 8 / (HT * kColRegs) < 1 ? 1 : 8 / (HT * kColRegs);

template <class T, int D>
inline void permute_in(const float* src, float* dst) {
  for (int b = 0; b < D; b += kL2)
    for (int i = 0; i < kL2; ++i) dst[b + V::template pair_slot<T>(i)] = src[b + i];
}

template <class T, int D>
inline void permute_out(const float* src, float* dst, float scale) {
  for (int b = 0; b < D; b += kL2)
    for (int i = 0; i < kL2; ++i) dst[b + i] = src[b + V::template pair_slot<T>(i)] * scale;
}

// s[h * R + r] = q_h . k_r for HT heads (rows of q, stride D) and R rows.
template <int D, class T, int HT, int R>
inline void qk_tile(const float* q, const T* const* k, float* s) {
  static_assert(HT * R <= 8);
  typename V::reg acc[8];
  MACTUNE_UNROLL
  for (int i = 0; i < 8; ++i) acc[i] = V::zero();
  MACTUNE_UNROLL
  for (int d = 0; d < D; d += kL2) {
    typename V::reg ka[R], kb[R];
    MACTUNE_UNROLL
    for (int r = 0; r < R; ++r) V::load_pair(k[r] + d, ka[r], kb[r]);
    MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) {
      const typename V::reg qa = V::load(q + h * D + d);
      const typename V::reg qb = V::load(q + h * D + d + V::L);
      MACTUNE_UNROLL
      for (int r = 0; r < R; ++r) {
        acc[h * R + r] = V::fma(qa, ka[r], acc[h * R + r]);
        acc[h * R + r] = V::fma(qb, kb[r], acc[h * R + r]);
      }
    }
  }
  V::reduce8(acc, s);
}

// Prefetches into L1 the 64-byte line at byte `offset` of each of the first n rows.
template <class T>
inline void prefetch_rows(const T* const* rows, int n, std::size_t offset) {
  for (int r = 0; r < n; ++r)
    __builtin_prefetch(reinterpret_cast<const std::byte*>(rows[r]) + offset, 0, 3);
}

// Scores of HT heads (rows of q in memory order, stride D) against TP tiled K tiles, tile t
// at tiles[t * kKTileRows]: s[h * lds + t * kKTileRows + row]. Also prefetches the first n_next
// (0..TP) of the next block's tiles, at the same indices of `next`, a line at a time.
template <int D, class T, int HT, int TP>
inline void qk_cols(const float* q, const T* const* tiles, float* s, int lds, const T* const* next,
                    int n_next) {
  constexpr int C = kColRegs;
  constexpr int kColBytes = kKTileRows * sizeof(T);
  // Dimensions summed per register chain before it is added to the others: a chain of all
  // 128 FMAs rounds like a 128-term serial sum (1.06e-5 relative on the fp32 trace test,
  // against 1e-5 for the row-major path's 16-term lanes and tree); chains of 32 keep it there.
  // Partial sums wait in s in lane order; the last chain's sum is put into row order.
  constexpr int kChain = D < 32 ? D : 32;
  // Fewer than 8 accumulators (a head tile of 1 or 2 over one tile) would wait on FMA latency:
  // S interleaved dimension chains make up the count, and are added together at the end.
  constexpr int S = std::max(1, std::min(8 / (HT * TP * C), 4));
  static_assert(kChain % S == 0);
  const T* col[TP];
  MACTUNE_UNROLL
  for (int t = 0; t < TP; ++t) col[t] = tiles[t * kKTileRows];
  MACTUNE_UNROLL
  for (int d0 = 0; d0 < D; d0 += kChain) {
    typename V::reg acc[S][HT][TP * C];
    MACTUNE_UNROLL
    for (int u = 0; u < S; ++u) MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) MACTUNE_UNROLL
    for (int i = 0; i < TP * C; ++i) acc[u][h][i] = V::zero();
    MACTUNE_UNROLL4
    for (int d1 = d0; d1 < d0 + kChain; d1 += S) {
      MACTUNE_UNROLL
      for (int u = 0; u < S; ++u) {
        const int d = d1 + u;
        if (d * kColBytes % 64 == 0)
          for (int t = 0; t < n_next; ++t)
            __builtin_prefetch(
                reinterpret_cast<const std::byte*>(next[t * kKTileRows]) + d * kColBytes, 0, 3);
        MACTUNE_UNROLL
        for (int t = 0; t < TP; ++t) {
          typename V::reg k[C];
          load_col(col[t] + d * kKTileRows, k);
          MACTUNE_UNROLL
          for (int h = 0; h < HT; ++h) {
            const typename V::reg qh = V::set1(q[h * D + d]);
            MACTUNE_UNROLL
            for (int c = 0; c < C; ++c)
              acc[u][h][t * C + c] = V::fma(qh, k[c], acc[u][h][t * C + c]);
          }
        }
      }
    }
    MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) MACTUNE_UNROLL
    for (int t = 0; t < TP; ++t) {
      typename V::reg* a = &acc[0][h][t * C];
      MACTUNE_UNROLL
      for (int u = 1; u < S; ++u) MACTUNE_UNROLL
      for (int c = 0; c < C; ++c) a[c] = V::add(a[c], acc[u][h][t * C + c]);
      float* out = s + h * lds + t * kKTileRows;
      if (d0 > 0) {
        MACTUNE_UNROLL
        for (int c = 0; c < C; ++c) a[c] = V::add(V::load(out + c * V::L), a[c]);
      }
      if (d0 + kChain == D) col_to_row_order<T>(a);
      MACTUNE_UNROLL
      for (int c = 0; c < C; ++c) V::store(out + c * V::L, a[c]);
    }
  }
}

// acc_h = alpha_h acc_h + sum_r p[h, r] v_r for HT heads over the block rows r in [r0, r1)
// (acc rows stride D). With `next`, also prefetches the next block's nb_next V rows, each line
// once over the passes: each pass its share of them (the lines of its bytes of a row), spread
// over its row loop, a row's worth each row, so that the prefetches go out at the pace the
// rows are consumed. Tiled: the rows come in whole 16-row tiles, each contiguous in memory
// (next[t] for t a multiple of 16 starts one), and a pass's share of a tile is a run of lines,
// prefetched in address order by address, with no per-row pointer loads.
// Measured with bench_cpu on the 2-vCPU Xeon VM (AVX-512; 2 threads, full attention, 32/8
// heads, D 128, bf16, pages of 16; old and new binaries interleaved, 2 rounds, 2026-12-01):
// a pass's whole share at its start, 21.9 and 85.7 ms a step at 32K and 128K x batch 4 and
// 22.1 ms at 128K x 1; spread over its rows, 19.2, 75.6 and 19.5 ms. (Our reading: a burst
// of prefetches fills the line-fill buffers and stalls the loads the arithmetic waits on.)
// Moving the next block's V prefetches into the score loop (a burst there) was 12% slower,
// prefetching 2 or 3 blocks ahead 5-12% slower, with the non-temporal hint twice as slow.
// (The row-major path spreads its prefetches the same way; it was not measured separately.)
template <int D, class T, int HT, bool Tiled>
inline void pv_tile(const float* p, int ldp, const T* const* v, int r0, int r1, const float* alpha,
                    float* acc, const T* const* next, int nb_next) {
  constexpr int P = kPairsPerPass<HT, D>;
  constexpr int kPassBytes = P * kL2 * static_cast<int>(sizeof(T));  // of a row, per pass
  // Tiled: a pass's share of one tile, in lines (8 or more), and of the next block.
  constexpr int kTileLines = kKTileRows * kPassBytes / 64;
  static_assert(!Tiled || kKTileRows * kPassBytes % 64 == 0);
  const int share = !next ? 0 : Tiled ? nb_next / kKTileRows * kTileLines : nb_next;
  for (int d = 0; d < D; d += P * kL2) {
    // Share unit i: tiled, line i of the pass's lines of the next block's tiles; row-major,
    // the lines that start within this pass's bytes of next row i.
    const int l0 = d / (P * kL2) * kTileLines;
    auto prefetch_unit = [&](int i) {
      if constexpr (Tiled) {
        __builtin_prefetch(reinterpret_cast<const std::byte*>(next[i / kTileLines * kKTileRows]) +
                               (l0 + i % kTileLines) * 64,
                           0, 3);
      } else {
        for (std::size_t c = (d * sizeof(T) + 63) / 64 * 64; c < d * sizeof(T) + kPassBytes;
             c += 64)
          __builtin_prefetch(reinterpret_cast<const std::byte*>(next[i]) + c, 0, 3);
      }
    };
    // Units for row step q: [unit(q), unit(q + 1)); what the rows leave, after them. (Carrying
    // the next unit from row to row instead made full attention ~10% slower at 32K x 4: 18.4-
    // 22.0 against 17.2-19.0 ms, bench_cpu, 5 interleaved rounds, 2026-12-01.)
    auto unit = [&](int q) { return std::min(Tiled ? q * kTileLines / kKTileRows : q, share); };
    typename V::reg oa[HT][P], ob[HT][P];
    MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) {
      const typename V::reg al = V::set1(alpha[h]);
      MACTUNE_UNROLL
      for (int c = 0; c < P; ++c) {
        oa[h][c] = V::mul(al, V::load(acc + h * D + d + c * kL2));
        ob[h][c] = V::mul(al, V::load(acc + h * D + d + c * kL2 + V::L));
      }
    }
    for (int r = r0; r < r1; ++r) {
      for (int i = unit(r - r0); i < unit(r - r0 + 1); ++i) prefetch_unit(i);
      typename V::reg va[P], vb[P];
      MACTUNE_UNROLL
      for (int c = 0; c < P; ++c) V::load_pair(v[r] + d + c * kL2, va[c], vb[c]);
      MACTUNE_UNROLL
      for (int h = 0; h < HT; ++h) {
        const typename V::reg ph = V::set1(p[h * ldp + r]);
        MACTUNE_UNROLL
        for (int c = 0; c < P; ++c) {
          oa[h][c] = V::fma(ph, va[c], oa[h][c]);
          ob[h][c] = V::fma(ph, vb[c], ob[h][c]);
        }
      }
    }
    for (int i = unit(r1 - r0); i < share; ++i) prefetch_unit(i);
    MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) MACTUNE_UNROLL
    for (int c = 0; c < P; ++c) {
      V::store(acc + h * D + d + c * kL2, oa[h][c]);
      V::store(acc + h * D + d + c * kL2 + V::L, ob[h][c]);
    }
  }
}

// Points k[r] and v[r] at the K and V rows of the n rows from (page, off) on and advances
// (page, off) past them: a page's run at a time (a page's rows of one head are contiguous, D
// elements apart). Out of line: inlined into attend_layout, it made G 1 in cache 5% slower
// (15.0 against 14.3 ns a token), by the register allocation of the loops around it.
template <int D, class T>
[[gnu::noinline]] void take_rows(const KvView& kv, int& page, int& off, int n, const T** k,
                                 const T** v) {
  if (kv.page_size == 1) {  // a page per row: the run loop cost 7% at G 4 in cache here
    for (int r = 0; r < n; ++r, ++page) {
      const std::byte* base = kv.pages[page] + kv.head_offset;
      k[r] = reinterpret_cast<const T*>(base);
      v[r] = reinterpret_cast<const T*>(base + kv.v_offset);
    }
    return;
  }
  for (int r = 0; r < n;) {
    const std::byte* base = kv.pages[page] + kv.head_offset;
    const std::size_t first = static_cast<std::size_t>(off) * D;
    const T* kp = reinterpret_cast<const T*>(base) + first;
    const T* vp = reinterpret_cast<const T*>(base + kv.v_offset) + first;
    const int run = std::min(n - r, kv.page_size - off);
    for (int i = 0; i < run; ++i, ++r) k[r] = kp + i * D, v[r] = vp + i * D;
    off += run;
    if (off == kv.page_size) off = 0, ++page;
  }
}

// Calls f(h0, ht) over tiles of at most 4 heads, with ht a compile-time constant.
template <class F>
inline void for_head_tiles(int nh, F&& f) {
  int h0 = 0;
  for (; h0 + 4 <= nh; h0 += 4) f(h0, std::integral_constant<int, 4>{});
  if (nh - h0 == 3) f(h0, std::integral_constant<int, 3>{});
  if (nh - h0 == 2) f(h0, std::integral_constant<int, 2>{});
  if (nh - h0 == 1) f(h0, std::integral_constant<int, 1>{});
}

template <int D, class T, bool Tiled>
void attend_layout(const AttendArgs& a) {
  static_assert(D % kL2 == 0 && D <= kMaxHeadDim);
  constexpr int kLd = kMaxBlockRows + 16;  // score row stride: room for row and lane padding
  const int nh = a.nh;
  // Rows per block; tiled blocks are whole tiles aligned to 16 rows, the first one from the
  // tile that holds lo.
  const int B = Tiled ? (a.block_rows + kKTileRows - 1) / kKTileRows * kKTileRows : a.block_rows;
  const int first_row = Tiled ? a.lo / kKTileRows * kKTileRows : a.lo;
  alignas(64) float q[kMaxGroupSize * D];
  alignas(64) float acc[kMaxGroupSize * D];
  alignas(64) float s[kMaxGroupSize * kLd];
  // Running max and rescale factor per head, read and written a register of heads at a time, so
  // every lane of mx and bmax is set; the running sum of head h is the register of partial sums
  // at lsum + h * L, its lanes added once at the end (no horizontal sum per block).
  alignas(64) float mx[kMaxGroupSize], bmax[kMaxGroupSize], alpha[kMaxGroupSize];
  alignas(64) float lsum[kMaxGroupSize * V::L];
  std::fill_n(mx, kMaxGroupSize, -std::numeric_limits<float>::infinity());
  std::fill_n(bmax, kMaxGroupSize, -std::numeric_limits<float>::infinity());
  const T* krows[2][kMaxBlockRows + 8];  // this block's rows and the next block's
  const T* vrows[2][kMaxBlockRows + 8];
  // Heads are processed in the order of their start: the heads active in a block are then a
  // prefix, and head tiles cover only those (a mixed group costs what its heads read). A head
  // starts at lo at the earliest: a tiled block may begin below it.
  int order[kMaxGroupSize], start[kMaxGroupSize];
  for (int h = 0; h < nh; ++h) order[h] = h;
  for (int i = 1; i < nh; ++i)  // insertion sort: stable, no allocation, nh <= 16
    for (int j = i; j > 0 && a.start[order[j - 1]] > a.start[order[j]]; --j)
      std::swap(order[j - 1], order[j]);
  for (int i = 0; i < nh; ++i) {
    start[i] = std::max(a.start[order[i]], a.lo);
    if constexpr (Tiled)  // broadcast one dimension at a time: memory order
      for (int d = 0; d < D; ++d) q[i * D + d] = a.q[order[i] * D + d];
    else
      permute_in<T, D>(a.q + order[i] * D, q + i * D);
    for (int d = 0; d < D; ++d) acc[i * D + d] = 0.0f;
    V::store(lsum + i * V::L, V::zero());
  }
  // Row pointers come from the page table one block ahead, and the next block's rows are
  // prefetched into L1 a few lines at a time while this block computes: the K rows inside the
  // score loop, the V rows inside the P.V passes. Measured on the Zen 3 build VM (2 threads,
  // DRAM-bound attend, G 4): 20% faster than no software prefetch, where prefetching a whole
  // block at once, 16..128 rows ahead, was 20-40% slower than none (a burst of prefetches
  // fills the miss buffers and stalls the loads the arithmetic waits on). In a tiled block,
  // krows[r] for r a multiple of 16 is the tile of rows r..r+15 (the K block of those rows).
  // Order matters as much as distance: a tiled block's V lines prefetched in address order
  // (each 16-row tile is 16 contiguous rows) instead of line c of each of its 16 rows in turn
  // made full attention 15-22% faster in the benchmark at 32K and 128K (old and new binaries
  // interleaved, 4 rounds, 2026-11-30). Spreading those V prefetches over the rows they
  // accompany gained 11-13% more (pv_tile).
  const KvView& kv = a.kv;
  int page = first_row / kv.page_size, off = first_row % kv.page_size;
  // Rows a block starting at j0 takes from the page table: up to hi, whole tiles when tiled.
  auto block_len = [&](int j0) {
    const int n = std::min(B, a.hi - j0);
    return Tiled ? (n + kKTileRows - 1) / kKTileRows * kKTileRows : n;
  };
  int nb = block_len(first_row), buf = 0;
  take_rows<D, T>(kv, page, off, nb, krows[0], vrows[0]);
  for (int j0 = first_row; j0 < a.hi; j0 += B, buf ^= 1) {
    const int nb_next = j0 + B < a.hi ? block_len(j0 + B) : 0;
    if (nb_next > 0) take_rows<D, T>(kv, page, off, nb_next, krows[buf ^ 1], vrows[buf ^ 1]);
    const T** krow = krows[buf];
    const T* const* vrow = vrows[buf];
    // Block rows [r_lo, r_hi) are in [lo, hi); the rest of a tiled block is masked.
    const int r_lo = std::max(a.lo - j0, 0), r_hi = std::min(a.hi - j0, nb);
    const int nb_lanes = (nb + V::L - 1) / V::L * V::L;
    int na = 0;  // heads with a row in this block
    while (na < nh && start[na] < j0 + r_hi) ++na;
    if constexpr (Tiled) {
      const int nt = nb / kKTileRows, nt_next = nb_next / kKTileRows;
      for_head_tiles(na, [&](int h0, auto ht) {
        constexpr int HT = decltype(ht)::value, TP = kTilesPerPass<HT>;
        float* sh = s + h0 * kLd;
        // The next block's tiles are prefetched over the first head tile only.
        const T* const* next = krows[buf ^ 1];
        const int n_next = h0 == 0 ? nt_next : 0;
        int t = 0;
        for (; t + TP <= nt; t += TP)
          qk_cols<D, T, HT, TP>(q + h0 * D, krow + t * kKTileRows, sh + t * kKTileRows, kLd,
                                next + t * kKTileRows, std::clamp(n_next - t, 0, TP));
        for (; t < nt; ++t)
          qk_cols<D, T, HT, 1>(q + h0 * D, krow + t * kKTileRows, sh + t * kKTileRows, kLd,
                               next + t * kKTileRows, std::clamp(n_next - t, 0, 1));
      });
    } else {
      for (int r = nb; r < nb + 8; ++r) krow[r] = krow[nb - 1];  // row-tile padding
      for_head_tiles(na, [&](int h0, auto ht) {
        constexpr int HT = decltype(ht)::value, R = kRowsPerTile<HT>;
        alignas(64) float t[8];
        for (int r0 = 0; r0 < nb; r0 += R) {
          if (h0 == 0)  // the next block's K rows, spread over this block's first head tile
            for (std::size_t c = 0; c < D * sizeof(T); c += 64)
              prefetch_rows(krows[buf ^ 1] + r0, std::min(R, nb_next - r0), c);
          qk_tile<D, T, HT, R>(q + h0 * D, krow + r0, t);
          for (int h = 0; h < HT; ++h)
            for (int r = 0; r < R; ++r) s[(h0 + h) * kLd + r0 + r] = t[h * R + r];
        }
      });
    }
    // Online softmax: per head, mask and block max; the running max and rescale factor of all
    // active heads a register at a time (no scalar exp2 call, which would spill every live
    // vector register); per head, the probabilities and their sum.
    for (int h = 0; h < na; ++h) {
      float* sh = s + h * kLd;
      const int first = std::max(start[h] - j0, 0);  // < r_hi: the head is active
      for (int r = 0; r < first; ++r) sh[r] = -std::numeric_limits<float>::infinity();
      for (int r = r_hi; r < nb_lanes; ++r) sh[r] = -std::numeric_limits<float>::infinity();
      typename V::reg vmax = V::load(sh);
      for (int r = V::L; r < nb_lanes; r += V::L) vmax = V::max(vmax, V::load(sh + r));
      bmax[h] = V::hmax(vmax);
    }
    // Lanes past na: bmax is still -inf there (na only grows), so mx keeps its -inf.
    for (int h0 = 0; h0 < na; h0 += V::L) {
      const typename V::reg old_max = V::load(mx + h0);
      const typename V::reg new_max = V::max(old_max, V::load(bmax + h0));
      V::store(alpha + h0, V::exp2(V::sub(old_max, new_max)));  // 0 where mx was -inf
      V::store(mx + h0, new_max);
    }
    for (int h = 0; h < na; ++h) {
      float* sh = s + h * kLd;
      const typename V::reg m = V::set1(mx[h]);
      typename V::reg vsum = V::zero();
      for (int r = 0; r < nb_lanes; r += V::L) {
        const typename V::reg p = V::exp2(V::sub(V::load(sh + r), m));
        V::store(sh + r, p);
        vsum = V::add(vsum, p);
      }
      V::store(lsum + h * V::L, V::fma(V::set1(alpha[h]), V::load(lsum + h * V::L), vsum));
    }
    for_head_tiles(na, [&](int h0, auto ht) {
      constexpr int HT = decltype(ht)::value;
      pv_tile<D, T, HT, Tiled>(s + h0 * kLd, kLd, vrow, r_lo, r_hi, alpha + h0, acc + h0 * D,
                               h0 == 0 ? vrows[buf ^ 1] : nullptr, nb_next);
    });
    nb = nb_next;
  }
  for (int i = 0; i < nh; ++i) {
    float* o = a.o + order[i] * D;
    const float sum = V::hsum(V::load(lsum + i * V::L));
    if (!(sum > 0.0f)) {
      for (int d = 0; d < D; ++d) o[d] = 0.0f;
      a.lse[order[i]] = -std::numeric_limits<float>::infinity();
      continue;
    }
    permute_out<T, D>(acc + i * D, o, 1.0f / sum);
    a.lse[order[i]] = (mx[i] + std::log2(sum)) * 0.693147180559945309f;
  }
}

template <int D, class T>
void attend(const AttendArgs& a) {
  if (a.kv.k_tile == kKTileRows)
    attend_layout<D, T, true>(a);
  else
    attend_layout<D, T, false>(a);
}

// Slots ahead whose query rows dist2 prefetches. Without it the match scan waited on every
// ring row (perf: 41% of dist2's samples on the first FMA after a load): at batch 4, 8K, K 512
// (16 MiB of ring queries a step) the match phase took 0.94-1.08 ms, with 8 slots ahead 0.70-0.71,
// 4: 0.77-0.80, 16: 0.72-0.75, 32: 0.69-0.80 (`mactune profile --backend cpu --batch 4
// --context 8192 --hit-rate 0`, binaries interleaved, chrt -f 50, 2026-12-01).
constexpr int kDistAhead = 8;

// Squared distances of q to every ring slot (see DistArgs), 8 slots at a time: eight
// independent chains (a slot alone is a chain of FMAs, a horizontal sum, a sqrt and divide and
// more FMAs), their sums by reduce8, and the slots kDistAhead ahead prefetched a line at a time
// inside the distance loop. At batch 4 x 32K, where the 16 MiB of ring queries come from DRAM
// (`mactune profile --backend cpu --batch 4 --context 32768 --hit-rate 0`, chrt -f 50,
// 2026-12-01), the match phase took 0.97-0.98 ms one slot at a time, 1.05-1.09 in groups of 8
// with each group's prefetches in one burst, 0.89-0.91 with them spread (16 slots ahead: the
// same; 32: 0.94-0.98).
template <int D, class T>
void dist2(const DistArgs& a) {
  alignas(64) float q[D];
  permute_in<T, D>(a.q, q);
  const T* ring = reinterpret_cast<const T*>(a.ring_q);
  constexpr int kSlots = 8;  // reduce8's count
  int slot = 0;
  for (; slot + kSlots <= a.slots; slot += kSlots) {
    const T* x = ring + static_cast<std::size_t>(slot) * D;
    alignas(64) float c[kSlots];
    if (a.normalized) {
      typename V::reg n2[kSlots];
      MACTUNE_UNROLL
      for (int i = 0; i < kSlots; ++i) n2[i] = V::zero();
      for (int d = 0; d < D; d += kL2) {
        MACTUNE_UNROLL
        for (int i = 0; i < kSlots; ++i) {
          typename V::reg xa, xb;
          V::load_pair(x + i * D + d, xa, xb);
          n2[i] = V::fma(xa, xa, V::fma(xb, xb, n2[i]));
        }
      }
      alignas(64) float n[kSlots];
      V::reduce8(n2, n);
      for (int i = 0; i < kSlots; ++i)
        c[i] = n[i] > 0.0f ? std::sqrt(static_cast<float>(D) / n[i]) : 1.0f;
    } else {
      std::fill_n(c, kSlots, 1.0f);
    }
    typename V::reg e[kSlots];
    MACTUNE_UNROLL
    for (int i = 0; i < kSlots; ++i) e[i] = V::zero();
    const bool ahead = slot + kDistAhead + kSlots <= a.slots;
    for (int d = 0; d < D; d += kL2) {
      const typename V::reg qa = V::load(q + d), qb = V::load(q + d + V::L);
      MACTUNE_UNROLL
      for (int i = 0; i < kSlots; ++i) {
        if (ahead)
          for (std::size_t b = (d * sizeof(T) + 63) / 64 * 64; b < (d + kL2) * sizeof(T); b += 64)
            __builtin_prefetch(reinterpret_cast<const std::byte*>(x + (kDistAhead + i) * D) + b, 0,
                               3);
        typename V::reg xa, xb;
        V::load_pair(x + i * D + d, xa, xb);
        const typename V::reg ci = V::set1(c[i]);
        const typename V::reg da = V::sub(qa, V::mul(ci, xa));
        const typename V::reg db = V::sub(qb, V::mul(ci, xb));
        e[i] = V::fma(da, da, V::fma(db, db, e[i]));
      }
    }
    V::reduce8(e, a.d2 + slot);
  }
  // The last slots (fewer than 8) one at a time; the group loop prefetched none of them.
  for (; slot < a.slots; ++slot) {
    const T* x = ring + static_cast<std::size_t>(slot) * D;
    typename V::reg c = V::set1(1.0f);
    if (a.normalized) {
      typename V::reg n2 = V::zero();
      for (int d = 0; d < D; d += kL2) {
        typename V::reg xa, xb;
        V::load_pair(x + d, xa, xb);
        n2 = V::fma(xa, xa, V::fma(xb, xb, n2));
      }
      const float n = V::hsum(n2);
      if (n > 0.0f) c = V::set1(std::sqrt(static_cast<float>(D) / n));
    }
    typename V::reg e = V::zero();
    for (int d = 0; d < D; d += kL2) {
      typename V::reg xa, xb;
      V::load_pair(x + d, xa, xb);
      const typename V::reg da = V::sub(V::load(q + d), V::mul(c, xa));
      const typename V::reg db = V::sub(V::load(q + d + V::L), V::mul(c, xb));
      e = V::fma(da, da, V::fma(db, db, e));
    }
    a.d2[slot] = V::hsum(e);
  }
}

// The d2 of chosen slots, each computed as dist2 (normalized = false) computes it over
// `slots` slots: the same chain per slot (slots are independent until the lane reduction),
// then the same reduction, reduce8 for the slots of dist2's groups of 8 and hsum for the last
// ones. The pruned match reads its survivors' rows through it, so a row read in full gets the
// exhaustive scan's value bit for bit.
template <int D, class T>
void dist2_some(const SomeDistArgs& a) {
  alignas(64) float own[D];
  float* q = a.q_kernel ? a.q_kernel : own;
  if (!(a.q_kernel && a.q_ready)) permute_in<T, D>(a.q, q);
  const T* ring = reinterpret_cast<const T*>(a.ring_q);
  constexpr int kSlots = 8;
  const int grouped = a.slots / kSlots * kSlots;  // dist2's group loop covers [0, grouped)
  for (int k = 0; k < a.n; ++k) {
    const int slot = a.list[k];
    const T* x = ring + static_cast<std::size_t>(slot) * D;
    const typename V::reg one = V::set1(1.0f);
    typename V::reg e = V::zero();
    for (int d = 0; d < D; d += kL2) {
      typename V::reg xa, xb;
      V::load_pair(x + d, xa, xb);
      const typename V::reg da = V::sub(V::load(q + d), V::mul(one, xa));
      const typename V::reg db = V::sub(V::load(q + d + V::L), V::mul(one, xb));
      e = V::fma(da, da, V::fma(db, db, e));
    }
    if (slot < grouped) {
      typename V::reg acc[kSlots];
      for (int i = 0; i < kSlots; ++i) acc[i] = V::zero();
      acc[slot % kSlots] = e;
      alignas(64) float out[kSlots];
      V::reduce8(acc, out);
      a.d2[k] = out[slot % kSlots];
    } else {
      a.d2[k] = V::hsum(e);
    }
  }
}

// The bound pass (SketchArgs): the exact integer dot products (the ISA's V::code_dots), then
// the bound's test per slot, branch-free over the slots' arrays so that it vectorizes.
template <int D>
void sketch_dot(const SketchArgs& a) {
  V::template code_dots<D / 2>(a.q, a.codes, a.slots, a.dot);
  const prune::Query q = *a.query;
  const double root = a.root;
  const std::int32_t* __restrict dot = a.dot;
  const float* __restrict scale = a.scale;
  const float* __restrict c2 = a.c2;
  const float* __restrict norm = a.norm;
  const float* __restrict err = a.err;
  std::uint8_t* __restrict keep = a.keep;
  const int n = a.slots;
  for (int s = 0; s < n; ++s)
    keep[s] =
        prune::reaches(prune::e_lo(q, dot[s], scale[s], c2[s], norm[s]), err[s], root) ? 0 : 1;
}
