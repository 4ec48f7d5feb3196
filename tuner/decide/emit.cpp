#include "tuner/decide/emit.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "dispatcher/dispatch.h"
#include "kernels/error.h"
#include "mactune/build_info.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {

Decided decide_loaded(const db::Store& store, const Selection& sel, LoadedPairs loaded,
                      DecideOptions opt) {
  Decided d;
  d.selection = sel;
  for (const auto& row : store.devices())
    if (row.id == sel.device_id) d.device = row.fingerprint;
  d.loaded = std::move(loaded);
  opt.incumbents = load_incumbents(store, sel);
  d.decisions = decide(d.loaded.pairs, opt);
  return d;
}

Decided decide_only(const db::Store& store, const Selection& sel, DecideOptions opt) {
  LoadedPairs loaded = load_pairs(store, sel);
  if (loaded.pairs.empty())
    input_error(store.path(),
                ": no complete measurement pairs (MAC and its baseline) to decide from");
  return decide_loaded(store, sel, std::move(loaded), std::move(opt));
}

Decided decide_and_store(db::Store& store, const Selection& sel, const DecideOptions& opt) {
  Decided d = decide_only(store, sel, opt);
  store_decisions(store, sel, d.loaded, d.decisions, opt.tie_tolerance);
  return d;
}

namespace {

std::string note_of(const BucketDecision& d) {
  std::ostringstream o;
  o << "break-even " << name_of(d.break_even.status);
  if (d.break_even.hit_rate) o << " at hit rate " << format_number(*d.break_even.hit_rate);
  o << " (iqr)";
  for (const CurvePoint& p : d.break_even.curve)
    o << "; " << format_number(p.hit_rate) << ": " << std::fixed << std::setprecision(2)
      << p.speedup << "x " << name_of(p.verdict);
  return o.str();
}

// The first context of `upper`'s entry: where the model's break-even for the lower bucket's
// config is nearer upper's measured break-even than lower's (see make_table).
long long context_boundary(const FittedModel& m, const BucketDecision& lower,
                           const BucketDecision& upper) {
  const long long fallback = upper.bucket.context;
  if (!m.usable() || !lower.break_even.hit_rate || !upper.break_even.hit_rate) return fallback;
  const double lo_be = *lower.break_even.hit_rate, hi_be = *upper.break_even.hit_rate;
  if (lo_be == hi_be) return fallback;
  const ModelRow* t = chosen_mac_row(lower, *m.rows);
  if (!t) return fallback;
  auto nearer_upper = [&](long long ctx) {
    StepSpec s = t->step;
    s.context = static_cast<int>(ctx);
    const double be = predicted_break_even(m.models->mac, m.models->full, s, 0.005).value_or(2.0);
    return std::abs(be - hi_be) < std::abs(be - lo_be);
  };
  long long a = lower.bucket.context, b = upper.bucket.context;
  if (nearer_upper(a) || !nearer_upper(b)) return fallback;  // the model contradicts a bucket
  while (b - a > std::max(1LL, a / 64)) {
    const auto mid = static_cast<long long>(std::sqrt(double(a) * double(b)));
    (nearer_upper(std::clamp(mid, a + 1, b - 1)) ? b : a) = std::clamp(mid, a + 1, b - 1);
  }
  return b;
}

// The first batch of `upper`'s entry, likewise on the batch: `lower` and `upper` are one
// shape and context at two measured batches.
long long batch_boundary(const FittedModel& m, const BucketDecision& lower,
                         const BucketDecision& upper) {
  const long long fallback = upper.bucket.batch;
  if (!m.usable() || !lower.break_even.hit_rate || !upper.break_even.hit_rate) return fallback;
  const double lo_be = *lower.break_even.hit_rate, hi_be = *upper.break_even.hit_rate;
  if (lo_be == hi_be) return fallback;
  const ModelRow* t = chosen_mac_row(lower, *m.rows);
  if (!t) return fallback;
  auto nearer_upper = [&](long long batch) {
    StepSpec s = t->step;
    s.shape.batch = static_cast<int>(batch);
    s.context = static_cast<int>(lower.bucket.context);
    const double be = predicted_break_even(m.models->mac, m.models->full, s, 0.005).value_or(2.0);
    return std::abs(be - hi_be) < std::abs(be - lo_be);
  };
  long long a = lower.bucket.batch, b = upper.bucket.batch;
  if (nearer_upper(a) || !nearer_upper(b)) return fallback;
  while (b - a > 1) {
    const auto mid = static_cast<long long>(std::sqrt(double(a) * double(b)));
    (nearer_upper(std::clamp(mid, a + 1, b - 1)) ? b : a) = std::clamp(mid, a + 1, b - 1);
  }
  return b;
}

// Batch intervals of one shape: each measured batch from its boundary up to the next one's.
// Entries of one batch row share its interval (each row has its own context boundaries), so the
// boundary between two measured batches is one per shape: the median over the contexts at
// which both were measured with different break-evens of where the model places it there
// (the upper measured batch where it contradicts either bucket), the upper batch when no
// context's break-evens differ.
std::map<long long, dispatch::Interval> batch_intervals(
    const std::map<long long, std::map<long long, const BucketDecision*>>& by_batch,
    const FittedModel& model) {
  std::map<long long, dispatch::Interval> out;
  long long lo = 1;
  for (auto it = by_batch.begin(); it != by_batch.end(); ++it) {
    dispatch::Interval iv;
    iv.lo = lo;
    const auto next = std::next(it);
    if (next != by_batch.end()) {
      std::vector<long long> votes;
      for (const auto& [ctx, lower] : it->second) {
        const auto up = next->second.find(ctx);
        if (up == next->second.end() || !lower->break_even.hit_rate ||
            !up->second->break_even.hit_rate ||
            *lower->break_even.hit_rate == *up->second->break_even.hit_rate)
          continue;
        votes.push_back(batch_boundary(model, *lower, *up->second));
      }
      lo = next->first;
      if (!votes.empty()) {
        std::sort(votes.begin(), votes.end());
        lo = votes[(votes.size() - 1) / 2];
      }
      iv.hi = lo - 1;
    }
    out[it->first] = iv;
  }
  return out;
}

}  // namespace

dispatch::DispatchTable make_table(const Decided& d, const std::string& source_database,
                                   const FittedModel& model) {
  dispatch::DispatchTable t;
  t.device.backend = d.device.backend;
  t.device.name = d.device.name;
  t.device.fingerprint = d.device.digest();
  t.generated.version = build::version;
  t.generated.git_revision = build::git_revision;
  t.generated.source_database = std::filesystem::path(source_database).filename().string();
  t.generated.time = dispatch::utc_now_iso8601();

  // Batch boundaries per shape (tuner/decide/emit.h): the next measured batch, or the model's.
  std::map<ShapeKey, std::map<long long, std::map<long long, const BucketDecision*>>> grid;
  for (const BucketDecision& b : d.decisions)
    grid[b.bucket.shape][b.bucket.batch][b.bucket.context] = &b;
  std::map<ShapeKey, std::map<long long, dispatch::Interval>> batch_of;
  for (const auto& [shape, by_batch] : grid) batch_of[shape] = batch_intervals(by_batch, model);
  // Context boundaries per shape and batch: the next measured context, or the model's.
  std::map<std::pair<ShapeKey, int>, std::map<long long, const BucketDecision*>> rows;
  for (const BucketDecision& b : d.decisions)
    rows[{b.bucket.shape, b.bucket.batch}][b.bucket.context] = &b;
  std::map<const BucketDecision*, dispatch::Interval> context_of;
  for (const auto& [key, by_ctx] : rows) {
    long long lo = 1;
    for (auto it = by_ctx.begin(); it != by_ctx.end(); ++it) {
      dispatch::Interval iv;
      iv.lo = lo;
      const auto next = std::next(it);
      if (next != by_ctx.end()) {
        lo = context_boundary(model, *it->second, *next->second);
        iv.hi = lo - 1;
      }
      context_of[it->second] = iv;
    }
  }
  for (const BucketDecision& b : d.decisions) {
    dispatch::Entry e;
    e.shape = b.bucket.shape;
    e.batch = batch_of.at(b.bucket.shape).at(b.bucket.batch);
    e.context = context_of.at(&b);
    e.full.instance = b.full.config.instance;
    e.full.params = to_params(b.full.config.launch);
    if (!b.mac.empty()) {
      // Hits were forced while tuning, so the threshold was not what was measured: the
      // engine keeps its own (calibrated) tau. Every other MAC setting was measured.
      e.mac = dispatch::mac_choice(b.mac.config.instance, *b.mac.config.mac,
                                   to_params(b.mac.config.launch), /*with_tau=*/false);
      if (b.break_even.status == BreakEvenStatus::ok) e.min_hit_rate = b.break_even.hit_rate;
    }
    e.note = note_of(b);
    if (e.context.lo != 1 && e.context.lo != b.bucket.context)
      e.note += "; context boundary " + std::to_string(e.context.lo) + " from the cost model";
    if (e.batch.lo != 1 && e.batch.lo != b.bucket.batch)
      e.note += "; batch boundary " + std::to_string(e.batch.lo) + " from the cost model";
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::string write_dispatch(const dispatch::DispatchTable& table, const std::string& json_path,
                           const std::string& header_path, const DeviceFingerprint& here) {
  for (const std::string& p : {json_path, header_path}) {
    if (p.empty()) continue;
    const auto dir = std::filesystem::path(p).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) input_error(p, ": cannot create its directory: ", ec.message());
  }
  dispatch::write_table(table, json_path);
  if (!header_path.empty()) dispatch::write_header(table, header_path);
  // Read it back the way a serving engine would.
  std::string refusal;
  dispatch::LoadOptions lo;
  lo.device = here;
  lo.check_device = table.device.fingerprint == here.digest();
  lo.warn = [&](std::string_view w) { refusal = std::string(w); };
  const auto disp = dispatch::Dispatcher::load(json_path, lo);
  if (!disp.table() && refusal.empty()) refusal = disp.refusal();
  return refusal;
}

}  // namespace mactune::tuner
