// The pruned match's integer dot products over 256-bit registers (kernel_api.h SketchArgs),
// shared by the AVX2 and AVX-512 paths: included inside each one's target-attribute region
// and namespace. 32 code bytes a load give 32 low and 32 high nibbles; vpmaddubsw multiplies
// them (u8) by the query's int8 codes and adds pairs into s16 (|2 * 15 * 127| = 3810; H / 16
// <= 8 of those summed per lane stay below 2^15, so nothing saturates), vpmaddwd adds pairs
// into s32. Integer sums: exact, whatever the order.

// One slot's 8 partial sums (lanes of s32).
template <int H>
inline __m256i code_dot_lanes(const __m256i* qa, const __m256i* qb, const std::uint8_t* p) {
  const __m256i nib = _mm256_set1_epi8(15);
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < H / 32; ++j) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * j));
    const __m256i lo = _mm256_and_si256(b, nib);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
    acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(lo, qa[j]));
    acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(hi, qb[j]));
  }
  return _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
}

template <int H>
void code_dots_256(const std::int8_t* q, const std::uint8_t* codes, int slots, std::int32_t* dot) {
  static_assert(H % 32 == 0 && H <= 128, "s16 partial sums: at most 8 products a lane");
  __m256i qa[H / 32], qb[H / 32];
  for (int j = 0; j < H / 32; ++j) {
    qa[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j));
    qb[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + H + 32 * j));
  }
  int s = 0;
  for (; s + 8 <= slots; s += 8) {  // 8 slots' lanes summed by a hadd tree into one register
    const std::uint8_t* p = codes + static_cast<std::size_t>(s) * H;
    __m256i r[8];
    for (int i = 0; i < 8; ++i) r[i] = code_dot_lanes<H>(qa, qb, p + i * H);
    const __m256i u0 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(r[0], r[1]), _mm256_hadd_epi32(r[2], r[3]));
    const __m256i u1 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(r[4], r[5]), _mm256_hadd_epi32(r[6], r[7]));
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                         _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dot + s), sum);
  }
  for (; s < slots; ++s) {
    const __m256i r = code_dot_lanes<H>(qa, qb, codes + static_cast<std::size_t>(s) * H);
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    dot[s] = _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xb1)));
  }
}
