// The CPU kernels, written once over a SIMD abstraction `V` and instantiated per ISA.
//
// Included by each ISA translation unit (isa_generic.cpp, isa_avx2.cpp, isa_avx512.cpp) inside
// its own namespace, after that ISA's `V` and inside its target-attribute region, so that every
// function here is a distinct entity per ISA (no ODR sharing between an AVX-512 and an AVX2
// instantiation). Not a standalone header.
//
// V provides: reg, L (lanes); zero, set1, load, store, add, mul, fma (a*b+c), max, hsum, hmax;
// exp2 (x <= 0; exactly 0 below -126); reduce8(acc[8], out[8]); and for each storage type T,
// load_pair(const T*, a, b), which reads 2L stored elements as two fp32 registers in the ISA's
// own lane order, and pair_slot<T>(i), where element i of a 2L block lands in that order.
// Query and accumulator vectors are kept in that order, so no kernel shuffles a KV row.
//
// attend(): rows are processed in blocks of block_rows: (1) scores of every head tile x row
// tile of the heads active in the block (heads sorted by start, so a prefix), with each K row
// loaded once per head tile (V::reduce8 turns 8 dot-product registers
// into 8 scores); (2) per head, the online-softmax update in the log2 domain (q arrives
// pre-scaled by scale * log2 e); (3) P.V with each V row loaded once per head tile and the
// accumulators rescaled on load. The state leaves as (o normalized, lse in natural log).

inline constexpr int kL2 = 2 * V::L;  // elements per load_pair

// Fixed-count loops over registers must unroll fully, or the register arrays below (acc, ka,
// oa, ...) live in memory and every FMA pays a store: -O2 alone does not do it.
#define MACTUNE_UNROLL _Pragma("GCC unroll 16")

// Rows of one score tile per head-tile height: 8 dot-product accumulators in flight.
template <int HT>
inline constexpr int kRowsPerTile = HT >= 8 ? 1 : 8 / HT;
// Pair blocks of D handled per P.V pass: about 8 accumulators in flight.
template <int HT, int D>
inline constexpr int kPairsPerPass = (4 / HT) < 1 ? 1 : ((4 / HT) > D / kL2 ? D / kL2 : 4 / HT);

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

// acc_h = alpha_h acc_h + sum_r p[h, r] v_r for HT heads over nb rows (acc rows stride D).
// With `next`, also prefetches the next block's V rows, each line once over the passes.
template <int D, class T, int HT>
inline void pv_tile(const float* p, int ldp, const T* const* v, int nb, const float* alpha,
                    float* acc, const T* const* next, int nb_next) {
  constexpr int P = kPairsPerPass<HT, D>;
  for (int d = 0; d < D; d += P * kL2) {
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
    if (next)  // the lines that start within this pass's bytes of a row
      for (std::size_t c = (d * sizeof(T) + 63) / 64 * 64; c < (d + P * kL2) * sizeof(T); c += 64)
        prefetch_rows(next, nb_next, c);
    for (int r = 0; r < nb; ++r) {
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
    MACTUNE_UNROLL
    for (int h = 0; h < HT; ++h) MACTUNE_UNROLL
    for (int c = 0; c < P; ++c) {
      V::store(acc + h * D + d + c * kL2, oa[h][c]);
      V::store(acc + h * D + d + c * kL2 + V::L, ob[h][c]);
    }
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

template <int D, class T>
void attend(const AttendArgs& a) {
  static_assert(D % kL2 == 0 && D <= kMaxHeadDim);
  constexpr int kLd = kMaxBlockRows + 16;  // score row stride: room for row and lane padding
  const int nh = a.nh, B = a.block_rows;
  alignas(64) float q[kMaxGroupSize * D];
  alignas(64) float acc[kMaxGroupSize * D];
  alignas(64) float s[kMaxGroupSize * kLd];
  float mx[kMaxGroupSize], sum[kMaxGroupSize], alpha[kMaxGroupSize];
  const T* krows[2][kMaxBlockRows + 8];  // this block's rows and the next block's
  const T* vrows[2][kMaxBlockRows + 8];
  // Heads are processed in the order of their start: the heads active in a block are then a
  // prefix, and head tiles cover only those (a mixed group costs what its heads read).
  int order[kMaxGroupSize], start[kMaxGroupSize];
  for (int h = 0; h < nh; ++h) order[h] = h;
  for (int i = 1; i < nh; ++i)  // insertion sort: stable, no allocation, nh <= 16
    for (int j = i; j > 0 && a.start[order[j - 1]] > a.start[order[j]]; --j)
      std::swap(order[j - 1], order[j]);
  for (int i = 0; i < nh; ++i) {
    start[i] = a.start[order[i]];
    permute_in<T, D>(a.q + order[i] * D, q + i * D);
    for (int d = 0; d < D; ++d) acc[i * D + d] = 0.0f;
    mx[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0.0f;
  }
  // Row pointers come from the page table one block ahead, and the next block's rows are
  // prefetched into L1 a few lines at a time while this block computes: the K rows inside the
  // score loop, the V rows inside the P.V passes. Measured on the Zen 3 build VM (2 threads,
  // DRAM-bound attend, G 4): 20% faster than no software prefetch, where prefetching a whole
  // block at once, 16..128 rows ahead, was 20-40% slower than none (a burst of prefetches
  // fills the miss buffers and stalls the loads the arithmetic waits on).
  const KvView& kv = a.kv;
  int page = a.lo / kv.page_size, off = a.lo % kv.page_size;
  auto take_rows = [&](int n, const T** k, const T** v) {
    for (int r = 0; r < n; ++r) {
      const std::byte* base = kv.pages[page] + kv.head_offset + off * kv.row_bytes;
      k[r] = reinterpret_cast<const T*>(base);
      v[r] = reinterpret_cast<const T*>(base + kv.v_offset);
      if (++off == kv.page_size) off = 0, ++page;
    }
  };
  int nb = std::min(B, a.hi - a.lo), buf = 0;
  take_rows(nb, krows[0], vrows[0]);
  for (int j0 = a.lo; j0 < a.hi; j0 += B, buf ^= 1) {
    const int nb_next = std::min(B, a.hi - (j0 + B));
    if (nb_next > 0) take_rows(nb_next, krows[buf ^ 1], vrows[buf ^ 1]);
    const T** krow = krows[buf];
    const T* const* vrow = vrows[buf];
    for (int r = nb; r < nb + 8; ++r) krow[r] = krow[nb - 1];  // row-tile padding
    const int nb_lanes = (nb + V::L - 1) / V::L * V::L;
    int na = 0;  // heads with a row in this block
    while (na < nh && start[na] < j0 + nb) ++na;
    // Scores of the active heads, a tile of heads at a time.
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
    // Online softmax per head: mask, block max, rescale factor, probabilities.
    for (int h = 0; h < na; ++h) {
      float* sh = s + h * kLd;
      const int first = std::max(start[h] - j0, 0);  // < nb: the head is active
      for (int r = 0; r < first; ++r) sh[r] = -std::numeric_limits<float>::infinity();
      for (int r = nb; r < nb_lanes; ++r) sh[r] = -std::numeric_limits<float>::infinity();
      typename V::reg vmax = V::set1(-std::numeric_limits<float>::infinity());
      for (int r = 0; r < nb_lanes; r += V::L) vmax = V::max(vmax, V::load(sh + r));
      const float new_max = std::max(mx[h], V::hmax(vmax));
      alpha[h] = std::exp2(mx[h] - new_max);  // 0 when mx was -inf
      mx[h] = new_max;
      const typename V::reg m = V::set1(new_max);
      typename V::reg vsum = V::zero();
      for (int r = 0; r < nb_lanes; r += V::L) {
        const typename V::reg p = V::exp2(V::sub(V::load(sh + r), m));
        V::store(sh + r, p);
        vsum = V::add(vsum, p);
      }
      sum[h] = sum[h] * alpha[h] + V::hsum(vsum);
    }
    for_head_tiles(na, [&](int h0, auto ht) {
      constexpr int HT = decltype(ht)::value;
      pv_tile<D, T, HT>(s + h0 * kLd, kLd, vrow, nb, alpha + h0, acc + h0 * D,
                        h0 == 0 ? vrows[buf ^ 1] : nullptr, nb_next);
    });
    nb = nb_next;
  }
  for (int i = 0; i < nh; ++i) {
    float* o = a.o + order[i] * D;
    if (!(sum[i] > 0.0f)) {
      for (int d = 0; d < D; ++d) o[d] = 0.0f;
      a.lse[order[i]] = -std::numeric_limits<float>::infinity();
      continue;
    }
    permute_out<T, D>(acc + i * D, o, 1.0f / sum[i]);
    a.lse[order[i]] = (mx[i] + std::log2(sum[i])) * 0.693147180559945309f;
  }
}

// Squared distances of q to every ring slot (see DistArgs).
template <int D, class T>
void dist2(const DistArgs& a) {
  alignas(64) float q[D];
  permute_in<T, D>(a.q, q);
  const T* ring = reinterpret_cast<const T*>(a.ring_q);
  for (int slot = 0; slot < a.slots; ++slot) {
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
    typename V::reg e0 = V::zero(), e1 = V::zero();
    for (int d = 0; d < D; d += kL2) {
      typename V::reg xa, xb;
      V::load_pair(x + d, xa, xb);
      const typename V::reg da = V::sub(V::load(q + d), V::mul(c, xa));
      const typename V::reg db = V::sub(V::load(q + d + V::L), V::mul(c, xb));
      e0 = V::fma(da, da, e0);
      e1 = V::fma(db, db, e1);
    }
    a.d2[slot] = V::hsum(V::add(e0, e1));
  }
}
