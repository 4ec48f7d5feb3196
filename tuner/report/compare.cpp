#include "tuner/report/compare.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "tuner/decide/decide.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/store_io.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

std::string_view change_name(Change c) {
  switch (c) {
    case Change::same:
      return "SAME";
    case Change::faster:
      return "FASTER";
    case Change::slower:
      return "SLOWER";
    case Change::ambiguous:
      return "AMBIGUOUS";
  }
  return "?";
}

Change classify_change(const TimeStats& base, const TimeStats& next, double threshold) {
  MACTUNE_CHECK(base.median_s > 0 && next.median_s > 0,
                "classify_change: medians must be positive");
  if (std::fabs(next.median_s / base.median_s - 1.0) <= threshold) return Change::same;
  switch (interval_verdict(next, base)) {
    case Verdict::faster:
      return Change::faster;
    case Verdict::slower:
      return Change::slower;
    case Verdict::tie:
      break;
  }
  return Change::ambiguous;
}

TimeStats mac_over_full(const TimeStats& mac, const TimeStats& full) {
  MACTUNE_CHECK(full.q1_s > 0 && mac.q1_s > 0, "mac_over_full: times must be positive");
  TimeStats s;
  s.samples = std::min(mac.samples, full.samples);
  s.median_s = mac.median_s / full.median_s;
  s.q1_s = mac.q1_s / full.q3_s;
  s.q3_s = mac.q3_s / full.q1_s;
  s.min_s = mac.min_s / full.max_s;
  s.max_s = mac.max_s / full.min_s;
  s.mean_s = mac.mean_s / full.mean_s;
  return s;
}

std::size_t Comparison::count(Change c) const {
  return static_cast<std::size_t>(
      std::count_if(points.begin(), points.end(), [c](const auto& p) { return p.change == c; }));
}

namespace {

const db::DeviceRow& pick_device(const std::vector<db::DeviceRow>& devices, const db::Store& s,
                                 const std::string& want, const char* flag) {
  std::vector<const db::DeviceRow*> with_rows;
  for (const auto& d : devices) {
    db::MeasurementFilter f;
    f.device_id = d.id;
    f.ok_only = false;
    if (!s.measurements(f).empty()) with_rows.push_back(&d);
  }
  if (with_rows.empty())
    input_error(s.path(), ": the database holds no measurements (run `mactune tune` first)");
  std::vector<const db::DeviceRow*> chosen;
  for (const auto* d : with_rows)
    if (want == "auto" || d->digest == want || glob_match(want, d->fingerprint.name))
      chosen.push_back(d);
  if (chosen.size() == 1) return *chosen.front();
  std::ostringstream names;
  for (const auto* d : with_rows)
    names << (names.tellp() ? "; " : "") << d->digest << " " << d->fingerprint.name;
  if (chosen.empty())
    input_error(flag, " '", want, "' matches no device with measurements in ", s.path(), " (",
                names.str(), ")");
  input_error(s.path(), ": holds measurements of ", chosen.size(), " devices (", names.str(),
              "): pick one with ", flag, " DIGEST");
}

// The rows of one side, the most recent ok row per point (and the failures).
struct Side {
  CompareSide info;
  std::vector<db::MeasurementRow> rows;
  std::map<std::string, const db::MeasurementRow*> latest;  // by point key
  std::map<std::string, const db::MeasurementRow*> failed;  // points with no ok row
};

std::string policy_text(const db::MeasurementRow& r) {
  return r.m.point.policy + "/" + (r.m.point.cold ? "cold" : "hot");
}

std::string point_key(const db::MeasurementRow& r) {
  return r.instance.name + "|" + r.m.point.params + "|" + r.workload.key() + "|" + policy_text(r);
}

Side load_side(const db::Store& s, const std::string& want, const char* flag) {
  const auto devices = s.devices();
  const db::DeviceRow& dev = pick_device(devices, s, want, flag);
  Side side;
  side.info.path = s.path();
  side.info.device = dev.fingerprint;
  side.info.device_digest = dev.digest;
  db::MeasurementFilter f;
  f.device_id = dev.id;
  f.ok_only = false;
  side.rows = s.measurements(f);
  side.info.rows = side.rows.size();
  std::set<db::Id> builds, runs;
  for (const auto& r : side.rows) {
    builds.insert(r.m.point.build_id);
    if (r.m.run_id) runs.insert(r.m.run_id);
    const std::string k = point_key(r);
    if (r.m.status != db::PointStatus::ok) {
      side.failed.try_emplace(k, &r);
      continue;
    }
    auto [it, fresh] = side.latest.try_emplace(k, &r);
    if (!fresh) {
      ++side.info.superseded;
      // A complete row wins over a partial one (a config a halving search dropped), then the
      // later one.
      const db::Measurement& old = it->second->m;
      if (std::pair(!r.m.partial, r.m.finished_at) > std::pair(!old.partial, old.finished_at))
        it->second = &r;
    }
  }
  for (auto it = side.failed.begin(); it != side.failed.end();)
    it = side.latest.count(it->first) ? side.failed.erase(it) : std::next(it);
  side.info.builds = builds.size();
  side.info.runs = runs.size();
  return side;
}

std::string mac_label(const db::MeasurementRow& r) {
  if (r.instance.family == Family::full) return "";
  return "K=" + std::to_string(r.workload.mac.ring_capacity) +
         ",r=" + std::to_string(r.workload.mac.band);
}

template <class P>
void describe(P& p, const db::MeasurementRow& r) {
  p.bucket = bucket_of(r.workload);
  p.instance = r.instance.name;
  p.params = r.m.point.params;
  p.hit_rate = r.workload.forced.hit_rate;
  p.mac = mac_label(r);
  p.variant = variant_of(r.workload);
  p.policy = policy_text(r);
}

OneSidedPoint one_sided(const db::MeasurementRow& r) {
  OneSidedPoint p;
  describe(p, r);
  if (r.m.status != db::PointStatus::ok) p.failed = r.m.error.empty() ? "failed" : r.m.error;
  return p;
}

void compare_times(const Side& b, const Side& n, double threshold, Comparison& c) {
  for (const auto& [k, br] : b.latest) {
    const auto it = n.latest.find(k);
    if (it == n.latest.end()) {
      c.only_base.push_back(one_sided(*br));
      continue;
    }
    ComparedPoint p;
    describe(p, *br);
    p.partial = br->m.partial || it->second->m.partial;
    p.base = br->m.stats;
    p.next = it->second->m.stats;
    p.ratio = p.next.median_s / p.base.median_s;
    p.change = classify_change(p.base, p.next, threshold);
    c.points.push_back(std::move(p));
  }
  for (const auto& [k, nr] : n.latest)
    if (!b.latest.count(k)) c.only_new.push_back(one_sided(*nr));
}

// Across devices: MAC/full per interleaved pair, pairs matched by params, workload and cache
// mode (the instance names and timers are the device's own).
struct Pair {
  const db::MeasurementRow* mac = nullptr;
  const db::MeasurementRow* full = nullptr;
};
std::map<std::string, Pair> pairs_of(const Side& s) {
  std::map<std::string, Pair> out;
  for (const auto& [k, r] : s.latest) {
    const std::string pk = r->m.point.params + "|" + r->workload.key() + "|" +
                           (r->m.point.cold ? "cold" : "hot") + "|" + r->m.point.policy;
    Pair& p = out[pk];
    (r->instance.family == Family::full ? p.full : p.mac) = r;
  }
  // Key without the timer, so a CPU pair meets a GPU pair.
  std::map<std::string, Pair> by_work;
  for (auto& [k, p] : out) {
    if (!p.mac || !p.full) continue;
    by_work.try_emplace(k.substr(0, k.rfind('|')), p);
  }
  return by_work;
}

void compare_ratios(const Side& b, const Side& n, double threshold, Comparison& c) {
  const auto bp = pairs_of(b), np = pairs_of(n);
  for (const auto& [k, p] : bp) {
    const auto it = np.find(k);
    if (it == np.end()) {
      c.only_base.push_back(one_sided(*p.mac));
      continue;
    }
    ComparedPoint cp;
    describe(cp, *p.mac);
    const Pair& q = it->second;
    if (q.mac->instance.name != p.mac->instance.name) cp.instance += " -> " + q.mac->instance.name;
    if (policy_text(*q.mac) != cp.policy) cp.policy += " -> " + policy_text(*q.mac);
    cp.partial = p.mac->m.partial || p.full->m.partial || q.mac->m.partial || q.full->m.partial;
    cp.base = mac_over_full(p.mac->m.stats, p.full->m.stats);
    cp.next = mac_over_full(q.mac->m.stats, q.full->m.stats);
    cp.ratio = cp.next.median_s / cp.base.median_s;
    cp.change = classify_change(cp.base, cp.next, threshold);
    c.points.push_back(std::move(cp));
  }
  for (const auto& [k, q] : np)
    if (!bp.count(k)) c.only_new.push_back(one_sided(*q.mac));
}

// Every bucket's break-even of one side, decided afresh; none when nothing can be decided (a
// database of MAC rows without their baselines).
std::map<Bucket, BreakEven> break_evens_of(const db::Store& s, const CompareSide& side) {
  std::map<Bucket, BreakEven> out;
  const Selection sel = select_rows(s, side.device_digest, DeviceFingerprint{});
  for (const BucketDecision& d : decide_loaded(s, sel, load_pairs(s, sel), {}).decisions)
    out[d.bucket] = d.break_even;
  return out;
}

bool inside(double x, const BreakEven& be) {
  const double lo = be.lo.value_or(*be.hit_rate), hi = *be.hit_rate;
  constexpr double eps = 1e-12;
  return (be.lo_closed ? x >= lo - eps : x > lo + eps) && x <= hi + eps;
}

auto order_key(const auto& p) {
  return std::tie(p.bucket, p.instance, p.params, p.hit_rate, p.mac, p.variant, p.policy);
}

}  // namespace

bool break_evens_agree(const BreakEven& a, const BreakEven& b, double resolution) {
  if (!a.hit_rate || !b.hit_rate) return !a.hit_rate && !b.hit_rate && a.status == b.status;
  return std::abs(*a.hit_rate - *b.hit_rate) <= resolution + 1e-12 || inside(*a.hit_rate, b) ||
         inside(*b.hit_rate, a);
}

Comparison compare_stores(const db::Store& base, const db::Store& next, const CompareOptions& o) {
  MACTUNE_REQUIRE(o.threshold >= 0 && o.threshold < 1, "--threshold ", o.threshold,
                  " must be in [0, 1)");
  MACTUNE_REQUIRE(o.resolution >= 0 && o.resolution < 1, "--resolution ", o.resolution,
                  " must be in [0, 1)");
  const Side b = load_side(base, o.base_device, "--base-device");
  const Side n = load_side(next, o.new_device, "--new-device");
  Comparison c;
  c.base = b.info;
  c.next = n.info;
  c.threshold = o.threshold;
  c.cross_device = b.info.device.key() != n.info.device.key();
  if (c.cross_device)
    compare_ratios(b, n, o.threshold, c);
  else
    compare_times(b, n, o.threshold, c);
  c.resolution = o.resolution;
  const auto base_be = break_evens_of(base, b.info), new_be = break_evens_of(next, n.info);
  for (const auto& [bucket, be] : base_be) {
    const auto it = new_be.find(bucket);
    if (it == new_be.end()) continue;
    c.break_evens.push_back(
        {bucket, be, it->second, break_evens_agree(be, it->second, o.resolution)});
  }
  for (const auto& [k, r] : b.failed) c.only_base.push_back(one_sided(*r));
  for (const auto& [k, r] : n.failed) c.only_new.push_back(one_sided(*r));
  const auto less = [](const auto& x, const auto& y) { return order_key(x) < order_key(y); };
  std::sort(c.points.begin(), c.points.end(), less);
  std::sort(c.only_base.begin(), c.only_base.end(), less);
  std::sort(c.only_new.begin(), c.only_new.end(), less);
  return c;
}

std::string compare_summary(const Comparison& c) {
  std::ostringstream o;
  o << "compare: " << c.points.size() << " points";
  if (c.cross_device) o << " (MAC/full ratios, two devices)";
  o << ": " << c.count(Change::same) << " SAME, " << c.count(Change::faster) << " FASTER, "
    << c.count(Change::slower) << " SLOWER, " << c.count(Change::ambiguous) << " AMBIGUOUS; "
    << c.only_base.size() << " only in BASE, " << c.only_new.size() << " only in NEW";
  return o.str();
}

std::string break_even_summary(const Comparison& c) {
  if (c.break_evens.empty()) return "";
  const auto agree = std::count_if(c.break_evens.begin(), c.break_evens.end(),
                                   [](const ComparedBreakEven& b) { return b.agree; });
  std::ostringstream o;
  o << "break-even: " << c.break_evens.size() << " buckets in both, " << agree << " agree (within "
    << format_number(c.resolution) << " or inside the other's bracket)";
  return o.str();
}

namespace {

std::string time_text(double v, bool ratio) {
  std::ostringstream o;
  if (ratio) {
    o << std::fixed << std::setprecision(3) << v;
  } else if (v >= 1e-3) {
    o << std::fixed << std::setprecision(3) << v * 1e3 << " ms";
  } else {
    o << std::fixed << std::setprecision(1) << v * 1e6 << " us";
  }
  return o.str();
}

std::string bucket_title(const Bucket& b) {
  return b.shape.text() + ", batch " + std::to_string(b.batch) + ", context " +
         std::to_string(b.context);
}

std::string side_text(const char* what, const CompareSide& s) {
  std::ostringstream o;
  o << "- " << what << ": `" << s.path << "`: " << s.device.name << " (" << s.device.backend << ", "
    << s.device.arch << ", device " << s.device_digest << "), " << s.rows << " rows from "
    << s.builds << " build(s) and " << s.runs << " run(s)";
  if (s.superseded) o << "; " << s.superseded << " older rows of re-measured points ignored";
  o << "\n";
  return o.str();
}

template <class P>
std::string what_text(const P& p, bool variants) {
  std::string w = "`" + p.instance + "` " + (p.params.empty() ? "-" : p.params) +
                  " hit=" + format_number(p.hit_rate);
  if (!p.mac.empty()) w += " " + p.mac;
  if (variants) w += " " + p.variant;
  if constexpr (requires { p.partial; })
    if (p.partial) w += " (partial)";
  return w;
}

}  // namespace

std::string compare_markdown(const Comparison& c) {
  std::ostringstream o;
  o << "# mactune compare\n\n" << side_text("BASE", c.base) << side_text("NEW", c.next) << "\n";
  if (c.cross_device)
    o << "**Two different devices**: their times are not comparable, so each point compares "
         "the MAC time over the full baseline's time of its interleaved pair (lower is better "
         "for MAC), matched by workload and launch params.\n\n";
  o << "Rule: SAME when the medians differ by at most " << format_number(c.threshold * 100)
    << "%; otherwise FASTER / SLOWER when NEW's interquartile interval lies wholly below / above "
       "BASE's, AMBIGUOUS when they overlap. Ratio = NEW median / BASE median.\n\n";
  const bool ratio = c.cross_device;
  const char* unit = ratio ? "MAC/full" : "median";
  for (std::size_t i = 0; i < c.points.size();) {
    const Bucket& b = c.points[i].bucket;
    std::size_t j = i;
    std::set<std::string> variants;
    while (j < c.points.size() && c.points[j].bucket == b) variants.insert(c.points[j++].variant);
    std::size_t slower = 0;
    for (std::size_t k = i; k < j; ++k) slower += c.points[k].change == Change::slower;
    o << "## " << bucket_title(b) << (slower ? " (" + std::to_string(slower) + " SLOWER)" : "")
      << "\n\n| point | BASE " << unit << " [q1, q3] | NEW " << unit
      << " [q1, q3] | ratio | verdict |\n|---|---:|---:|---:|---|\n";
    for (; i < j; ++i) {
      const ComparedPoint& p = c.points[i];
      o << "| " << what_text(p, variants.size() > 1) << " | " << time_text(p.base.median_s, ratio)
        << " [" << time_text(p.base.q1_s, ratio) << ", " << time_text(p.base.q3_s, ratio) << "] | "
        << time_text(p.next.median_s, ratio) << " [" << time_text(p.next.q1_s, ratio) << ", "
        << time_text(p.next.q3_s, ratio) << "] | " << std::fixed << std::setprecision(3) << p.ratio
        << " | "
        << (p.change == Change::same ? "SAME" : "**" + std::string(change_name(p.change)) + "**")
        << " |\n";
    }
    o << "\n";
  }
  auto list = [&](const char* title, const std::vector<OneSidedPoint>& v) {
    if (v.empty()) return;
    o << "## " << title << " (" << v.size() << ")\n\n";
    for (const auto& p : v)
      o << "- " << bucket_title(p.bucket) << ": " << what_text(p, true) << " " << p.policy
        << (p.failed.empty() ? "" : " — failed: " + p.failed) << "\n";
    o << "\n";
  };
  list("Only in BASE", c.only_base);
  list("Only in NEW", c.only_new);
  if (!c.break_evens.empty()) {
    o << "## Break-even\n\nEach database decided afresh from its own rows. Agree: within "
      << format_number(c.resolution)
      << " of each other, or one inside the other's bracket ((lo, hi]; [lo, hi] where the sides "
         "tie at lo).\n\n| bucket | BASE | NEW | |\n|---|---|---|---|\n";
    for (const ComparedBreakEven& b : c.break_evens)
      o << "| " << bucket_title(b.bucket) << " | " << break_even_text(b.base) << " | "
        << break_even_text(b.next) << " | " << (b.agree ? "agree" : "**differ**") << " |\n";
    o << "\n";
  }
  o << compare_summary(c) << "\n";
  if (!c.break_evens.empty()) o << break_even_summary(c) << "\n";
  return o.str();
}

}  // namespace mactune::tuner
