// mactune::cuda::Session: construction, device memory, requests, synthetic prefill, readback.
// The step itself is in session_step.cpp.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "kernels/cuda/detail/session_impl.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"
#include "kernels/error.h"

namespace mactune::cuda {
namespace detail {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  MACTUNE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  MACTUNE_CUDA_CHECK(cudaMemset(ptr_, 0, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) MACTUNE_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
}
PinnedBuffer::~PinnedBuffer() {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

namespace {
std::size_t align256(std::size_t x) {
  return (x + 255) & ~std::size_t{255};
}
}  // namespace

InLayout in_layout(int n, int q_heads, int kv_heads, int head_dim) {
  InLayout l;
  l.header = 0;
  l.rows = align256(sizeof(StepHeader));
  l.q = align256(l.rows + sizeof(StepRow) * n);
  l.k = align256(l.q + sizeof(float) * n * q_heads * head_dim);
  l.v = align256(l.k + sizeof(float) * n * kv_heads * head_dim);
  l.bytes = l.v + sizeof(float) * n * kv_heads * head_dim;
  return l;
}

OutLayout out_layout(int n, int q_heads, int head_dim) {
  OutLayout l;
  l.out = 0;
  l.decisions = align256(sizeof(float) * n * q_heads * head_dim);
  l.guard = align256(l.decisions + sizeof(HeadDecision) * n * q_heads);
  l.scalars = align256(l.guard + sizeof(std::int32_t) * n * q_heads);
  l.bytes = l.scalars + sizeof(StepScalars);
  return l;
}

}  // namespace detail

Session::Impl::Impl(const SessionOptions& o) : opt(o) {
  const GpuStatus& gpu = gpu_status();
  if (!gpu.usable) throw Error("CUDA session: " + gpu.why_not);
  const Problem& s = opt.shape;
  require_valid(s);
  require_valid(opt.mac);
  MACTUNE_REQUIRE(s.kv_dtype == DType::bf16 || s.kv_dtype == DType::f16, "CUDA session: KV dtype ",
                  dtype_name(s.kv_dtype), " is not supported on the GPU (bf16 or f16)");
  MACTUNE_REQUIRE(opt.max_context >= 1 && opt.max_context <= kMaxContext,
                  "max_context = ", opt.max_context, " must be in [1, 2^30]");
  MACTUNE_REQUIRE(!opt.mac_enabled || opt.mac.accept_eps >= 1.0,
                  "CUDA session: the acceptance gate (accept_eps = ", opt.mac.accept_eps,
                  " < 1) is not implemented on the GPU; use the CPU engine or accept_eps = 1");
  MACTUNE_REQUIRE(opt.engine.device >= 0 && opt.engine.device < gpu.count, "CUDA device ",
                  opt.engine.device, " does not exist (", gpu.count, " devices)");
  MACTUNE_CUDA_CHECK(cudaSetDevice(opt.engine.device));
  slots = s.batch;
  q_heads = s.q_heads;
  kv_heads = s.kv_heads;
  head_dim = s.head_dim;
  group = s.group_size();
  MACTUNE_CUDA_CHECK(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, opt.engine.device));

  // Paged KV pools [pages, kv_heads, page_size, D]; the page table scatters each request's
  // pages over the pool (a fixed permutation), so every run exercises the indirection, unless
  // the harness asks for the identity table (request-major, each request's pages in order).
  const std::size_t elem = dtype_size(s.kv_dtype);
  pages_per_request = (opt.max_context + s.page_size - 1) / s.page_size;
  const std::size_t pages = static_cast<std::size_t>(slots) * pages_per_request;
  const std::size_t page_elems = static_cast<std::size_t>(kv_heads) * s.page_size * head_dim;
  k_pool = detail::DeviceBuffer(pages * page_elems * elem);
  v_pool = detail::DeviceBuffer(pages * page_elems * elem);
  MACTUNE_REQUIRE(pages <= static_cast<std::size_t>(INT32_MAX), "KV pool of ", pages,
                  " pages exceeds int32 page ids");
  std::vector<std::int32_t> table(pages);
  std::iota(table.begin(), table.end(), 0);
  if (!opt.engine.identity_pages)
    std::shuffle(table.begin(), table.end(), std::mt19937_64(0x70616765ull));
  page_table = detail::DeviceBuffer(pages * sizeof(std::int32_t));
  MACTUNE_CUDA_CHECK(cudaMemcpy(page_table.get(), table.data(), pages * sizeof(std::int32_t),
                                cudaMemcpyHostToDevice));

  const std::size_t heads = static_cast<std::size_t>(slots) * q_heads;
  const std::size_t K = static_cast<std::size_t>(opt.mac.ring_capacity);
  if (mac()) {
    ring_q = detail::DeviceBuffer(heads * K * head_dim * elem);
    ring_o = detail::DeviceBuffer(heads * K * head_dim * dtype_size(opt.mac.summary_dtype));
    ring_lse = detail::DeviceBuffer(heads * K * sizeof(float));
    ring_pos = detail::DeviceBuffer(static_cast<std::size_t>(slots) * K * sizeof(std::int32_t));
    MACTUNE_CUDA_CHECK(cudaMemset(ring_pos.get(), 0xff, ring_pos.bytes()));  // pos = -1
    match_best = detail::DeviceBuffer(heads * sizeof(MatchPartial));
    counters = detail::DeviceBuffer(heads * sizeof(std::uint32_t));
  }
  q_ring = detail::DeviceBuffer(heads * head_dim * elem);
  q_rot = detail::DeviceBuffer(heads * head_dim * sizeof(float));
  const std::size_t groups = static_cast<std::size_t>(slots) * kv_heads;
  spans = detail::DeviceBuffer(groups * sizeof(GroupSpan));
  merge_plan = detail::DeviceBuffer(groups * sizeof(GroupItems));
  work_counter = detail::DeviceBuffer(sizeof(std::uint32_t));
  const std::size_t in_bytes = detail::in_layout(slots, q_heads, kv_heads, head_dim).bytes;
  const std::size_t out_bytes = detail::out_layout(slots, q_heads, head_dim).bytes;
  in_block = detail::DeviceBuffer(in_bytes);
  out_block = detail::DeviceBuffer(out_bytes);
  in_host = detail::PinnedBuffer(in_bytes);
  out_host = detail::PinnedBuffer(out_bytes);

  MACTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MACTUNE_CUDA_CHECK(cudaEventCreate(&ev_start));
  MACTUNE_CUDA_CHECK(cudaEventCreate(&ev_stop));
  MACTUNE_CUDA_CHECK(cudaEventCreateWithFlags(&ev_producer, cudaEventDisableTiming));
  ev_phase.resize(5, nullptr);
  for (cudaEvent_t& ev : ev_phase) MACTUNE_CUDA_CHECK(cudaEventCreate(&ev));
  lengths.assign(static_cast<std::size_t>(slots), 0);
  used.assign(static_cast<std::size_t>(slots), 0);
  configure(opt.engine);
  MACTUNE_CUDA_CHECK(cudaDeviceSynchronize());
}

// Everything that depends on the engine config: instances, the CTA budget and the buffers
// sized by it. The KV pools, rings and positions stay.
void Session::Impl::configure(const EngineConfig& e) {
  if (const std::string why = range_error(e); !why.empty())  // engine_config.h's table
    input_error("engine ", why);
  MACTUNE_REQUIRE(e.device == opt.engine.device, "engine device ", e.device,
                  " differs from the session's ", opt.engine.device);
  const Problem& s = opt.shape;
  const MergeInstance* new_merge = &select_instance(merge_instances(), s, e.merge);
  const AttendInstance* new_attend =
      mac() ? &select_instance(attend_instances(), s, e.attend) : nullptr;
  const MatchInstance* new_match =
      mac() ? &select_instance(match_instances(), s, e.match) : nullptr;
  const FullInstance* new_full = mac() ? nullptr : &select_instance(full_instances(), s, e.full);
  const std::size_t smem = mac() ? attend_smem_bytes(new_attend->config)
                                 : attend_smem_bytes(as_attend(new_full->config));
  int smem_optin = 0;
  MACTUNE_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, e.device));
  MACTUNE_REQUIRE(smem <= static_cast<std::size_t>(smem_optin), "CUDA instance ",
                  mac() ? new_attend->name : new_full->name, " needs ", smem,
                  " bytes of shared memory; this device allows ", smem_optin);
  int ctas = e.ctas_per_sm;
  if (ctas == 0) {
    MACTUNE_CUDA_CHECK(mac() ? new_attend->ctas_per_sm(ctas) : new_full->ctas_per_sm(ctas));
    MACTUNE_CHECK(ctas >= 1, "occupancy query gave ", ctas, " CTAs per SM");
  }
  // The pruned match reads the ring's sketch; `normalized` compares unit vectors, which the
  // sketch does not bound, so it scans.
  const bool new_pruned =
      mac() && e.match_mode == MatchMode::pruned && opt.mac.pick != PickRule::normalized;
  if (new_pruned && opt.mac.ring_capacity > kPrunedMaxCapacity)
    input_error("engine match_mode = pruned holds rings of at most ", kPrunedMaxCapacity,
                " entries; ring_capacity is ", opt.mac.ring_capacity);
  merge = new_merge;
  attend = new_attend;
  match = new_match;
  full = new_full;
  ctas_per_sm = ctas;
  budget = attend_budget(ctas_per_sm, sms);
  capacity = attend_capacity(slots * kv_heads, budget, e.min_chunk);
  const std::size_t heads = static_cast<std::size_t>(slots) * q_heads;
  if (mac()) {
    const int pass = match_rows_per_pass(match->config);
    const int min_candidates = e.match_candidates > 0 ? std::min(e.match_candidates, pass) : pass;
    max_match_tiles = match_tiles(opt.mac.ring_capacity, min_candidates);
    match_partials = detail::DeviceBuffer(heads * max_match_tiles * sizeof(MatchPartial));
    MACTUNE_CUDA_CHECK(match->ctas_per_sm(match_ctas_per_sm));
  }
  items = detail::DeviceBuffer(static_cast<std::size_t>(capacity) * sizeof(WorkItem));
  dispatch = detail::DeviceBuffer(static_cast<std::size_t>(capacity) * sizeof(DispatchEntry));
  partial_o = detail::DeviceBuffer(partial_o_bytes(capacity, group, head_dim));
  partial_lse = detail::DeviceBuffer(partial_lse_bytes(capacity, group));
  if (new_pruned && !pruned) {  // the scan kept no sketch: build it from the ring as it is
    const std::size_t entries = heads * static_cast<std::size_t>(opt.mac.ring_capacity);
    if (sk_codes.bytes() == 0) {
      sk_codes = detail::DeviceBuffer(entries * static_cast<std::size_t>(head_dim / 2));
      sk_scale = detail::DeviceBuffer(entries * sizeof(float));
      sk_c2 = detail::DeviceBuffer(entries * sizeof(float));
      sk_err = detail::DeviceBuffer(entries * sizeof(float));
    }
    pruned = true;
    MACTUNE_CUDA_CHECK(cudaDeviceSynchronize());  // the ring's fills, on the legacy stream
    for (int id = 0; id < slots; ++id)
      if (used[static_cast<std::size_t>(id)] && lengths[static_cast<std::size_t>(id)] > 0)
        sketch(nullptr, 0, id, 1);
  }
  pruned = new_pruned;
  for (auto& [n, exec] : graphs) cudaGraphExecDestroy(exec);  // they hold the old pointers
  graphs.clear();
  opt.engine = e;
}

// The sketch kernel over the ring: the step's rows, or (rows null) `count` slots from `slot`.
void Session::Impl::sketch(const StepRow* rows, int n, int slot, int count) {
  SketchParams p;
  p.ring_q = ring_q.get();
  p.codes = sk_codes.get<std::uint8_t>();
  p.scale = sk_scale.get<float>();
  p.c2 = sk_c2.get<float>();
  p.err = sk_err.get<float>();
  p.rows = rows;
  p.n = n;
  p.slot = slot;
  p.slots = count;
  p.q_heads = q_heads;
  p.capacity = opt.mac.ring_capacity;
  p.head_dim = head_dim;
  p.kv_dtype = opt.shape.kv_dtype;
  MACTUNE_CUDA_CHECK(launch_sketch(p, stream));
}

Session::Impl::~Impl() {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  for (auto& [n, exec] : graphs) cudaGraphExecDestroy(exec);
  for (cudaEvent_t ev : ev_phase)
    if (ev != nullptr) cudaEventDestroy(ev);
  if (ev_start != nullptr) cudaEventDestroy(ev_start);
  if (ev_stop != nullptr) cudaEventDestroy(ev_stop);
  if (ev_producer != nullptr) cudaEventDestroy(ev_producer);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void Session::Impl::check_id(int id) const {
  MACTUNE_REQUIRE(id >= 0 && id < slots && used[static_cast<std::size_t>(id)], "unknown request ",
                  id);
}

KvCache Session::Impl::kv_cache() const {
  KvCache kv;
  kv.k = k_pool.get();
  kv.v = v_pool.get();
  kv.stride_token = head_dim;
  kv.stride_head = static_cast<long long>(opt.shape.page_size) * head_dim;
  kv.stride_page = static_cast<long long>(kv_heads) * kv.stride_head;
  kv.page_table = page_table.get<std::int32_t>();
  kv.pages_per_request = pages_per_request;
  kv.page_size = opt.shape.page_size;
  return kv;
}

RingBuffers Session::Impl::ring() const {
  RingBuffers r;
  r.q = ring_q.get();
  r.o = ring_o.get();
  r.lse = ring_lse.get<float>();
  r.pos = ring_pos.get<std::int32_t>();
  r.capacity = opt.mac.ring_capacity;
  r.summary_dtype = opt.mac.summary_dtype;
  return r;
}

Session::Session(const SessionOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

int Session::add_request() {
  Impl& s = *impl_;
  const auto it = std::find(s.used.begin(), s.used.end(), 0);
  MACTUNE_REQUIRE(it != s.used.end(), "all ", s.slots, " request slots are taken (shape.batch)");
  const int id = static_cast<int>(it - s.used.begin());
  *it = 1;
  s.lengths[static_cast<std::size_t>(id)] = 0;
  if (s.mac()) {  // a stale entry must never look valid: pos == p is the validity test
    const std::size_t K = static_cast<std::size_t>(s.opt.mac.ring_capacity);
    MACTUNE_CUDA_CHECK(cudaMemsetAsync(s.ring_pos.get<std::int32_t>() + id * K, 0xff,
                                       K * sizeof(std::int32_t), s.stream));
  }
  return id;
}

void Session::release_request(int id) {
  impl_->check_id(id);
  MACTUNE_REQUIRE(!impl_->pending.active, "release_request during an unfinished step");
  impl_->used[static_cast<std::size_t>(id)] = 0;
}

int Session::length(int id) const {
  impl_->check_id(id);
  return impl_->lengths[static_cast<std::size_t>(id)];
}

void Session::prefill_synthetic(int id, int len, std::uint64_t seed) {
  Impl& s = *impl_;
  s.check_id(id);
  MACTUNE_REQUIRE(len >= 0 && len < s.opt.max_context, "prefill length ", len,
                  " must be in [0, max_context = ", s.opt.max_context, ")");
  MACTUNE_REQUIRE(!s.pending.active, "prefill_synthetic during an unfinished step");
  SyntheticParams p;
  p.kv = s.kv_cache();
  if (s.mac()) p.ring = s.ring();
  p.slot = id;
  p.len = len;
  p.q_heads = s.q_heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.head_dim;
  p.band = s.opt.mac.band;
  p.kv_dtype = s.opt.shape.kv_dtype;
  p.seed = seed;
  MACTUNE_CUDA_CHECK(launch_synthetic(p, s.stream));
  if (s.pruned) s.sketch(nullptr, 0, id, 1);
  s.lengths[static_cast<std::size_t>(id)] = len;
}

void Session::set_engine(const EngineConfig& engine) {
  MACTUNE_REQUIRE(!impl_->pending.active, "set_engine during an unfinished step");
  MACTUNE_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  impl_->configure(engine);
  MACTUNE_CUDA_CHECK(cudaDeviceSynchronize());  // the new buffers' zero fill
}

void Session::set_forced(const ForcedHits& forced) {
  impl_->opt.forced = forced;
  for (auto& [n, exec] : impl_->graphs) cudaGraphExecDestroy(exec);  // params are baked in
  impl_->graphs.clear();
}

std::string Session::instance_name() const {
  return impl_->mac() ? impl_->attend->name : impl_->full->name;
}

std::vector<std::string> Session::instance_names() const {
  if (impl_->mac()) return {impl_->match->name, impl_->attend->name, impl_->merge->name};
  return {impl_->full->name, impl_->merge->name};
}

Session::RingEntry Session::ring_entry(int id, int head, int pos) const {
  const Impl& s = *impl_;
  s.check_id(id);
  MACTUNE_REQUIRE(s.mac(), "ring_entry: this session has no ring (mac_enabled = false)");
  MACTUNE_REQUIRE(head >= 0 && head < s.q_heads && pos >= 0, "ring_entry: bad head or position");
  MACTUNE_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  const std::size_t K = static_cast<std::size_t>(s.opt.mac.ring_capacity);
  const std::size_t sl = static_cast<std::size_t>(pos) % K;
  const std::size_t at = (static_cast<std::size_t>(id) * s.q_heads + head) * K + sl;
  const std::size_t D = static_cast<std::size_t>(s.head_dim);
  RingEntry e;
  MACTUNE_CUDA_CHECK(cudaMemcpy(&e.pos, s.ring_pos.get<std::int32_t>() + id * K + sl,
                                sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  MACTUNE_CUDA_CHECK(
      cudaMemcpy(&e.lse, s.ring_lse.get<float>() + at, sizeof(float), cudaMemcpyDeviceToHost));
  const DType kv = s.opt.shape.kv_dtype, so = s.opt.mac.summary_dtype;
  std::vector<unsigned char> q(D * dtype_size(kv)), o(D * dtype_size(so));
  MACTUNE_CUDA_CHECK(cudaMemcpy(q.data(), s.ring_q.get<unsigned char>() + at * D * dtype_size(kv),
                                q.size(), cudaMemcpyDeviceToHost));
  MACTUNE_CUDA_CHECK(cudaMemcpy(o.data(), s.ring_o.get<unsigned char>() + at * D * dtype_size(so),
                                o.size(), cudaMemcpyDeviceToHost));
  e.q.resize(D);
  e.o.resize(D);
  for (std::size_t i = 0; i < D; ++i) {
    e.q[i] = load_as_float(kv, q.data(), i);
    e.o[i] = load_as_float(so, o.data(), i);
  }
  return e;
}

const SessionOptions& Session::options() const {
  return impl_->opt;
}

PlanChoice Session::last_plan() const {
  return impl_->plan_last;
}
int Session::last_items() const {
  return impl_->items_last;
}
int Session::last_chunk() const {
  return impl_->chunk_last;
}
int Session::plan_budget() const {
  return impl_->budget;
}
double Session::last_step_ms() const {
  return impl_->step_ms;
}
std::vector<std::pair<Phase, double>> Session::last_phase_ms() const {
  return impl_->phase_ms;
}

}  // namespace mactune::cuda
