// The sections of mactune_gpu_check, in the lease's order of value: the copy ceiling, the full
// vs MAC grid, correctness at production size, the match at K = 1024 hot and cold, every built
// instance, ring 2048 beside 512, page layouts; and the small runs the sanitizers and ncu
// profile. Every record is also printed as one line (the lease's reply carries stdout's tail).
#include "gpu_check_sections.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>

#include "kernels/cuda/registry.h"

namespace mactune::cuda::check {
namespace {

constexpr double kCheckTol = 1e-4;  // MAC at hit 0 vs full: fp32 summation order only

// The production decode shape: 32 query heads, D = 128, bf16 KV in 16-token pages; MAC with
// band 256 and forced per-head hits at lags uniform in [1, 64]; each step as a CUDA graph with
// event nodes between its kernels.
SessionOptions production(int batch, int group, int context, int ring = 512) {
  SessionOptions o;
  o.shape.batch = batch;
  o.shape.q_heads = 32;
  o.shape.kv_heads = 32 / group;
  o.shape.head_dim = 128;
  o.shape.kv_dtype = DType::bf16;
  o.shape.page_size = 16;
  o.mac.ring_capacity = ring;
  o.mac.band = 256;
  o.mac.min_context = 2048;
  o.max_context = context + 64;
  o.engine.graph = true;
  o.engine.time_phases = true;
  o.forced.enabled = true;
  o.forced.coherence = Coherence::per_head;
  o.forced.lag = {LagKind::uniform, 1, 64};
  return o;
}

double kv_bytes(const Problem& p, int context) {
  return 2.0 * p.batch * p.kv_heads * (context + 1.0) * p.head_dim *
         static_cast<double>(dtype_size(p.kv_dtype));
}

double gbs(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

// Runs one shape of a section; an exception becomes an `error` record and a failure.
int guarded(RecordFile& out, const std::string& section, const std::string& what,
            const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    out.write(Record("error").str("section", section).str("what", what + ": " + e.what()));
    std::printf("%s %s: FAILED: %s\n", section.c_str(), what.c_str(), e.what());
    std::fflush(stdout);
    return 1;
  }
}

std::string shape_text(int context, int batch, int group) {
  return std::to_string(context) + "x" + std::to_string(batch) + " G" + std::to_string(group);
}

std::vector<int> grid_contexts(bool quick) {
  return quick ? std::vector<int>{32768} : std::vector<int>{32768, 131072};
}
std::vector<int> grid_batches(bool quick) {
  return quick ? std::vector<int>{1, 16} : std::vector<int>{1, 16, 64};
}
const std::vector<int> kGroups = {4, 8};
const std::vector<double> kHits = {0.0, 0.9, 1.0};

int samples(const RunOptions& o) {
  return o.quick ? 7 : 15;
}

// Full vs MAC rows of one shape at each hit rate (section "grid" or "ring").
int pair_rows(Bench& b, RecordFile& out, const RunOptions& ro, const std::string& section,
              int context, int batch, int group, int ring) {
  const std::string what = shape_text(context, batch, group) + " K " + std::to_string(ring);
  return guarded(out, section, what, [&] {
    PairSpec spec{production(batch, group, context, ring), context, kHits, ro.warmup, samples(ro)};
    for (const PairResult& r : b.pair(spec)) {
      const double full_gbs = gbs(static_cast<double>(r.full.modeled_bytes), r.full.ms);
      out.write(Record("row")
                    .str("section", section)
                    .integer("run", ro.run)
                    .integer("context", context)
                    .integer("batch", batch)
                    .integer("group", group)
                    .num("hit", r.hit)
                    .integer("ring", ring)
                    .num("full_ms", r.full.ms)
                    .num("full_spread", r.full.spread)
                    .num("mac_ms", r.mac.ms)
                    .num("mac_spread", r.mac.spread)
                    .num("full_gbs", full_gbs)
                    .integer("full_bytes", r.full.modeled_bytes)
                    .num("mac_skip", r.mac.skip)
                    .num("mac_match_ms", r.mac.match_ms)
                    .num("mac_plan_ms", r.mac.plan_ms)
                    .num("mac_attend_ms", r.mac.attend_ms)
                    .str("full_plan", plan_text(r.full.plan))
                    .str("mac_plan", plan_text(r.mac.plan))
                    .str("full_instance", r.full.instance)
                    .str("attend_instance", r.mac.instance));
      std::printf(
          "%s ctx %6d batch %2d G %d K %4d hit %.1f: full %.4f ms (%.0f GB/s, +-%.0f%%), "
          "mac %.4f ms, %.2fx\n",
          section.c_str(), context, batch, group, ring, r.hit, r.full.ms, full_gbs,
          50 * r.full.spread, r.mac.ms, r.full.ms / r.mac.ms);
      std::fflush(stdout);
    }
  });
}

int section_copy(Bench& b, RecordFile& out, const RunOptions& ro) {
  return guarded(out, "copy", "device to device", [&] {
    const std::size_t bytes = ro.quick ? std::size_t{1} << 30 : std::size_t{4} << 30;
    const double g = b.copy_gbs(bytes, 10);
    out.write(Record("copy").integer("bytes", static_cast<long long>(bytes)).num("gbs", g));
    std::printf("copy %zu bytes: %.0f GB/s (read + write)\n", bytes, g);
  });
}

int section_grid(Bench& b, RecordFile& out, const RunOptions& ro) {
  int failed = 0;
  for (int context : grid_contexts(ro.quick))
    for (int batch : grid_batches(ro.quick))
      for (int group : kGroups) failed += pair_rows(b, out, ro, "grid", context, batch, group, 512);
  return failed;
}

// MAC at hit 0 against full attention, same seeds, every output of a few advancing steps.
int compare_rows(Bench& b, RecordFile& out, const std::string& section, SessionOptions mac,
                 int context, int steps) {
  const Problem& p = mac.shape;
  const int group = p.q_heads / p.kv_heads;
  const std::string what =
      shape_text(context, p.batch, group) + " min_chunk " + std::to_string(mac.engine.min_chunk);
  return guarded(out, section, what, [&] {
    const CompareResult r = b.compare({mac, context, steps});
    const bool pass = r.finite && r.rel_l2 <= kCheckTol;
    out.write(Record("check")
                  .str("section", section)
                  .integer("context", context)
                  .integer("batch", p.batch)
                  .integer("group", group)
                  .integer("steps", steps)
                  .integer("min_chunk", mac.engine.min_chunk)
                  .num("rel_l2", r.rel_l2)
                  .num("max_abs", r.max_abs)
                  .flag("finite", r.finite)
                  .num("tol", kCheckTol)
                  .flag("pass", pass));
    std::printf("%s %s, %d steps: rel L2 %.3g, max abs %.3g, %s: %s\n", section.c_str(),
                what.c_str(), steps, r.rel_l2, r.max_abs, r.finite ? "finite" : "NOT FINITE",
                pass ? "pass" : "FAIL");
    std::fflush(stdout);
    if (!pass)
      throw Error("MAC at hit 0 differs from full (rel L2 " + std::to_string(r.rel_l2) +
                  (r.finite ? "" : ", outputs not finite") + ")");
  });
}

// Production size (batch 64, 32K): the ticket path, multi-tile items, large merges.
int section_check(Bench& b, RecordFile& out, const RunOptions& ro) {
  const int batch = ro.quick ? 16 : 64;
  int failed = 0;
  for (int group : {8, 4})
    failed += compare_rows(b, out, "check", production(batch, group, 32768), 32768, 3);
  return failed;
}

// Match, plan and the whole step at K = 1024, batch 1 and 64: L2 hot (the same step again and
// again) and cold (flushed before each), in a graph, and batch 1 eagerly too.
int section_match(Bench& b, RecordFile& out, const RunOptions& ro) {
  struct Variant {
    int batch;
    bool cold, graph;
  };
  const Variant variants[] = {
      {1, false, true}, {1, true, true}, {1, false, false}, {64, false, true}, {64, true, true}};
  int failed = 0;
  for (const Variant& v : variants) {
    const std::string what = "batch " + std::to_string(v.batch) + (v.cold ? " cold" : " hot") +
                             (v.graph ? " graph" : " eager");
    failed += guarded(out, "match", what, [&] {
      SessionOptions o = production(v.batch, 8, 4096, 1024);
      o.forced.enabled = false;  // the real scan and its decisions
      o.engine.graph = v.graph;
      const StepTimes t = b.single({o, 4096, ro.warmup, samples(ro), v.cold});
      out.write(Record("match")
                    .integer("run", ro.run)
                    .integer("ring", 1024)
                    .integer("batch", v.batch)
                    .integer("context", 4096)
                    .str("l2", v.cold ? "cold" : "hot")
                    .flag("graph", v.graph)
                    .num("match_us", t.match_ms * 1e3)
                    .num("plan_us", t.plan_ms * 1e3)
                    .num("step_us", t.ms * 1e3));
      std::printf("match K 1024 %s: match %.2f us, plan %.2f us, step %.2f us\n", what.c_str(),
                  t.match_ms * 1e3, t.plan_ms * 1e3, t.ms * 1e3);
      std::fflush(stdout);
    });
  }
  return failed;
}

// Every built full and attend instance at 128K, batch 16, in its own head dim, dtype and G
// (attend: MAC at forced hit 0, so it reads everything).
int section_instances(Bench& b, RecordFile& out, const RunOptions& ro) {
  const int context = ro.quick ? 32768 : 131072, batch = 16;
  auto one = [&](const std::string& name, const std::string& family, const AttendConfig& c) {
    return guarded(out, "instances", name, [&] {
      SessionOptions o = production(batch, c.group, context);
      o.shape.head_dim = c.head_dim;
      o.shape.kv_dtype = c.kv_dtype;
      o.forced.hit_rate = 0.0;
      if (family == "full") {
        o = full_options(o);
        o.engine.full = name;
      } else {
        o.engine.attend = name;
      }
      const StepTimes t = b.single({o, context, ro.warmup, samples(ro), false});
      const int ctas = b.ctas_per_sm(name);
      const double g = gbs(kv_bytes(o.shape, context), t.attend_ms);
      out.write(Record("instance")
                    .str("name", name)
                    .str("family", family)
                    .integer("head_dim", c.head_dim)
                    .integer("group", c.group)
                    .str("dtype", dtype_name(c.kv_dtype))
                    .integer("tile_tokens", c.tile_tokens)
                    .integer("stages", c.stages)
                    .integer("context", context)
                    .integer("batch", batch)
                    .num("ctas_per_sm", ctas < 0 ? kNotMeasured : ctas)
                    .num("step_ms", t.ms)
                    .num("kernel_ms", t.attend_ms)
                    .num("kv_gbs", g)
                    .str("plan", plan_text(t.plan)));
      std::printf("instance %s: step %.4f ms, kernel %.4f ms (%.0f GB/s), %d CTAs/SM\n",
                  name.c_str(), t.ms, t.attend_ms, g, ctas);
      std::fflush(stdout);
    });
  };
  int failed = 0;
  for (const FullInstance& f : full_instances()) failed += one(f.name, "full", as_attend(f.config));
  for (const AttendInstance& a : attend_instances()) failed += one(a.name, "attend", a.config);
  return failed;
}

int section_ring(Bench& b, RecordFile& out, const RunOptions& ro) {
  const int context = ro.quick ? 32768 : 131072;
  int failed = 0;
  for (int batch : {16, 64}) failed += pair_rows(b, out, ro, "ring", context, batch, 8, 2048);
  return failed;
}

// Full attention over 16-token pages scattered over the pool (the session's fixed permutation)
// and in order (the identity table), 256-token pages, and one page a request (each request's KV
// contiguous; only whole requests permuted).
int section_pages(Bench& b, RecordFile& out, const RunOptions& ro) {
  const int context = ro.quick ? 32768 : 131072, batch = 16, group = 8;
  struct Layout {
    int page;
    bool identity;
  };
  int failed = 0;
  for (const Layout l :
       {Layout{16, false}, Layout{16, true}, Layout{256, false}, Layout{context + 64, false}}) {
    const int page = l.page;
    failed += guarded(out, "pages", "page " + std::to_string(page), [&] {
      SessionOptions o = full_options(production(batch, group, context));
      o.shape.page_size = page;
      o.engine.identity_pages = l.identity;
      const StepTimes t = b.single({o, context, ro.warmup, samples(ro), false});
      const int per_request = (o.max_context + page - 1) / page;
      const double g = gbs(kv_bytes(o.shape, context), t.ms);
      const char* layout = per_request == 1 ? "one page a request (contiguous)"
                           : l.identity     ? "pages in order (identity table)"
                                            : "pages permuted over the pool";
      out.write(Record("pages")
                    .integer("page_size", page)
                    .integer("pages_per_request", per_request)
                    .str("layout", layout)
                    .integer("identity", l.identity ? 1 : 0)
                    .integer("context", context)
                    .integer("batch", batch)
                    .integer("group", group)
                    .num("full_ms", t.ms)
                    .num("full_gbs", g));
      std::printf("pages %d (%d a request, %s): full %.4f ms (%.0f GB/s)\n", page, per_request,
                  layout, t.ms, g);
      std::fflush(stdout);
    });
  }
  return failed;
}

// For compute-sanitizer (10-100x slower kernels, so small): eager steps at batch 2, 2560
// tokens, whose match scans several tiles a head (K 1024); once with one item a segment (40
// tiles an item), once with 128-token items on one CTA an SM (more entries than CTAs: the
// ticket path); MAC at hit 0 against full on each.
int section_sanitize(Bench& b, RecordFile& out, const RunOptions&) {
  int failed = 0;
  for (int min_chunk : {1 << 20, 128}) {
    SessionOptions o = production(2, 8, 2560, 1024);
    o.engine.graph = false;
    o.engine.min_chunk = min_chunk;
    if (min_chunk == 128) o.engine.ctas_per_sm = 1;
    failed += compare_rows(b, out, "sanitize", o, 2560, 2);
  }
  return failed;
}

// For ncu: full and MAC steps at 128K, batch 16, GQA 8, hit 0, eager; `warmup` of each before
// the one ncu profiles (--launch-skip 2 x warmup over the full and attend kernels).
int section_ncu(Bench& b, RecordFile& out, const RunOptions& ro) {
  return guarded(out, "ncu", "128K x 16 G8", [&] {
    SessionOptions o = production(16, 8, 131072);
    o.engine.graph = false;
    o.engine.time_phases = false;
    b.pair({o, 131072, {0.0}, ro.warmup, 1});
  });
}

// For ncu: MAC steps at K = 1024, batch 1 (one match kernel a step; --launch-skip warmup).
int section_ncu_match(Bench& b, RecordFile& out, const RunOptions& ro) {
  return guarded(out, "ncu_match", "K 1024 batch 1", [&] {
    SessionOptions o = production(1, 8, 4096, 1024);
    o.forced.enabled = false;
    o.engine.graph = false;
    o.engine.time_phases = false;
    b.single({o, 4096, ro.warmup, 1, false});
  });
}

}  // namespace

const std::vector<Section>& sections() {
  static const std::vector<Section> s = {
      {"copy", "device-to-device copy bandwidth (the ceiling)", section_copy, true},
      {"grid", "full vs MAC, 32K/128K x batch 1/16/64 x GQA 4/8 x hit 0/0.9/1", section_grid, true},
      {"check", "MAC at hit 0 vs full at batch 64, 32K, GQA 8 and 4", section_check, true},
      {"match", "match/plan/step at K 1024, batch 1/64, L2 hot/cold", section_match, true},
      {"instances", "every built full/attend instance at 128K batch 16", section_instances, true},
      {"ring", "ring 2048 at 128K batch 16/64 GQA 8", section_ring, true},
      {"pages", "16-token (permuted, identity), 256-token, one page a request", section_pages,
       true},
      {"sanitize", "small multi-tile steps for compute-sanitizer", section_sanitize, false},
      {"ncu", "warm full and MAC steps for ncu", section_ncu, false},
      {"ncu_match", "warm MAC steps at K 1024 for ncu", section_ncu_match, false},
  };
  return s;
}

void write_env(Bench& bench, RecordFile& out) {
  const DeviceInfo d = bench.device();
  out.write(Record("env")
                .str("mode", bench.dry() ? "dry" : "gpu")
                .str("device", d.name)
                .integer("sms", d.sms)
                .integer("memory_mib", d.memory_mib)
                .str("arch", d.arch)
                .str("runtime", d.runtime)
                .num("l2_mib", d.l2_mib)
                .integer("instances", static_cast<long long>(instances().size())));
  std::printf("device: %s, %d SMs, %lld MiB, %s, L2 %.0f MiB, %s%s\n", d.name.c_str(), d.sms,
              d.memory_mib, d.arch.c_str(), d.l2_mib, d.runtime.c_str(),
              bench.dry() ? " (dry run: placeholder numbers)" : "");
  std::fflush(stdout);
}

void write_plan(std::ostream& out) {
  for (int context : grid_contexts(false))
    for (int batch : grid_batches(false))
      for (int group : kGroups)
        out << Record("shape")
                   .integer("context", context)
                   .integer("batch", batch)
                   .integer("group", group)
                   .integer("q_heads", 32)
                   .integer("head_dim", 128)
                   .str("dtype", "bf16")
                   .json()
            << "\n";
}

}  // namespace mactune::cuda::check
