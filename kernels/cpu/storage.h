// Storage of the CPU engine: the paged KV cache and the per-request MAC rings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/kernel_api.h"
#include "kernels/dtype.h"

namespace mactune::cpu {

// A pool of KV pages shared by all requests. A page holds `page_size` tokens of every KV head,
// in the KV dtype. Pages live in arenas of N pages laid out head-major,
//   [kv_heads, N, {K, V}, page_size, D],
// so that the pages a request takes one after the other from an arena put each head's rows
// end to end, a page's K rows followed by its V rows: one long stream per head for the
// prefetchers and the TLB. (Measured on the Zen 3 build VM, full attention at 32K-128K ran
// 10-20% faster this way than with separate K and V streams, [K: heads, N, ...][V: ...].)
// When page_size is a multiple of kKTileRows (16), a page's K block is a run of 16-row tiles,
// each column-major ([D, 16]): one vector load reads one dimension of 16 keys, which lets the
// score loop run without horizontal sums (kernel_body.inl). Other page sizes keep K row-major.
// Arenas are 2 MiB-aligned, zeroed, with transparent huge pages requested; pages go back to a
// free list when a request is released.
class PagedKv {
 public:
  PagedKv(int kv_heads, int head_dim, DType dtype, int page_size);
  ~PagedKv();
  PagedKv(const PagedKv&) = delete;
  PagedKv& operator=(const PagedKv&) = delete;

  // Grows a request's page table to cover `tokens` positions.
  void reserve(std::vector<std::byte*>& table, int tokens);
  // Returns every page of the table to the free list and clears it.
  void release(std::vector<std::byte*>& table);

  // A table entry points at the page's K rows of head 0. The view of one KV head of a
  // request (the table must outlive the view's use).
  KvView view(const std::vector<std::byte*>& table, int kv_head) const;
  // Stores / reads the key and value of position j of KV head g (head_dim floats each, stored
  // in the KV dtype with round to nearest even); the table must cover j.
  void write(const std::vector<std::byte*>& table, int kv_head, int j, const float* k,
             const float* v) const;
  void read(const std::vector<std::byte*>& table, int kv_head, int j, float* k, float* v) const;
  int page_size() const { return page_size_; }
  int k_tile() const { return k_tile_; }

 private:
  struct ArenaFree {
    std::size_t bytes = 0;
    DType dtype = DType::f32;
    void operator()(std::byte* p) const;
  };
  // The K and V bytes of row j of KV head g: the row itself, or for a tiled K its tile.
  std::byte* k_block(const std::vector<std::byte*>& table, int kv_head, int j) const {
    const int in_page = j % page_size_;
    return table[static_cast<std::size_t>(j / page_size_)] +
           static_cast<std::size_t>(kv_head) * head_stride_ +
           static_cast<std::size_t>(in_page - in_page % k_tile_) * row_bytes_;
  }
  std::byte* v_row(const std::vector<std::byte*>& table, int kv_head, int j) const {
    return table[static_cast<std::size_t>(j / page_size_)] +
           static_cast<std::size_t>(kv_head) * head_stride_ + v_offset_ +
           static_cast<std::size_t>(j % page_size_) * row_bytes_;
  }

  int page_size_;
  int k_tile_;  // 1: K row-major; kKTileRows: K in column-major tiles
  int head_dim_;
  DType dtype_;
  std::size_t row_bytes_;        // D * sizeof(kv)
  std::size_t pages_per_arena_;  // N
  std::size_t head_stride_;      // N * 2 * page_size * row_bytes: from one head's pages to the next
  std::size_t v_offset_;         // page_size * row_bytes: from a page's K rows to its V rows
  std::size_t arena_bytes_;      // kv_heads * head_stride
  std::vector<std::unique_ptr<std::byte[], ArenaFree>> arenas_;
  std::vector<std::byte*> free_;
};

// The MAC ring of one request: for each query head, K slots of (pos, q in the KV dtype,
// summary o in the summary dtype, lse f32), and the pruned match's sketch of each slot's q
// (prune.h: 4-bit codes, scale, sum of squared codes, norm and error bounds), written with the q by
// write_q() so that it is current whichever match the engine runs. Slot of position t is
// t mod K.
struct Ring {
  int q_heads = 0, capacity = 0, head_dim = 0;
  DType q_dtype = DType::f32;
  std::size_t q_bytes = 0, o_bytes = 0;                 // per slot
  std::vector<std::int32_t> pos;                        // [Hq, K]; -1 = empty
  std::vector<float> lse;                               // [Hq, K]
  std::vector<std::byte> q;                             // [Hq, K, D] KV dtype
  std::vector<std::byte> o;                             // [Hq, K, D] summary dtype
  std::vector<std::uint8_t> codes;                      // [Hq, K, D/2] 4-bit copy of q
  std::vector<float> sk_scale, sk_c2, sk_norm, sk_err;  // [Hq, K] (prune::Sketch)

  void allocate(int heads, int slots, int dim, DType qt, DType o_dtype);  // qt: ring q dtype
  void clear();  // every slot empty; q zero so the match scan reads finite values
  // Stores q (head_dim floats, rounded to the KV dtype) in the slot, and its sketch.
  void write_q(int head, int slot, const float* q);
  const std::uint8_t* codes_at(int head, int slot) const {
    return codes.data() + index(head, slot) * static_cast<std::size_t>(head_dim / 2);
  }
  std::size_t index(int head, int slot) const {
    return static_cast<std::size_t>(head) * capacity + slot;
  }
  std::byte* q_at(int head, int slot) { return q.data() + index(head, slot) * q_bytes; }
  const std::byte* q_at(int head, int slot) const { return q.data() + index(head, slot) * q_bytes; }
  std::byte* o_at(int head, int slot) { return o.data() + index(head, slot) * o_bytes; }
  const std::byte* o_at(int head, int slot) const { return o.data() + index(head, slot) * o_bytes; }
};

// Stores n floats as dtype t (round to nearest even) / reads them back.
void store_floats(DType t, const float* src, std::byte* dst, int n);
void load_floats(DType t, const std::byte* src, float* dst, int n);

}  // namespace mactune::cpu
