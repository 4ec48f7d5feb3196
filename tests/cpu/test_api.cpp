// cpu::Session as an API: refused shapes and inputs (messages name the value), request slots,
// advance = false, synthetic prefill, read-back, instance names, phase hooks; the byte layout
// of KV pages, which the kernels read directly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/storage.h"
#include "kernels/device.h"
#include "tests/cpu/harness.h"

namespace mactune::cpu::test {
namespace {

SessionOptions base() {
  SessionOptions o;
  o.shape.batch = 2;
  o.shape.q_heads = 8;
  o.shape.kv_heads = 2;
  o.shape.head_dim = 64;
  o.shape.kv_dtype = DType::bf16;
  o.mac.ring_capacity = 16;
  o.mac.band = 4;
  o.mac.min_context = 8;
  o.engine.threads = 2;
  o.max_context = 64;
  return o;
}

// Expects construction to throw InputError whose message contains `needle`.
template <class F>
void expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

// Every element lands where kernel_api.h's KvView says: V row-major; K row-major, or with
// pages of a multiple of 16 tokens column-major in 16-row tiles; read() gives back what write()
// stored, rounded to the dtype.
TEST(CpuPagedKv, ElementsSitWhereTheViewSays) {
  for (const DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const int page : {1, 8, 16, 48, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + ", page " + std::to_string(page));
      const int heads = 3, D = 64, len = 150;
      PagedKv kv(heads, D, dt, page);
      EXPECT_EQ(kv.k_tile(), page % kKTileRows == 0 ? kKTileRows : 1);
      std::vector<std::byte*> table;
      kv.reserve(table, len);
      auto value = [](int h, int j, int d, int kv_index) {  // distinct, exactly representable
        return static_cast<float>((h * 7 + j * 3 + d * 5 + kv_index) % 97 - 48) * 0.25f;
      };
      std::vector<float> k(D), v(D);
      for (int h = 0; h < heads; ++h)
        for (int j = 0; j < len; ++j) {
          for (int d = 0; d < D; ++d) k[d] = value(h, j, d, 0), v[d] = value(h, j, d, 1);
          kv.write(table, h, j, k.data(), v.data());
        }
      for (int h = 0; h < heads; ++h) {
        const KvView view = kv.view(table, h);
        for (int j = 0; j < len; ++j) {
          const std::byte* row =
              view.pages[j / page] + view.head_offset + (j % page) * view.row_bytes;
          const std::byte* tile = view.pages[j / page] + view.head_offset +
                                  (j % page) / view.k_tile * view.k_tile * view.row_bytes;
          kv.read(table, h, j, k.data(), v.data());
          for (int d = 0; d < D; ++d) {
            const std::size_t k_at =
                view.k_tile == 1 ? d : static_cast<std::size_t>(d) * view.k_tile + j % view.k_tile;
            ASSERT_EQ(load_as_float(dt, tile, k_at), value(h, j, d, 0)) << "K " << h << " " << j;
            ASSERT_EQ(load_as_float(dt, row + view.v_offset, d), value(h, j, d, 1));
            ASSERT_EQ(k[d], value(h, j, d, 0));
            ASSERT_EQ(v[d], value(h, j, d, 1));
          }
        }
      }
      kv.release(table);
    }
}

// Recycled KV arenas (set_arena_cache_bytes, as the tuner runs): a session on the arenas of an
// earlier, longer one (rows past its length hold the old values) steps exactly as a session on
// fresh memory; arenas of another dtype are never handed out (the cache is emptied instead).
TEST(CpuPagedKv, RecycledArenasStepExactlyAsFreshOnes) {
  SessionOptions o = base();
  o.shape.batch = 1;
  o.shape.page_size = 16;  // tiled K: a block's rows past the length are read, then masked
  o.max_context = 8192;
  o.forced.enabled = true;
  o.forced.hit_rate = 0.5;
  o.forced.lag = {LagKind::uniform, 1, 8};
  Stream in(o.shape, 5);
  in.grow(1);
  auto step_after_prefill = [&](const SessionOptions& opt, int len, std::uint64_t seed) {
    Session s(opt);
    const int id = s.add_request();
    s.prefill_synthetic(id, len, seed);
    const int ids[] = {id};
    return s.step(ids, in.q[0], in.k[0], in.v[0], false).out;
  };
  set_arena_cache_bytes(0);
  const std::vector<float> fresh = step_after_prefill(o, 1003, 7);
  EXPECT_EQ(arena_cache_held_bytes(), 0u) << "off by default: nothing is kept";

  set_arena_cache_bytes(std::size_t{1} << 30);
  step_after_prefill(o, 8000, 99);  // fills the arena with other values, then frees it
  const std::size_t held = arena_cache_held_bytes();
  EXPECT_GT(held, 0u) << "a freed arena is kept";
  EXPECT_EQ(step_after_prefill(o, 1003, 7), fresh) << "on a recycled arena";
  EXPECT_EQ(arena_cache_held_bytes(), held) << "taken, then given back";

  SessionOptions f32 = o;
  f32.shape.kv_dtype = DType::f32;
  {
    Session s(f32);
    s.prefill_synthetic(s.add_request(), 1003, 7);
    EXPECT_EQ(arena_cache_held_bytes(), 0u) << "bf16 arenas are not handed to an f32 pool";
  }
  EXPECT_GT(arena_cache_held_bytes(), 0u);
  set_arena_cache_bytes(0);
  EXPECT_EQ(arena_cache_held_bytes(), 0u) << "a limit of 0 gives everything back";
}

TEST(CpuSessionApi, RefusesBadShapesNamingTheValue) {
  auto with = [](auto edit) {
    SessionOptions o = base();
    edit(o);
    return o;
  };
  const std::map<std::string, SessionOptions> bad = {
      {"kv_heads = 3 does not divide q_heads = 8", with([](auto& o) { o.shape.kv_heads = 3; })},
      {"head_dim = 96", with([](auto& o) { o.shape.head_dim = 96; })},
      {"head_dim = 512", with([](auto& o) { o.shape.head_dim = 512; })},
      {"G = q_heads / kv_heads = 32 / 1 = 32", with([](auto& o) {
         o.shape.q_heads = 32;
         o.shape.kv_heads = 1;
       })},
      {"page_size = 0", with([](auto& o) { o.shape.page_size = 0; })},
      {"block_rows = 0", with([](auto& o) { o.engine.block_rows = 0; })},
      {"block_rows = 129", with([](auto& o) { o.engine.block_rows = 129; })},
      {"chunk_tokens = 0", with([](auto& o) { o.engine.chunk_tokens = 0; })},
      {"threads = -1", with([](auto& o) { o.engine.threads = -1; })},
      {"isa = 'sse9'", with([](auto& o) { o.engine.isa = "sse9"; })},
      {"max_context = 0", with([](auto& o) { o.max_context = 0; })},
      {"K = 0", with([](auto& o) { o.mac.ring_capacity = 0; })},
      {"forced hit_rate = 1.5", with([](auto& o) {
         o.forced.enabled = true;
         o.forced.hit_rate = 1.5;
       })},
  };
  for (const auto& [needle, opt] : bad) {
    SCOPED_TRACE(needle);
    EXPECT_NE(validate(opt).find(needle), std::string::npos) << validate(opt);
    expect_input_error([&] { Session s(opt); }, needle);
  }
  EXPECT_EQ(validate(base()), "");
  if (!isa_supported(Isa::avx512)) {
    SessionOptions o = base();
    o.engine.isa = "avx512";
    expect_input_error([&] { Session s(o); }, "isa = 'avx512' is not supported here");
  }
}

TEST(CpuSessionApi, RefusesBadStepsNamingTheValue) {
  SessionOptions o = base();
  o.max_context = 3;
  Session s(o);
  const int id = s.add_request();
  Stream in(o.shape, 1);
  in.grow(4);
  const int ids[] = {id};
  for (int m = 0; m < 3; ++m)
    s.step(ids, in.q[std::size_t(m)], in.k[std::size_t(m)], in.v[std::size_t(m)]);
  expect_input_error([&] { s.step(ids, in.q[3], in.k[3], in.v[3]); },
                     "request 0: position 3 is past max_context = 3");
  EXPECT_EQ(s.length(id), 3);
  expect_input_error([&] { s.step(ids, in.k[0], in.k[0], in.v[0]); }, "q has 128 floats");
  const int two[] = {id, id};
  std::vector<float> q2(in.q[0]), k2(in.k[0]);
  q2.insert(q2.end(), in.q[0].begin(), in.q[0].end());
  k2.insert(k2.end(), in.k[0].begin(), in.k[0].end());
  expect_input_error([&] { s.step(two, q2, k2, k2); }, "request 0 appears twice");
  const int unknown[] = {1};
  expect_input_error([&] { s.step(unknown, in.q[0], in.k[0], in.v[0]); },
                     "request 1 is not active");
  expect_input_error([&] { s.prefill_synthetic(id, 4, 1); }, "prefill length 4");
}

TEST(CpuSessionApi, RequestSlotsAreReused) {
  Session s(base());
  EXPECT_EQ(s.add_request(), 0);
  EXPECT_EQ(s.add_request(), 1);
  expect_input_error([&] { s.add_request(); }, "all 2 request slots");
  Stream in(base().shape, 2);
  in.grow(1);
  const int one[] = {1};
  s.step(one, in.q[0], in.k[0], in.v[0]);
  EXPECT_EQ(s.length(1), 1);
  s.release_request(1);
  expect_input_error([&] { s.length(1); }, "request 1 is not active");
  EXPECT_EQ(s.add_request(), 1);
  EXPECT_EQ(s.length(1), 0);
  EXPECT_EQ(s.ring_entry(1, 0, 0).pos, -1) << "a reused slot starts with an empty ring";
}

// advance = false repeats the same step: same outputs and decisions, position unchanged; the
// advancing call afterwards computes that same step once more (its KV row is rewritten as is).
TEST(CpuSessionApi, AdvanceFalseRepeatsTheSameStep) {
  SessionOptions o = base();
  o.mac.ring_capacity = 64;  // no slot reuse within the run: the ring write cannot change a match
  Session s(o);
  const int id = s.add_request();
  const int ids[] = {id};
  Stream in(o.shape, 3);
  in.recur_from = 4;
  for (int m = 0; m < 30; ++m) {
    in.grow(m + 1);
    const auto &q = in.q[std::size_t(m)], &k = in.k[std::size_t(m)], &v = in.v[std::size_t(m)];
    const Session::Result first = s.step(ids, q, k, v, false);
    const Session::Result again = s.step(ids, q, k, v, false);
    EXPECT_EQ(s.length(id), m);
    const Session::Result& real = s.step(ids, q, k, v, true);
    EXPECT_EQ(s.length(id), m + 1);
    for (const Session::Result* r : {&again, &real}) {
      EXPECT_EQ(r->out, first.out) << "step " << m;
      ASSERT_EQ(r->decisions.size(), first.decisions.size());
      for (std::size_t h = 0; h < first.decisions.size(); ++h) {
        EXPECT_EQ(r->decisions[h].hit, first.decisions[h].hit);
        EXPECT_EQ(r->decisions[h].p, first.decisions[h].p);
      }
      EXPECT_EQ(r->stats.modeled_bytes(), first.stats.modeled_bytes());
    }
  }
}

// The tuner keeps a prefilled session and gives it the next point's forced hits
// (tuner/measure/backend_cpu.cpp, SessionPool): after one warm-up step (which rewrites the slot
// of m - K, a candidate until then), it steps exactly as a fresh session does, output and
// decisions, with lags up to K and with either match.
TEST(CpuSessionApi, ASteppedSessionGivenNewForcedHitsStepsAsAFreshOne) {
  for (const MatchMode match : {MatchMode::scan, MatchMode::pruned}) {
    SCOPED_TRACE(name_of(match));
    SessionOptions at_a = base();
    at_a.engine.match_mode = match;
    at_a.forced.enabled = true;
    at_a.forced.hit_rate = 0.25;
    at_a.forced.lag = {LagKind::uniform, 1, 16};  // up to K = 16
    SessionOptions at_b = at_a;
    at_b.forced.hit_rate = 0.75;
    at_b.forced.coherence = Coherence::per_group;
    Session kept(at_a), fresh(at_b);
    const StepInputs in = prefilled_step(kept, 2, 40, 21);
    const StepInputs same = prefilled_step(fresh, 2, 40, 21);
    ASSERT_EQ(in.ids, same.ids);
    const auto step = [&](Session& s) { return s.step(in.ids, in.q, in.k, in.v, false); };
    const Session::Result at_a_step = step(kept);
    step(kept);
    kept.set_forced(at_b.forced);
    step(fresh);  // the warm-up
    const Session::Result a = step(kept);
    const Session::Result b = step(fresh);
    EXPECT_EQ(a.out, b.out);
    ASSERT_EQ(a.decisions.size(), b.decisions.size());
    for (std::size_t h = 0; h < a.decisions.size(); ++h) {
      EXPECT_EQ(a.decisions[h].hit, b.decisions[h].hit) << "head " << h;
      EXPECT_EQ(a.decisions[h].p, b.decisions[h].p) << "head " << h;
      EXPECT_EQ(a.decisions[h].start, b.decisions[h].start) << "head " << h;
      EXPECT_EQ(a.decisions[h].d2, b.decisions[h].d2) << "head " << h;
    }
    EXPECT_EQ(a.stats.modeled_bytes(), b.stats.modeled_bytes());
    EXPECT_EQ(a.stats.match_rows_read, b.stats.match_rows_read);
    EXPECT_LT(at_a_step.stats.hit_heads, b.stats.hit_heads) << "the two quotas differ";
  }
}

TEST(CpuSessionApi, PrefillSyntheticGivesRandomKvAndValidRings) {
  SessionOptions o = base();
  o.max_context = 4096;
  o.forced.enabled = true;
  o.forced.hit_rate = 1.0;
  o.forced.lag = {LagKind::uniform, 1, 8};
  Session s(o), twin(o);
  const int id = s.add_request(), tid = twin.add_request();
  s.prefill_synthetic(id, 1000, 42);
  twin.prefill_synthetic(tid, 1000, 42);
  EXPECT_EQ(s.length(id), 1000);
  std::vector<float> k(64), v(64);
  for (int pos : {0, 1, 17, 500, 999})
    for (int g = 0; g < 2; ++g) {
      s.read_kv(id, g, pos, k, v);
      for (int i = 0; i < 64; ++i) {
        EXPECT_TRUE(std::isfinite(k[std::size_t(i)]) && k[std::size_t(i)] != 0.0f);
        EXPECT_TRUE(std::isfinite(v[std::size_t(i)]) && v[std::size_t(i)] != 0.0f);
      }
    }
  for (int p = 1000 - 16; p < 1000; ++p)
    for (int h = 0; h < 8; ++h) {
      const RingEntryView e = s.ring_entry(id, h, p);
      EXPECT_EQ(e.pos, p);
      EXPECT_TRUE(std::isfinite(e.lse));
      EXPECT_NEAR(e.lse, std::log(double(cache_end(p, 4))), 0.5);
    }
  Stream in(o.shape, 4);
  in.grow(1);
  const int ids[] = {id}, tids[] = {tid};
  const Session::Result r = s.step(ids, in.q[0], in.k[0], in.v[0], false);
  const Session::Result& t = twin.step(tids, in.q[0], in.k[0], in.v[0], false);
  EXPECT_EQ(r.stats.hit_heads, 8) << "forced hit rate 1 on a prefilled ring hits every head";
  EXPECT_EQ(r.out, t.out) << "prefill is deterministic in the seed";
  for (float x : r.out) EXPECT_TRUE(std::isfinite(x));
  EXPECT_GT(r.stats.skip_ratio(), 0.9);
}

TEST(CpuSessionApi, InstanceNamesAndRegistry) {
  SessionOptions o = base();
  o.engine.isa = "generic";
  EXPECT_EQ(Session(o).instance_name(), "mac_cpu_generic_hd64_bf16");
  o.mac_enabled = false;
  o.shape.kv_dtype = DType::f32;
  EXPECT_EQ(Session(o).instance_name(), "full_cpu_generic_hd64_f32");
  const auto all = instances();
  std::map<std::string, int> seen;
  for (const InstanceDesc& i : all) {
    ++seen[i.name];
    EXPECT_EQ(i.backend, Backend::cpu);
    EXPECT_TRUE(i.family == Family::mac || i.family == Family::full);
    EXPECT_NE(i.config.find("head_dim="), std::string::npos);
  }
  EXPECT_EQ(seen.size(), all.size()) << "names are unique";
  EXPECT_EQ(all.size(), supported_isas().size() * 2 * 3 * 3);
  EXPECT_EQ(seen.count("mac_cpu_generic_hd128_bf16"), 1u);
  EXPECT_EQ(seen.count("full_cpu_avx2_hd256_f16"), isa_supported(Isa::avx2) ? 1u : 0u);
}

// MACTUNE_CPU_ISA caps what this process treats as present, like a CPU without the wider
// paths: `auto`, the instance list and the fingerprint follow it, a named wider path is
// refused naming the cap, and a bad value is an input error naming the variable.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CpuIsaCap, CapsAutoInstancesAndFingerprint) {
  for (const Isa cap : kAllIsas) {
    SCOPED_TRACE(std::string(isa_name(cap)));
    const ScopedEnv env("MACTUNE_CPU_ISA", std::string(isa_name(cap)).c_str());
    EXPECT_LE(best_isa(), cap);
    for (const Isa i : kAllIsas)
      EXPECT_EQ(isa_supported(i), isa_built(i) && cpu_has(i) && i <= cap);
    EXPECT_EQ(Session(base()).isa(), isa_name(best_isa()));
    EXPECT_EQ(cpu_fingerprint().arch, isa_name(best_isa()));
    EXPECT_EQ(instances().size(), supported_isas().size() * 2 * 3 * 3);
    for (const Isa i : kAllIsas) {
      if (i <= cap) continue;
      SessionOptions o = base();
      o.engine.isa = std::string(isa_name(i));
      expect_input_error([&] { Session s(o); }, !isa_built(i) ? "this build leaves"
                                                : cpu_has(i)  ? "MACTUNE_CPU_ISA="
                                                              : "lacks the");
    }
  }
  {
    const ScopedEnv env("MACTUNE_CPU_ISA", "auto");
    const auto runs = [](Isa i) { return isa_built(i) && cpu_has(i); };
    EXPECT_EQ(best_isa(), runs(Isa::avx512) ? Isa::avx512
                          : runs(Isa::avx2) ? Isa::avx2
                                            : Isa::generic);
  }
  const ScopedEnv env("MACTUNE_CPU_ISA", "sse9");
  expect_input_error([] { Session s(base()); }, "MACTUNE_CPU_ISA = 'sse9' is unknown");
}

class CountingSink : public PhaseSink {
 public:
  void begin(Phase p, std::string_view instance) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++open[p];
    if (std::this_thread::get_id() != caller) ++on_workers[p];
    names[std::string(instance)] += 0;
  }
  void end(Phase p) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++closed[p];
  }
  std::map<Phase, int> open, closed, on_workers;
  std::map<std::string, int> names;
  const std::thread::id caller = std::this_thread::get_id();

 private:
  std::mutex mu_;
};

TEST(CpuSessionApi, ReportsEveryPhaseOfAStep) {
  CountingSink sink;
  SessionOptions o = base();
  o.phases = &sink;
  Session s(o);
  const int id = s.add_request();
  const int ids[] = {id};
  Stream in(o.shape, 5);
  for (int m = 0; m < 12; ++m) {
    in.grow(m + 1);
    s.step(ids, in.q[std::size_t(m)], in.k[std::size_t(m)], in.v[std::size_t(m)]);
  }
  EXPECT_EQ(sink.open, sink.closed);
  // The calling thread reports each phase once a step; pool workers add a span per task they
  // ran (their own trace tracks), only for the pooled phases.
  auto on_caller = [&](Phase p) { return sink.open[p] - sink.on_workers[p]; };
  EXPECT_EQ(on_caller(Phase::step), 12);
  for (Phase p :
       {Phase::rope, Phase::append, Phase::plan, Phase::attend, Phase::merge, Phase::ring_write})
    EXPECT_EQ(on_caller(p), 12) << name_of(p);
  EXPECT_EQ(on_caller(Phase::match), 12 - o.mac.min_context) << "match runs from min_context";
  for (Phase p : {Phase::step, Phase::rope, Phase::append, Phase::plan, Phase::ring_write})
    EXPECT_EQ(sink.on_workers[p], 0) << name_of(p);
  EXPECT_EQ(sink.names.size(), 1u);
  EXPECT_EQ(sink.names.count(s.instance_name()), 1u) << "phases carry the instance name";
}

}  // namespace
}  // namespace mactune::cpu::test
