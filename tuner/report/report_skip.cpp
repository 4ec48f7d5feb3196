#include "tuner/report/report_skip.h"

#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "tuner/report/report_text.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {
namespace {

const SkipPoint* at_skip(const BucketDecision& d, double s) {
  for (const SkipPoint& p : d.skip_curve)
    if (p.skip_ratio == s) return &p;
  return nullptr;
}

}  // namespace

bool has_skip_curve(const std::vector<BucketDecision>& ds) {
  for (const auto& d : ds)
    if (!d.skip_curve.empty()) return true;
  return false;
}

svg::Chart speedup_vs_batch(
    const std::string& what, const std::vector<const BucketDecision*>& decisions,
    const SpeedupLevels& levels,
    const std::function<std::optional<double>(const BucketDecision&, double)>& speedup) {
  svg::Chart c;
  c.title = what + ": " + (decisions.empty() ? std::string() : decisions[0]->bucket.shape.text());
  c.x_label = "batch";
  c.y_label = "speedup (full / MAC)";
  c.x_scale = svg::Scale::log2;
  c.y_scale = svg::Scale::log10;
  std::map<long long, std::vector<const BucketDecision*>> by_context;
  for (const BucketDecision* d : decisions) by_context[d->bucket.context].push_back(d);
  for (const auto& [ctx, list] : by_context) {
    svg::Panel p;
    p.title = "context " + svg::tick_label(static_cast<double>(ctx));
    p.hlines = {1.0};
    for (double level : levels.lines) {
      svg::Series line;
      line.label = levels.label + format_number(level);
      std::map<int, double> pts;
      for (const BucketDecision* d : list)
        if (const auto v = speedup(*d, level)) pts[d->bucket.batch] = *v;
      for (const auto& [b, v] : pts) {
        line.x.push_back(b);
        line.y.push_back(v);
      }
      p.series.push_back(std::move(line));
    }
    svg::Series probes;
    probes.label = levels.markers_label;
    probes.line = false;
    probes.marker_radius = 2;
    probes.color = "#555555";
    for (double level : levels.markers)
      for (const BucketDecision* d : list)
        if (const auto v = speedup(*d, level)) {
          probes.x.push_back(d->bucket.batch);
          probes.y.push_back(*v);
        }
    if (!probes.x.empty()) p.series.push_back(std::move(probes));
    c.panels.push_back(std::move(p));
  }
  return c;
}

svg::Chart skip_speedup_chart(const std::vector<BucketDecision>& ds) {
  std::vector<const BucketDecision*> with_skip;
  std::set<double> ratios;
  for (const auto& d : ds) {
    if (d.skip_curve.empty()) continue;
    with_skip.push_back(&d);
    for (const SkipPoint& p : d.skip_curve) ratios.insert(p.skip_ratio);
  }
  return speedup_vs_batch("MAC speedup over full attention at forced KV skip ratios", with_skip,
                          {std::vector<double>(ratios.begin(), ratios.end()), "skip "},
                          [](const BucketDecision& d, double s) -> std::optional<double> {
                            if (const SkipPoint* sp = at_skip(d, s)) return sp->speedup;
                            return std::nullopt;
                          });
}

std::string skip_markdown(const std::vector<BucketDecision>& ds, const std::string& shape) {
  if (!has_skip_curve(ds)) return "";
  std::ostringstream o;
  o << "### Speedup at forced KV skip ratios\n\n![speedup by skip ratio](skip_" << shape
    << ".svg)\n\n"
    << "Each step skips exactly round(s x sum of kv_len) KV tokens (forced hits of whole "
       "(request, KV head) groups, lags solved; docs/spec.md `skip_ratio`); `measured` is 1 - "
       "KV tokens read / total from the MAC step's own counts.\n\n"
    << "| context | batch | skip ratio | measured | MAC | full | speedup |\n"
    << "|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<long long, std::vector<const BucketDecision*>> breaks;
  for (const auto& d : ds)
    for (const SkipPoint& p : d.skip_curve) {
      o << "| " << d.bucket.context << " | " << d.bucket.batch << " | "
        << format_number(p.skip_ratio) << " | ";
      if (p.measured)
        o << std::fixed << std::setprecision(6) << *p.measured;
      else
        o << "?";
      o << " | " << std::fixed << std::setprecision(3) << p.mac_median_s * 1e3 << " ms | "
        << p.full_median_s * 1e3 << " ms | " << std::setprecision(2) << p.speedup << "x "
        << verdict_mark(p.verdict) << " |\n";
    }
  o << "\nBreak-even skip ratio (the lowest measured ratio from which MAC is clearly faster at "
       "every measured ratio above it):\n\n| context | batch | break-even skip ratio |\n"
       "|---:|---:|---|\n";
  for (const auto& d : ds) {
    if (d.skip_curve.empty()) continue;
    o << "| " << d.bucket.context << " | " << d.bucket.batch << " | "
      << break_even_text(break_even_on(d, BreakEvenAxis::skip_ratio)) << " |\n";
  }
  o << '\n';
  return o.str();
}

std::string unreachable_markdown(const std::vector<std::string>& unreachable) {
  if (unreachable.empty()) return "";
  std::ostringstream o;
  o << "## Unreachable skip ratios (not measured)\n\n"
    << "These points of the spec cannot skip exactly their ratio of the KV (a hit group reads "
       "its lag, 1 to K, plus the band r); `tune` left them out:\n\n";
  for (const std::string& u : unreachable) o << "- " << u << '\n';
  o << '\n';
  return o.str();
}

}  // namespace mactune::tuner
