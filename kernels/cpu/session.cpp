// cpu::Session: options, requests, synthetic prefill, read-back, and the instance registry.
// The decode step itself is in session_step.cpp.
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "kernels/cpu/session_impl.h"
#include "kernels/forced.h"

namespace mactune::cpu {

KernelSet kernel_set(Isa isa, int head_dim, DType kv_dtype) {
  MACTUNE_REQUIRE(isa_supported(isa), "isa = '", isa_name(isa), "' is not supported here (",
                  isa_unsupported_reason(isa), ")");
  KernelSet k;
  switch (isa) {
    case Isa::generic:
      k = generic::kernel_set(head_dim, kv_dtype);
      break;
    case Isa::avx2:
      k = avx2::kernel_set(head_dim, kv_dtype);
      break;
    case Isa::avx512:
      k = avx512::kernel_set(head_dim, kv_dtype);
      break;
  }
  MACTUNE_REQUIRE(k.attend && k.dist2, "head_dim = ", head_dim,
                  " is not supported by the CPU engine (64, 128 or 256)");
  return k;
}

std::string validate(const SessionOptions& opt) {
  const Problem& p = opt.shape;
  std::string why = validate(p);
  if (!why.empty()) return why;
  std::ostringstream e;
  if (const std::string shape = shape_error(p); !shape.empty())
    e << shape;  // the instances' own check (instances.h)
  else if (opt.max_context < 1 || opt.max_context > kMaxContext)
    e << "max_context = " << opt.max_context << " must be in [1, " << kMaxContext << "]";
  else if (const std::string knob = range_error(opt.engine); !knob.empty())
    e << knob;  // the engine table's ranges (engine_config.h)
  else if (!(opt.rope_theta > 0.0) || !std::isfinite(opt.rope_theta))
    e << "rope_theta = " << opt.rope_theta << " must be positive";
  else if (opt.forced.enabled && !(opt.forced.hit_rate >= 0.0 && opt.forced.hit_rate <= 1.0))
    e << "forced hit_rate = " << opt.forced.hit_rate << " must be in [0, 1]";
  else if (opt.forced.enabled &&
           !(std::isfinite(opt.forced.lag.a) && std::isfinite(opt.forced.lag.b)))
    e << "forced lag parameters (" << opt.forced.lag.a << ", " << opt.forced.lag.b
      << ") must be finite";
  if (!e.str().empty()) return e.str();
  try {
    check_worker_threads(opt.engine.threads);  // the machine's bound, beside the table's
  } catch (const InputError& err) {
    return err.what();
  }
  if (opt.mac_enabled) {
    why = validate(opt.mac);
    if (!why.empty()) return why;
  }
  try {
    resolve_isa(opt.engine.isa);
  } catch (const InputError& err) {
    return err.what();
  }
  return "";
}

Session::Impl::Impl(const SessionOptions& o)
    : opt(o),
      shape(o.shape),
      mac(o.mac),
      Hq(o.shape.q_heads),
      Hkv(o.shape.kv_heads),
      G(o.shape.group_size()),
      D(o.shape.head_dim),
      q_scale(static_cast<float>(o.shape.scale() * 1.4426950408889634)),
      kv(o.shape.kv_heads, o.shape.head_dim, o.shape.kv_dtype, o.shape.page_size),
      slots(static_cast<std::size_t>(o.shape.batch)) {
  for (int i = 0; i < D / 2; ++i) inv_freq.push_back(std::pow(opt.rope_theta, -2.0 * i / D));
  rope.cos.resize(inv_freq.size());
  rope.sin.resize(inv_freq.size());
  configure_engine();
}

void Session::Impl::configure_engine() {
  isa = resolve_isa(opt.engine.isa);
  kernels = kernel_set(isa, D, shape.kv_dtype);
  name = cpu::instance_name(opt.mac_enabled, isa_name(isa), D, shape.kv_dtype);
  const int want = opt.engine.threads > 0 ? opt.engine.threads
                                          : static_cast<int>(std::thread::hardware_concurrency());
  if (!pool || pool->size() != std::max(want, 1)) {
    pool.reset();  // joins the old workers first
    try {
      pool.emplace(opt.engine.threads);
    } catch (...) {
      pool.emplace(1);  // the caller alone (starts no thread): the session stays usable
      throw;
    }
  }
  const auto T = static_cast<std::size_t>(pool->size());
  d2.resize(T * static_cast<std::size_t>(mac.ring_capacity));
  pruned = opt.engine.match_mode == MatchMode::pruned;
  if (pruned) {
    dots.resize(T * static_cast<std::size_t>(mac.ring_capacity));
    keeps.resize(T * static_cast<std::size_t>(mac.ring_capacity));
    q_codes.resize(T * static_cast<std::size_t>(D));
    q_perm.resize(T * static_cast<std::size_t>(D));
  }
  candidates.resize(T);
  pick_slot.resize(T);
  rows_read.assign(T, 0);
  qn.resize(T * static_cast<std::size_t>(D));
  merge_tmp.resize(T * 2 * static_cast<std::size_t>(D));
  guard_fires.assign(T, 0);
}

Session::Impl::Request& Session::Impl::request(int id) {
  MACTUNE_REQUIRE(id >= 0 && id < static_cast<int>(slots.size()) && slots[std::size_t(id)].active,
                  "request ", id, " is not active in this session");
  return slots[static_cast<std::size_t>(id)];
}

const Session::Impl::Request& Session::Impl::request(int id) const {
  MACTUNE_REQUIRE(id >= 0 && id < static_cast<int>(slots.size()) && slots[std::size_t(id)].active,
                  "request ", id, " is not active in this session");
  return slots[static_cast<std::size_t>(id)];
}

static const SessionOptions& checked(const SessionOptions& opt) {
  const std::string why = validate(opt);
  MACTUNE_REQUIRE(why.empty(), "invalid CPU session options: ", why);
  return opt;
}

Session::Session(const SessionOptions& opt) : impl_(std::make_unique<Impl>(checked(opt))) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

int Session::add_request() {
  Impl& s = *impl_;
  for (std::size_t i = 0; i < s.slots.size(); ++i) {
    Impl::Request& r = s.slots[i];
    if (r.active) continue;
    r.active = true;
    r.len = 0;
    if (s.opt.mac_enabled) {
      if (r.ring.capacity == 0)
        r.ring.allocate(s.Hq, s.mac.ring_capacity, s.D, s.shape.kv_dtype, s.mac.summary_dtype);
      else
        r.ring.clear();
    }
    return static_cast<int>(i);
  }
  input_error("all ", s.slots.size(), " request slots (shape.batch) are taken");
}

void Session::release_request(int id) {
  Impl::Request& r = impl_->request(id);
  impl_->kv.release(r.pages);
  r.active = false;
  r.len = 0;
}

int Session::length(int id) const {
  return impl_->request(id).len;
}

const Session::Result& Session::step(std::span<const int> requests, std::span<const float> q,
                                     std::span<const float> k, std::span<const float> v,
                                     bool advance) {
  Impl& s = *impl_;
  s.result.out.resize(requests.size() * static_cast<std::size_t>(s.Hq * s.D));
  s.step(requests, q, k, v, s.result.out.data(), advance);
  return s.result;
}

const Session::Result& Session::step_into(std::span<const int> requests, std::span<const float> q,
                                          std::span<const float> k, std::span<const float> v,
                                          std::span<float> out, bool advance) {
  Impl& s = *impl_;
  const std::size_t want = requests.size() * static_cast<std::size_t>(s.Hq * s.D);
  MACTUNE_REQUIRE(out.size() == want, "output buffer holds ", out.size(), " floats, expected n x ",
                  "q_heads x head_dim = ", want);
  s.result.out.clear();
  s.step(requests, q, k, v, out.data(), advance);
  return s.result;
}

namespace {

// Random storage values for synthetic prefill: magnitude in [1/16, 1), random sign, never 0.
struct Noise {
  std::uint64_t state;
  float next() {
    state = detail::splitmix64(state);
    const float u = static_cast<float>(state >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float mag = 0.0625f + 0.9375f * u;
    return (state >> 39) & 1 ? mag : -mag;
  }
};

}  // namespace

void Session::prefill_synthetic(int id, int len, std::uint64_t seed) {
  Impl& s = *impl_;
  Impl::Request& r = s.request(id);
  MACTUNE_REQUIRE(len >= 0 && len <= s.opt.max_context, "prefill length ", len,
                  " is outside [0, max_context = ", s.opt.max_context, "]");
  s.kv.reserve(r.pages, len);
  const int P = s.shape.page_size, pages = (len + P - 1) / P;
  // Tasks of whole pages (at most 4096 tasks); each page's values depend only on (seed, page).
  const int per_task = std::max(1, (pages + 4095) / 4096);
  s.pool->run((pages + per_task - 1) / per_task, [&](int task, int) {
    std::vector<float> k(static_cast<std::size_t>(s.D)), v(k.size());
    for (int page = task * per_task; page < std::min(pages, (task + 1) * per_task); ++page) {
      Noise rng{detail::splitmix64(seed ^ (0x9e37ull * static_cast<std::uint64_t>(page + 1)))};
      const int rows = std::min(P, len - page * P);
      for (int g = 0; g < s.Hkv; ++g)
        for (int j = page * P; j < page * P + rows; ++j) {
          for (float& x : k) x = rng.next();
          for (float& x : v) x = rng.next();
          s.kv.write(r.pages, g, j, k.data(), v.data());
        }
    }
  });
  if (s.opt.mac_enabled) {
    Ring& ring = r.ring;
    ring.clear();
    Noise rng{detail::splitmix64(seed ^ 0x72696e67ull)};
    std::vector<float> x(static_cast<std::size_t>(s.D));
    for (int p = std::max(0, len - ring.capacity); p < len; ++p) {
      const int slot = ring_slot(p, ring.capacity), ce = cache_end(p, s.mac.band);
      for (int h = 0; h < s.Hq; ++h) {
        ring.pos[ring.index(h, slot)] = p;
        for (float& e : x) e = rng.next();
        ring.write_q(h, slot, x.data());
        for (float& e : x) e = ce > 0 ? rng.next() : 0.0f;
        store_floats(s.mac.summary_dtype, x.data(), ring.o_at(h, slot), s.D);
        ring.lse[ring.index(h, slot)] = ce > 0
                                            ? std::log(static_cast<float>(ce)) + 0.25f * rng.next()
                                            : -std::numeric_limits<float>::infinity();
      }
    }
  }
  r.len = len;
}

void Session::set_forced(const ForcedHits& forced) {
  SessionOptions next = impl_->opt;
  next.forced = forced;
  checked(next);
  impl_->opt.forced = forced;
}

void Session::set_engine(const EngineConfig& engine) {
  SessionOptions next = impl_->opt;
  next.engine = engine;
  checked(next);
  impl_->opt.engine = engine;
  impl_->configure_engine();
}

std::string Session::instance_name() const {
  const Impl& s = *impl_;
  return s.name;
}

const SessionOptions& Session::options() const {
  return impl_->opt;
}

std::string Session::isa() const {
  return std::string(isa_name(impl_->isa));
}

int Session::threads() const {
  return impl_->pool->size();
}

RingEntryView Session::ring_entry(int id, int head, int pos) const {
  const Impl& s = *impl_;
  const Impl::Request& r = s.request(id);
  MACTUNE_REQUIRE(s.opt.mac_enabled, "a full-attention session has no ring");
  MACTUNE_REQUIRE(head >= 0 && head < s.Hq && pos >= 0, "ring entry (head ", head, ", pos ", pos,
                  ") is out of range");
  const int slot = ring_slot(pos, r.ring.capacity);
  RingEntryView e;
  e.pos = r.ring.pos[r.ring.index(head, slot)];
  e.q.resize(static_cast<std::size_t>(s.D));
  e.o.resize(static_cast<std::size_t>(s.D));
  load_floats(s.shape.kv_dtype, r.ring.q_at(head, slot), e.q.data(), s.D);
  load_floats(s.mac.summary_dtype, r.ring.o_at(head, slot), e.o.data(), s.D);
  e.lse = r.ring.lse[r.ring.index(head, slot)];
  return e;
}

void Session::read_kv(int id, int kv_head, int pos, std::span<float> k, std::span<float> v) const {
  const Impl& s = *impl_;
  const Impl::Request& r = s.request(id);
  MACTUNE_REQUIRE(kv_head >= 0 && kv_head < s.Hkv && pos >= 0 && pos < r.len, "KV row (kv_head ",
                  kv_head, ", pos ", pos, ") is out of range (length ", r.len, ")");
  MACTUNE_REQUIRE(k.size() == std::size_t(s.D) && v.size() == std::size_t(s.D),
                  "read_kv needs buffers of head_dim floats");
  s.kv.read(r.pages, kv_head, pos, k.data(), v.data());
}

}  // namespace mactune::cpu
