#include "kernels/cpu/storage.h"

#include <cstdint>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "kernels/cpu/prune.h"
#include "kernels/cpu/session.h"
#include "kernels/error.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mactune::cpu {
namespace {

constexpr std::size_t kArenaAlign = std::size_t{2} << 20;  // a huge page
constexpr std::size_t kArenaBytes = std::size_t{64} << 20;

// Fresh arena memory, 2 MiB-aligned and zeroed. On Linux an anonymous mapping (zero by
// construction: no memset pass over it; a huge page is zeroed by the kernel when first
// touched), elsewhere the heap.
std::byte* map_arena(std::size_t bytes) {
#if defined(__linux__)
  const std::size_t span = bytes + kArenaAlign;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* base = static_cast<std::byte*>(raw);
  const auto addr = reinterpret_cast<std::uintptr_t>(base);
  const std::size_t head = (kArenaAlign - addr % kArenaAlign) % kArenaAlign;
  if (head > 0) munmap(base, head);
  munmap(base + head + bytes, kArenaAlign - head);  // the tail: never empty, head < align
  std::byte* p = base + head;
#if defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // fewer TLB misses when streaming KV; a hint only
#endif
  return p;
#else
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kArenaAlign, bytes));
  if (p) std::memset(p, 0, bytes);
  return p;
#endif
}

void unmap_arena(std::byte* p, std::size_t bytes) {
#if defined(__linux__)
  munmap(p, bytes);
#else
  (void)bytes;
  std::free(p);
#endif
}

struct ArenaCache {
  struct Held {
    std::byte* p;
    std::size_t bytes;
    DType dtype;
  };
  std::mutex mutex;
  std::size_t limit = 0, held_bytes = 0;
  std::vector<Held> held;

  void drop_all_locked() {
    for (const Held& h : held) unmap_arena(h.p, h.bytes);
    held.clear();
    held_bytes = 0;
  }
};

ArenaCache& arena_cache() {
  static ArenaCache cache;
  return cache;
}

// A recycled arena of this size and dtype, or a fresh one; nullptr when out of memory.
std::byte* take_arena(std::size_t bytes, DType dtype) {
  {
    ArenaCache& c = arena_cache();
    std::lock_guard lock(c.mutex);
    if (!c.held.empty() && (c.held.back().bytes != bytes || c.held.back().dtype != dtype))
      c.drop_all_locked();  // another kind of pool now: the held arenas would only sit there
    if (!c.held.empty()) {
      std::byte* p = c.held.back().p;
      c.held.pop_back();
      c.held_bytes -= bytes;
      return p;
    }
  }
  return map_arena(bytes);
}

}  // namespace

void set_arena_cache_bytes(std::size_t bytes) {
  ArenaCache& c = arena_cache();
  std::lock_guard lock(c.mutex);
  c.limit = bytes;
  while (!c.held.empty() && c.held_bytes > c.limit) {
    unmap_arena(c.held.back().p, c.held.back().bytes);
    c.held_bytes -= c.held.back().bytes;
    c.held.pop_back();
  }
}

std::size_t arena_cache_held_bytes() {
  ArenaCache& c = arena_cache();
  std::lock_guard lock(c.mutex);
  return c.held_bytes;
}

void PagedKv::ArenaFree::operator()(std::byte* p) const {
  ArenaCache& c = arena_cache();
  {
    std::lock_guard lock(c.mutex);
    const bool same_kind =
        c.held.empty() || (c.held.back().bytes == bytes && c.held.back().dtype == dtype);
    if (same_kind && c.held_bytes + bytes <= c.limit) {
      c.held.push_back({p, bytes, dtype});
      c.held_bytes += bytes;
      return;
    }
  }
  unmap_arena(p, bytes);
}

PagedKv::PagedKv(int kv_heads, int head_dim, DType dtype, int page_size)
    : page_size_(page_size),
      k_tile_(page_size % kKTileRows == 0 ? kKTileRows : 1),
      head_dim_(head_dim),
      dtype_(dtype) {
  row_bytes_ = static_cast<std::size_t>(head_dim) * dtype_size(dtype);
  const std::size_t page_bytes = 2 * static_cast<std::size_t>(kv_heads) * page_size * row_bytes_;
  pages_per_arena_ = std::max<std::size_t>(1, kArenaBytes / page_bytes);
  v_offset_ = static_cast<std::size_t>(page_size) * row_bytes_;
  head_stride_ = pages_per_arena_ * 2 * v_offset_;
  arena_bytes_ = static_cast<std::size_t>(kv_heads) * head_stride_;
}

PagedKv::~PagedKv() = default;

void PagedKv::reserve(std::vector<std::byte*>& table, int tokens) {
  const std::size_t need = static_cast<std::size_t>((tokens + page_size_ - 1) / page_size_);
  while (table.size() < need) {
    if (free_.empty()) {
      std::size_t bytes = arena_bytes_;
      bytes = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
      // Zeroed (or recycled: finite values of this dtype): a tiled block's rows past a
      // request's length are read (and masked) by the score loop, so they hold finite values,
      // never heap garbage.
      std::byte* p = take_arena(bytes, dtype_);
      if (!p)
        throw Error(detail::concat("out of memory allocating a ", bytes >> 20, " MiB KV arena"));
      arenas_.emplace_back(p, ArenaFree{bytes, dtype_});
      const std::size_t page_stride = 2 * v_offset_;
      for (std::size_t i = pages_per_arena_; i-- > 0;) free_.push_back(p + i * page_stride);
    }
    table.push_back(free_.back());
    free_.pop_back();
  }
}

void PagedKv::release(std::vector<std::byte*>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

KvView PagedKv::view(const std::vector<std::byte*>& table, int kv_head) const {
  KvView v;
  v.pages = table.data();
  v.page_size = page_size_;
  v.k_tile = k_tile_;
  v.head_offset = static_cast<std::size_t>(kv_head) * head_stride_;
  v.v_offset = v_offset_;
  v.row_bytes = row_bytes_;
  return v;
}

void PagedKv::write(const std::vector<std::byte*>& table, int kv_head, int j, const float* k,
                    const float* v) const {
  store_floats(dtype_, v, v_row(table, kv_head, j), head_dim_);
  std::byte* kb = k_block(table, kv_head, j);
  if (k_tile_ == 1) {
    store_floats(dtype_, k, kb, head_dim_);
    return;
  }
  const std::size_t e = dtype_size(dtype_);
  std::byte row[kMaxHeadDim * sizeof(float)];
  store_floats(dtype_, k, row, head_dim_);
  kb += static_cast<std::size_t>(j % k_tile_) * e;
  for (int d = 0; d < head_dim_; ++d)
    std::memcpy(kb + static_cast<std::size_t>(d) * k_tile_ * e, row + d * e, e);
}

void PagedKv::read(const std::vector<std::byte*>& table, int kv_head, int j, float* k,
                   float* v) const {
  load_floats(dtype_, v_row(table, kv_head, j), v, head_dim_);
  const std::byte* kb = k_block(table, kv_head, j);
  if (k_tile_ == 1) {
    load_floats(dtype_, kb, k, head_dim_);
    return;
  }
  for (int d = 0; d < head_dim_; ++d)
    k[d] = load_as_float(dtype_, kb, static_cast<std::size_t>(d) * k_tile_ + j % k_tile_);
}

void Ring::allocate(int heads, int slots, int dim, DType qt, DType o_dtype) {
  q_heads = heads;
  capacity = slots;
  head_dim = dim;
  q_dtype = qt;
  q_bytes = static_cast<std::size_t>(dim) * dtype_size(qt);
  o_bytes = static_cast<std::size_t>(dim) * dtype_size(o_dtype);
  const std::size_t n = static_cast<std::size_t>(heads) * slots;
  pos.resize(n);
  lse.resize(n);
  q.resize(n * q_bytes);
  o.resize(n * o_bytes);
  codes.resize(n * static_cast<std::size_t>(dim / 2));
  sk_scale.resize(n);
  sk_c2.resize(n);
  sk_norm.resize(n);
  sk_err.resize(n);
  clear();
}

void Ring::clear() {
  std::fill(pos.begin(), pos.end(), -1);
  std::fill(lse.begin(), lse.end(), -std::numeric_limits<float>::infinity());
  std::memset(q.data(), 0, q.size());
  std::memset(o.data(), 0, o.size());
  std::memset(codes.data(), 0x88, codes.size());  // the sketch of q = 0: codes 0, exact
  std::fill(sk_scale.begin(), sk_scale.end(), 0.0f);
  std::fill(sk_c2.begin(), sk_c2.end(), 0.0f);
  std::fill(sk_norm.begin(), sk_norm.end(), 0.0f);
  std::fill(sk_err.begin(), sk_err.end(), 0.0f);
}

void Ring::write_q(int head, int slot, const float* x) {
  store_floats(q_dtype, x, q_at(head, slot), head_dim);
  float stored[kMaxHeadDim];  // the values the scan reads
  load_floats(q_dtype, q_at(head, slot), stored, head_dim);
  const std::size_t i = index(head, slot);
  const prune::Sketch s =
      prune::quantize(stored, head_dim, codes.data() + i * static_cast<std::size_t>(head_dim / 2));
  sk_scale[i] = s.scale;
  sk_c2[i] = s.c2;
  sk_norm[i] = s.norm;
  sk_err[i] = s.err;
}

void store_floats(DType t, const float* src, std::byte* dst, int n) {
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::f16:
      for (int i = 0; i < n; ++i) reinterpret_cast<f16_t*>(dst)[i] = float_to_f16(src[i]);
      return;
    case DType::bf16:
      for (int i = 0; i < n; ++i) reinterpret_cast<bf16_t*>(dst)[i] = float_to_bf16(src[i]);
      return;
  }
}

void load_floats(DType t, const std::byte* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = load_as_float(t, src, static_cast<std::size_t>(i));
}

}  // namespace mactune::cpu
