#include "tuner/emit.h"

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "mactune/build_info.h"
#include "schedules/dispatch.h"
#include "tuner/expr.h"

namespace mactune::tuner {

Decided decide_only(const db::Store& store, const Selection& sel, DecideOptions opt) {
  Decided d;
  d.selection = sel;
  for (const auto& row : store.devices())
    if (row.id == sel.device_id) d.device = row.fingerprint;
  d.loaded = load_pairs(store, sel);
  if (d.loaded.pairs.empty())
    input_error(store.path(),
                ": no complete measurement pairs (MAC and its baseline) to decide from");
  opt.incumbents = load_incumbents(store, sel);
  d.decisions = decide(d.loaded.pairs, opt);
  return d;
}

Decided decide_and_store(db::Store& store, const Selection& sel, const DecideOptions& opt) {
  Decided d = decide_only(store, sel, opt);
  store_decisions(store, sel, d.decisions, opt.tie_tolerance);
  return d;
}

sched::Params params_of(const std::string& text) {
  sched::Params p;
  std::istringstream in(text);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    const auto n = parse_number(v);
    if (v == "true" || v == "false")
      p[k] = v == "true";
    else if (n && v.find_first_not_of("-0123456789") == std::string::npos)
      p[k] = static_cast<std::int64_t>(*n);
    else if (n && v.find_first_of("KkMm") == std::string::npos)
      p[k] = *n;
    else
      p[k] = v;
  }
  return p;
}

namespace {

// [lo, hi] intervals over sorted measured values: each covers itself up to the next one.
std::map<int, sched::Interval> intervals_of(const std::set<int>& values) {
  std::map<int, sched::Interval> out;
  for (auto it = values.begin(); it != values.end(); ++it) {
    sched::Interval iv;
    iv.lo = it == values.begin() ? 1 : *it;
    const auto next = std::next(it);
    if (next != values.end()) iv.hi = *next - 1;
    out[*it] = iv;
  }
  return out;
}

// "K=512,r=256,tau=0.45,summary=f32,pick=nearest,..." -> its fields.
std::map<std::string, std::string> fields_of(const std::string& text) {
  std::map<std::string, std::string> f;
  std::istringstream in(text);
  std::string kv;
  while (std::getline(in, kv, ','))
    if (const auto eq = kv.find('='); eq != std::string::npos)
      f[kv.substr(0, eq)] = kv.substr(eq + 1);
  return f;
}

std::string note_of(const BucketDecision& d) {
  std::ostringstream o;
  o << "break-even " << d.break_even.status;
  if (d.break_even.hit_rate) o << " at hit rate " << format_number(*d.break_even.hit_rate);
  o << " (iqr)";
  for (const CurvePoint& p : d.break_even.curve)
    o << "; " << format_number(p.hit_rate) << ": " << std::fixed << std::setprecision(2)
      << p.speedup << "x " << verdict_name(p.verdict);
  return o.str();
}

}  // namespace

sched::DispatchTable make_table(const Decided& d, const std::string& source_database) {
  sched::DispatchTable t;
  t.device.backend = d.device.backend;
  t.device.name = d.device.name;
  t.device.fingerprint = d.device.digest();
  t.generated.version = build::version;
  t.generated.git_revision = build::git_revision;
  t.generated.source_database = std::filesystem::path(source_database).filename().string();
  t.generated.time = sched::utc_now_iso8601();

  std::map<std::string, std::pair<std::set<int>, std::set<int>>>
      axes;  // shape -> batches, contexts
  for (const BucketDecision& b : d.decisions) {
    auto& a = axes[b.bucket.shape_key()];
    a.first.insert(b.bucket.batch);
    a.second.insert(b.bucket.context);
  }
  for (const BucketDecision& b : d.decisions) {
    const auto& a = axes[b.bucket.shape_key()];
    sched::Entry e;
    e.shape = {b.bucket.head_dim, b.bucket.q_heads, b.bucket.kv_heads, parse_dtype(b.bucket.dtype),
               b.bucket.page_size};
    e.batch = intervals_of(a.first).at(b.bucket.batch);
    e.context = intervals_of(a.second).at(b.bucket.context);
    e.full.instance = b.full.instance;
    e.full.params = params_of(b.full.params);
    if (!b.mac.instance.empty()) {
      sched::MacChoice m;
      m.instance = b.mac.instance;
      m.ring_capacity = b.mac.K;
      m.band = b.mac.r;
      // Hits were forced while tuning, so the threshold was not what was measured: the
      // engine keeps its own (calibrated) tau. The ring's storage and rules were measured.
      m.params = params_of(b.mac.params);
      const auto f = fields_of(b.mac.mac_settings);
      for (const char* k : {"summary", "pick", "rectify"})
        if (f.count(k))
          m.params[std::string(k == std::string("summary") ? "summary_dtype" : k)] = f.at(k);
      e.mac = m;
      if (b.break_even.status == "ok") e.min_hit_rate = b.break_even.hit_rate;
    }
    e.note = note_of(b);
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::string write_dispatch(const sched::DispatchTable& table, const std::string& json_path,
                           const std::string& header_path, const DeviceFingerprint& here) {
  for (const std::string& p : {json_path, header_path}) {
    if (p.empty()) continue;
    const auto dir = std::filesystem::path(p).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) input_error(p, ": cannot create its directory: ", ec.message());
  }
  sched::write_table(table, json_path);
  if (!header_path.empty()) sched::write_header(table, header_path);
  // Read it back the way a serving engine would.
  std::string refusal;
  sched::LoadOptions lo;
  lo.device = here;
  lo.check_device = table.device.fingerprint == here.digest();
  lo.warn = [&](std::string_view w) { refusal = std::string(w); };
  const auto disp = sched::Dispatcher::load(json_path, lo);
  if (!disp.table() && refusal.empty()) refusal = disp.refusal();
  return refusal;
}

}  // namespace mactune::tuner
