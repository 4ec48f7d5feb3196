// The portable SIMD abstraction of the kernel body (kernel_body.inl): GCC/Clang vector
// extensions, `Lanes` floats a register.
//
// Included, like kernel_body.inl, inside the unnamed namespace of a translation unit compiled
// for the baseline target (after <cstdint>, <cstring>, <type_traits> and kernels/dtype.h), so
// its functions keep internal linkage. Not a standalone header.
//
// isa_generic.cpp runs the body over GenericV<8, true> on any CPU: the AVX2 path's shape (8
// lanes, bf16 split by parity, a tiled K column in two registers put back in row order by
// unpair) in portable code. GenericV<16, true> is built only into the tests: it takes the
// AVX-512 path's code (16 lanes, a tiled K column in one register) on any CPU, so CI checks
// that logic on machines without AVX-512.
//
// A register is held as Lanes / 4 vectors of 4 floats: the width every SIMD target has (SSE2,
// NEON), so each part stays in a register. One 32-byte vector_size register on SSE2 is lowered
// through the stack (a store-forwarding stall on every broadcast): that made this path 35x
// slower than AVX2 on Zen 3 (1060 against 30 ns a token, G 4, bf16, in cache); in parts of 4,
// with bf16 widened in vectors and split by parity, it takes 83 ns.
typedef float GenericF4 __attribute__((vector_size(16)));
typedef std::int32_t GenericI4 __attribute__((vector_size(16)));
typedef std::uint32_t GenericU4 __attribute__((vector_size(16)));
typedef std::uint16_t GenericH4 __attribute__((vector_size(8)));

template <int Lanes, bool SplitBf16>
struct GenericV {
  static_assert(Lanes % 4 == 0);
  static constexpr int L = Lanes;
  static constexpr int kParts = Lanes / 4;
  struct reg {
    GenericF4 p[kParts];
  };

  template <class F>
  static reg each(F&& f) {  // r.p[i] = f(i) for every part
    reg r;
    for (int i = 0; i < kParts; ++i) r.p[i] = f(i);
    return r;
  }
  template <class F>
  static reg from_lanes(F&& f) {  // lane i = f(i)
    return each([&](int i) {
      return GenericF4{f(4 * i), f(4 * i + 1), f(4 * i + 2), f(4 * i + 3)};
    });
  }
  static float lane(const reg& x, int i) { return x.p[i / 4][i % 4]; }
  static GenericF4 select4(GenericI4 mask, GenericF4 a, GenericF4 b) {  // -1: a, 0: b
    return (GenericF4)((mask & (GenericI4)a) | (~mask & (GenericI4)b));
  }

  static reg zero() {
    return each([](int) { return GenericF4{}; });
  }
  static reg set1(float x) {
    const GenericF4 v = {x, x, x, x};
    return each([&](int) { return v; });
  }
  static reg load(const float* p) {
    return each([&](int i) {
      GenericF4 v;
      std::memcpy(&v, p + 4 * i, sizeof v);
      return v;
    });
  }
  static void store(float* p, reg x) {
    for (int i = 0; i < kParts; ++i) std::memcpy(p + 4 * i, &x.p[i], sizeof x.p[i]);
  }
  static reg add(reg a, reg b) {
    return each([&](int i) { return a.p[i] + b.p[i]; });
  }
  static reg sub(reg a, reg b) {
    return each([&](int i) { return a.p[i] - b.p[i]; });
  }
  static reg mul(reg a, reg b) {
    return each([&](int i) { return a.p[i] * b.p[i]; });
  }
  static reg fma(reg a, reg b, reg c) {
    return each([&](int i) { return a.p[i] * b.p[i] + c.p[i]; });
  }
  static reg max(reg a, reg b) {
    return each([&](int i) { return select4(a.p[i] > b.p[i], a.p[i], b.p[i]); });
  }
  static float hsum(reg x) {
    float s = 0.0f;
    for (int i = 0; i < L; ++i) s += lane(x, i);
    return s;
  }
  static float hmax(reg x) {
    float m = lane(x, 0);
    for (int i = 1; i < L; ++i) m = m > lane(x, i) ? m : lane(x, i);
    return m;
  }
  static void reduce8(const reg* acc, float* out) {
    for (int i = 0; i < 8; ++i) out[i] = hsum(acc[i]);
  }
  // dot[s] = sum_j q[j] (p[j] & 15) + q[j + H] (p[j] >> 4) over slot s's H code bytes p: exact
  // integer sums (kernel_api.h SketchArgs).
  template <int H>
  static void code_dots(const std::int8_t* q, const std::uint8_t* codes, int slots,
                        std::int32_t* dot) {
    for (int s = 0; s < slots; ++s) {
      const std::uint8_t* p = codes + static_cast<std::size_t>(s) * H;
      std::int32_t acc = 0;
      for (int j = 0; j < H; ++j) acc += q[j] * (p[j] & 15) + q[j + H] * (p[j] >> 4);
      dot[s] = acc;
    }
  }

  // 2^x for x <= 0 (scores minus their running max): n = round(x), 2^(x - n) by a degree-7
  // Taylor polynomial on [-1/2, 1/2] (relative error < 1e-8), times 2^n built in the exponent
  // field. Exactly 0 below -126, -inf included.
  static reg exp2(reg x) {
    return each([&](int i) {
      GenericF4 v = x.p[i];
      const GenericI4 live = v >= -126.0f;
      const GenericF4 low = {-126.0f, -126.0f, -126.0f, -126.0f};
      v = select4(v > low, v, low);
      const GenericF4 y = v + 0.5f;
      GenericI4 n = __builtin_convertvector(y, GenericI4);            // truncation toward 0
      n += __builtin_convertvector(n, GenericF4) > y;                 // -1 where that rounded up
      const GenericF4 f = v - __builtin_convertvector(n, GenericF4);  // in [-1/2, 1/2]
      GenericF4 q = GenericF4{} + 1.5252733804059840e-5f;             // ln2^7 / 7!
      q = q * f + 1.5403530393381609e-4f;                             // ln2^6 / 6!
      q = q * f + 1.3333558146428443e-3f;                             // ln2^5 / 5!
      q = q * f + 9.6181291076284772e-3f;                             // ln2^4 / 4!
      q = q * f + 5.5504108664821580e-2f;                             // ln2^3 / 3!
      q = q * f + 2.4022650695910071e-1f;                             // ln2^2 / 2!
      q = q * f + 6.9314718055994531e-1f;                             // ln2
      q = q * f + 1.0f;
      const GenericF4 scale = (GenericF4)((n + 127) << 23);
      return select4(live, q * scale, GenericF4{});
    });
  }

  // With SplitBf16, a bf16 block of 2L elements loads as the SIMD paths load it: even elements
  // in the first register, odd ones in the second.
  template <class T>
  static constexpr bool split = (SplitBf16 && std::is_same_v<T, bf16_t>);
  template <class T>
  static constexpr int pair_slot(int i) {
    if constexpr (split<T>)
      return (i & 1) ? L + i / 2 : i / 2;
    else
      return i;
  }
  // L elements in memory order, widened to fp32 in vectors, bit for bit as to_float: bf16 by a
  // 16-bit shift; f16 by moving exponent and mantissa into place and rebiasing the exponent
  // (subnormals through one exact subtraction of 2^-14, inf and NaN to exponent 255).
  template <class T>
  static reg load_wide(const T* p) {
    if constexpr (std::is_same_v<T, float>) {
      return load(p);
    } else {
      return each([&](int i) {
        GenericH4 h;
        std::memcpy(&h, p + 4 * i, sizeof h);
        const GenericU4 w = __builtin_convertvector(h, GenericU4);
        if constexpr (std::is_same_v<T, bf16_t>) {
          return (GenericF4)(w << 16);
        } else {
          const GenericU4 sign = (w & 0x8000u) << 16, em = (w & 0x7fffu) << 13;
          const GenericU4 e = w & 0x7c00u;
          const GenericF4 normal = (GenericF4)(em + (112u << 23));
          const GenericF4 special = (GenericF4)(em + (224u << 23));          // inf, NaN
          const GenericF4 tiny = (GenericF4)(em + (113u << 23)) - 0x1p-14f;  // m 2^-24
          const GenericF4 x = select4(e == 0u, tiny, select4(e == 0x7c00u, special, normal));
          return (GenericF4)((GenericU4)x | sign);
        }
      });
    }
  }
  template <class T>
  static void load_pair(const T* p, reg& a, reg& b) {
    if constexpr (split<T>) {  // 32-bit words: the even element in the low half
      static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
      for (int i = 0; i < kParts; ++i) {
        GenericU4 w;
        std::memcpy(&w, p + 8 * i, sizeof w);
        a.p[i] = (GenericF4)(w << 16);
        b.p[i] = (GenericF4)(w & 0xffff0000u);
      }
    } else {
      a = load_wide(p);
      b = load_wide(p + L);
    }
  }
  template <class T>  // 16 elements in memory order (a tiled K column); used with L = 16
  static reg load16(const T* p) {
    return load_wide(p);
  }
  // The inverse of the split: a holds elements 0, 2, .. and b 1, 3, .. of a 2L-element block;
  // afterwards a holds 0..L-1 and b L..2L-1.
  static void unpair(reg& a, reg& b) {
    auto element = [&](int e) { return lane(e % 2 == 0 ? a : b, e / 2); };
    const reg x = from_lanes([&](int i) { return element(i); });
    b = from_lanes([&](int i) { return element(L + i); });
    a = x;
  }
};
