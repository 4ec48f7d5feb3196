#include "bench/probes.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <vector>

#include "kernels/device.h"

namespace mactune::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sums 64-bit words with 8 independent accumulators: the loads, not the adds, set the pace.
std::uint64_t sum_words(const std::uint64_t* p, std::size_t n) {
  std::uint64_t a[8] = {};
  for (std::size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  std::uint64_t s = 0;
  for (std::uint64_t x : a) s += x;
  return s;
}

// The same with 32-byte loads, as the AVX2 kernels read. The narrow loop above
// under-reads DRAM: on the Zen 3 build VM, 2 threads, 18-20 GB/s against 26-31 GB/s with this
// one (3 interleaved rounds of 5 passes each), and the kernels then beat their "bound".
[[gnu::target("avx2")]] std::uint64_t sum_words_avx2(const std::uint64_t* p, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  std::uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), a0);
  std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

// The same with 64-byte loads, as the AVX-512 kernels read V (load_pair). On an AVX-512 host
// the 32-byte loop under-reads DRAM too: on the 2-vCPU Xeon VM (AVX-512), 2 threads,
// alternating passes, 28.8 against 29.9 GB/s over 512 MB and 27.1 against 28.5 over 4 GB
// (medians of 11 and 5 pairs, 2026-12-01); full attention's own loads over its KV, with the
// arithmetic taken out, read at 1.06 of the 32-byte figure.
[[gnu::target("avx512f,avx2")]] std::uint64_t sum_words_avx512(const std::uint64_t* p,
                                                               std::size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 24));
  }
  std::uint64_t lanes[8];  // not _mm512_reduce_add_epi64: GCC 12 warns inside its header
  _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  std::uint64_t s = 0;
  for (std::uint64_t x : lanes) s += x;
  for (; i < n; ++i) s += p[i];
  return s;
}

constexpr std::int64_t kFmaIters = 1 << 24;  // ~0.1 s a pass on one Zen 3 core

// Each loop iteration issues 12 independent FMAs per register width (latency 4, 2 pipes:
// 8 in flight saturate them); x <- a x + b with a < 1 stays finite and cannot be folded.
// The 12 accumulators must stay in registers: the loop over them is unrolled by pragma
// (without it GCC -O2 keeps the array in memory and measures stores instead of FMAs).
[[gnu::target("avx2,fma")]] float fma_loop_avx2(float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < kFmaIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

[[gnu::target("avx512f,avx2,fma")]] float fma_loop_avx512(float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < kFmaIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

float fma_loop_generic(float seed) {  // 4 lanes of baseline SSE, no fused multiply-add
  float acc[12][4];
  for (int i = 0; i < 12; ++i)
    for (float& x : acc[i]) x = seed + static_cast<float>(i);
  for (std::int64_t it = 0; it < kFmaIters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      for (float& x : acc[i]) x = x * 0.9999999f + 1e-7f;
  }
  return acc[0][0] + acc[11][3];
}

}  // namespace

namespace {

// A probe buffer backed like the engine's KV arenas (2 MiB-aligned, transparent huge pages
// requested), so the probe pays the same TLB costs as the kernels it bounds.
struct ReadBuffer {
  std::unique_ptr<std::uint64_t, decltype(&std::free)> mem{nullptr, &std::free};
  std::size_t words = 0;

  explicit ReadBuffer(std::size_t bytes) : words(bytes / sizeof(std::uint64_t)) {
    const std::size_t align = std::size_t{2} << 20;
    const std::size_t alloc = (words * sizeof(std::uint64_t) + align - 1) / align * align;
    mem.reset(static_cast<std::uint64_t*>(std::aligned_alloc(align, alloc)));
    if (!mem) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    madvise(mem.get(), alloc, MADV_HUGEPAGE);
#endif
    std::uint64_t* p = mem.get();
    for (std::size_t i = 0; i < words; ++i) p[i] = i * 0x9e3779b97f4a7c15ull;  // real pages
  }

  double measure(cpu::ThreadPool& pool, int passes, cpu::Isa isa) const {
    const std::uint64_t* buf = mem.get();
    const int T = pool.size();
    std::vector<std::uint64_t> sink(static_cast<std::size_t>(T));
    std::vector<double> rates;
    for (int p = 0; p < passes + 1; ++p) {  // the first pass warms the TLB and is dropped
      const auto t0 = std::chrono::steady_clock::now();
      pool.run(T, [&](int t, int) {
        const std::size_t lo = words * static_cast<std::size_t>(t) / T;
        const std::size_t hi = words * static_cast<std::size_t>(t + 1) / T;
        sink[static_cast<std::size_t>(t)] += isa == cpu::Isa::generic ? sum_words(buf + lo, hi - lo)
                                             : isa == cpu::Isa::avx2
                                                 ? sum_words_avx2(buf + lo, hi - lo)
                                                 : sum_words_avx512(buf + lo, hi - lo);
      });
      const double s = seconds_since(t0);
      if (p > 0) rates.push_back(static_cast<double>(words * sizeof(std::uint64_t)) / s);
    }
    volatile std::uint64_t keep = 0;
    for (std::uint64_t x : sink) keep = keep + x;
    return median(rates);
  }
};

}  // namespace

double read_bandwidth(cpu::ThreadPool& pool, std::size_t bytes, int passes, cpu::Isa isa) {
  return ReadBuffer(bytes).measure(pool, passes, isa);
}

double read_bandwidth_now(int passes) {
  static cpu::ThreadPool pool(0);
  static const ReadBuffer buffer(
      std::max<std::size_t>(8 * cpu_llc_bytes(), std::size_t{256} << 20));
  return buffer.measure(pool, passes, cpu::best_isa());
}

double read_bandwidth_at(std::size_t bytes, int passes) {
  static cpu::ThreadPool pool(0);
  static std::unique_ptr<ReadBuffer> buffer;
  bytes = std::max<std::size_t>(bytes, std::size_t{1} << 20);
  const double have = buffer ? static_cast<double>(buffer->words * sizeof(std::uint64_t)) : 0.0;
  if (!buffer || std::abs(have / static_cast<double>(bytes) - 1.0) > 0.05) {
    buffer.reset();  // never two large buffers at once
    buffer = std::make_unique<ReadBuffer>(bytes);
  }
  return buffer->measure(pool, passes, cpu::best_isa());
}

double peak_fma(cpu::ThreadPool& pool, cpu::Isa isa, int passes) {
  const int T = pool.size();
  const int lanes = isa == cpu::Isa::avx512 ? 16 : isa == cpu::Isa::avx2 ? 8 : 4;
  std::vector<float> sink(static_cast<std::size_t>(T));
  std::vector<double> rates;
  for (int p = 0; p < passes + 1; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(T, [&](int t, int) {
      const float seed = static_cast<float>(t);
      sink[static_cast<std::size_t>(t)] += isa == cpu::Isa::avx512 ? fma_loop_avx512(seed)
                                           : isa == cpu::Isa::avx2 ? fma_loop_avx2(seed)
                                                                   : fma_loop_generic(seed);
    });
    const double s = seconds_since(t0);
    const double flops = static_cast<double>(T) * kFmaIters * 12 * lanes * 2;
    if (p > 0) rates.push_back(flops / s);
  }
  volatile float keep = 0;
  for (float x : sink) keep = keep + x;
  return median(rates);
}

double peak_fma_thread_cpu(cpu::Isa isa, int passes) {
  const int lanes = isa == cpu::Isa::avx512 ? 16 : isa == cpu::Isa::avx2 ? 8 : 4;
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::vector<double> rates;
  volatile float keep = 0;
  for (int p = 0; p < passes + 1; ++p) {
    const double t0 = cpu_now();
    keep = keep + (isa == cpu::Isa::avx512 ? fma_loop_avx512(1.0f)
                   : isa == cpu::Isa::avx2 ? fma_loop_avx2(1.0f)
                                           : fma_loop_generic(1.0f));
    const double s = cpu_now() - t0;
    if (p > 0) rates.push_back(static_cast<double>(kFmaIters) * 12 * lanes * 2 / s);
  }
  return median(rates);
}

const Roofline& machine_roofline() {
  static const Roofline r = [] {
    cpu::ThreadPool pool(0);
    Roofline out;
    out.threads = pool.size();
    const cpu::Isa isa = cpu::best_isa();
    out.isa = std::string(cpu::isa_name(isa));
    out.buffer_bytes = std::max<std::size_t>(16 * cpu_llc_bytes(), std::size_t{1} << 30);
    out.read_bytes_per_s = read_bandwidth(pool, out.buffer_bytes, 5, isa);
    out.flops_per_s = peak_fma(pool, isa, 5);
    return out;
  }();
  return r;
}

}  // namespace mactune::bench
