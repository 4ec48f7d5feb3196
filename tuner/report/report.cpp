#include "tuner/report/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "kernels/file_io.h"
#include "tuner/report/report_skip.h"
#include "tuner/report/report_text.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {
namespace {

std::string settings_text(const Choice& c) {
  return c.config.mac ? fields_text(*c.config.mac) : "";
}

std::map<std::string, std::vector<BucketDecision>> by_shape(const std::vector<BucketDecision>& ds) {
  std::map<std::string, std::vector<BucketDecision>> out;
  for (const auto& d : ds) out[d.bucket.shape.text()].push_back(d);
  for (auto& [shape, list] : out)  // tables read context by context
    std::stable_sort(list.begin(), list.end(),
                     [](const BucketDecision& a, const BucketDecision& b) {
                       return std::pair(a.bucket.context, a.bucket.batch) <
                              std::pair(b.bucket.context, b.bucket.batch);
                     });
  return out;
}

std::set<double> hit_rates(const std::vector<BucketDecision>& ds) {
  std::set<double> h;
  for (const auto& d : ds)
    for (const auto& p : d.break_even.curve) h.insert(p.hit_rate);
  return h;
}

const CurvePoint* at(const BucketDecision& d, double h) {
  for (const auto& p : d.break_even.curve)
    if (p.hit_rate == h) return &p;
  return nullptr;
}

bool has_axis(const BucketDecision& d, BreakEvenAxis axis) {
  const auto axes = break_even_axes(d);
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

// The hit rates measured at every bucket of a shape that has a hit-rate curve: the spec's grid
// (the search probes each bucket at rates of its own).
std::set<double> grid_hit_rates(const std::vector<BucketDecision>& ds) {
  std::set<double> grid = hit_rates(ds);
  for (const auto& d : ds)
    if (!d.break_even.curve.empty()) std::erase_if(grid, [&](double h) { return !at(d, h); });
  return grid;
}

}  // namespace

svg::Chart speedup_chart(const std::vector<BucketDecision>& ds) {
  std::vector<const BucketDecision*> all;
  for (const auto& d : ds) all.push_back(&d);
  const std::set<double> hs = hit_rates(ds), grid = grid_hit_rates(ds);
  std::vector<double> probes;
  std::set_difference(hs.begin(), hs.end(), grid.begin(), grid.end(), std::back_inserter(probes));
  return speedup_vs_batch(
      "MAC speedup over full attention", all,
      {std::vector<double>(grid.begin(), grid.end()), "hit rate ", probes, "break-even probes"},
      [](const BucketDecision& d, double h) -> std::optional<double> {
        if (const CurvePoint* cp = at(d, h)) return cp->speedup;
        return std::nullopt;
      });
}

svg::Chart break_even_chart(const std::vector<BucketDecision>& ds, const ReportModel& model) {
  svg::Chart c;
  c.title = "Break-even hit rate: " + (ds.empty() ? std::string() : ds[0].bucket.shape.text());
  c.x_label = "context (tokens)";
  c.y_label = "break-even hit rate";
  c.x_scale = svg::Scale::log2;
  c.y_min = 0;
  c.y_max = 1.05;  // room above 1 for the hollow "ambiguous" / "never" markers
  c.columns = 1;
  svg::Panel p;
  p.title = "band: bracket; hollow: ambiguous / never";
  std::map<int, svg::Series> by_batch;
  std::map<int, const BucketDecision*> first_of_batch;  // smallest context
  long long lo_ctx = 0, hi_ctx = 0;
  for (const auto& d : ds) {
    svg::Series& s = by_batch[d.bucket.batch];
    s.label = "batch " + std::to_string(d.bucket.batch);
    if (d.break_even.hit_rate) {
      s.x.push_back(d.bucket.context);
      s.y.push_back(*d.break_even.hit_rate);
      s.band_lo.push_back(d.break_even.lo.value_or(*d.break_even.hit_rate));
      s.band_hi.push_back(*d.break_even.hit_rate);
    } else {
      s.off_scale.emplace_back(d.bucket.context, std::string(name_of(d.break_even.status)));
    }
    auto [it, fresh] = first_of_batch.try_emplace(d.bucket.batch, &d);
    if (!fresh && d.bucket.context < it->second->bucket.context) it->second = &d;
    lo_ctx = lo_ctx ? std::min(lo_ctx, d.bucket.context) : d.bucket.context;
    hi_ctx = std::max(hi_ctx, d.bucket.context);
  }
  for (auto& [b, s] : by_batch) p.series.push_back(std::move(s));
  if (model.models && model.rows && lo_ctx > 0) {
    // The model's break-even at 4 contexts an octave, from the smallest measured context to 4x
    // the largest: dashed, in the colour of its batch; a gap where MAC never pays off.
    for (const auto& [batch, d] : first_of_batch) {
      const ModelRow* t = chosen_mac_row(*d, *model.rows);
      if (!t) continue;
      svg::Series s;
      s.label = "batch " + std::to_string(batch) + " (model)";
      s.color_of = "batch " + std::to_string(batch);
      s.dashed = true;
      s.markers = false;
      for (double ctx = static_cast<double>(lo_ctx);
           ctx <= 4.0 * static_cast<double>(hi_ctx) * 1.0001; ctx *= std::pow(2.0, 0.25)) {
        StepSpec step = t->step;
        step.context = static_cast<int>(std::lround(ctx));
        if (step.context <= step.mac.band) continue;
        const auto be = predicted_break_even(model.models->mac, model.models->full, step, 0.01);
        s.x.push_back(step.context);
        s.y.push_back(be ? *be : std::numeric_limits<double>::quiet_NaN());
      }
      p.series.push_back(std::move(s));
    }
  }
  c.panels.push_back(std::move(p));
  return c;
}

std::string report_markdown(const Decided& d, const std::string& source, const ReportModel& model) {
  std::ostringstream o;
  o << "# mactune report: " << d.device.name << "\n\n";
  o << "- device: " << d.device.backend << ", " << d.device.name << " (" << d.device.compute_units
    << " units, " << d.device.arch << (d.device.runtime.empty() ? "" : ", " + d.device.runtime)
    << "), fingerprint `" << d.device.digest() << "`\n";
  o << "- source: `" << source << "`, build row " << d.selection.build_id << ", timer `"
    << d.selection.policy << "`, " << (d.selection.cold ? "cold" : "hot") << " caches\n";
  o << "- points: " << d.loaded.pairs.size() << " complete (MAC + baseline)";
  if (d.loaded.incomplete) o << ", " << d.loaded.incomplete << " incomplete";
  if (d.loaded.failed) o << ", " << d.loaded.failed << " failed rows";
  if (d.loaded.split_runs) o << ", " << d.loaded.split_runs << " pairs split across runs";
  o << "\n- speedup = full median / MAC median, both measured interleaved in one run. ✓ MAC "
       "clearly faster (its q3 < the baseline's q1), ✗ clearly slower, ≈ too close to call. "
       "Break-even: the smallest hit rate from which MAC is clearly faster at every measured "
       "hit rate above it, with its bracket (lo, hi]: lo the highest measured hit rate below it "
       "at which MAC is not clearly faster; [lo, hi] when the two could not be told apart at lo "
       "(MAC may pay off there already).\n\n";
  for (const auto& [shape, ds] : by_shape(d.decisions)) {
    const auto hs = hit_rates(ds);
    o << "## " << shape << "\n\n";
    if (!hs.empty()) {  // (a spec that sweeps skip ratios has no hit-rate curve)
      o << "![speedup](speedup_" << shape << ".svg)\n\n![break-even](breakeven_" << shape
        << ".svg)\n\n";
      o << "### Speedup of the chosen MAC config\n\n| context | batch |";
      for (double h : hs) o << " hit " << format_number(h) << " |";
      o << " break-even |\n|---:|---:|";
      for (std::size_t i = 0; i < hs.size(); ++i) o << "---:|";
      o << "---|\n";
      for (const auto& b : ds) {
        if (!has_axis(b, BreakEvenAxis::hit_rate)) continue;
        o << "| " << b.bucket.context << " | " << b.bucket.batch << " |";
        for (double h : hs) {
          const CurvePoint* p = at(b, h);
          o << ' ' << (p ? speedup_text(p->speedup) + " " + verdict_mark(p->verdict) : "") << " |";
        }
        o << ' ' << break_even_text(break_even_on(b, BreakEvenAxis::hit_rate)) << " |\n";
      }
      o << '\n';
    }
    o << skip_markdown(ds, shape);
    o << "### Best configurations (tie tolerance: incumbent, then simpler)\n\n"
      << "| context | batch | MAC instance | launch | MAC settings | score | ties | why | full "
         "instance | launch | full median |\n|---:|---:|---|---|---|---:|---:|---|---|---|---:|\n";
    for (const auto& b : ds)
      o << "| " << b.bucket.context << " | " << b.bucket.batch << " | " << b.mac.config.instance
        << " | " << launch_text(b.mac.config.launch) << " | " << settings_text(b.mac) << " | "
        << std::fixed << std::setprecision(3) << b.mac.score << " | " << b.mac.ties.size() << " | "
        << b.mac.reason << " | " << b.full.config.instance << " | "
        << launch_text(b.full.config.launch) << " | " << b.full.score * 1e3 << " ms |\n";
    // The smallest context at which MAC wins, per batch and hit rate.
    std::map<int, std::map<double, long long>> min_ctx;
    for (const auto& b : ds)
      for (const auto& p : b.break_even.curve)
        if (p.verdict == Verdict::faster) {
          auto [it, fresh] = min_ctx[b.bucket.batch].try_emplace(p.hit_rate, b.bucket.context);
          if (!fresh) it->second = std::min(it->second, b.bucket.context);
        }
    if (hs.empty()) {
      o << '\n';
      continue;
    }
    o << "\n### Smallest measured context at which MAC is clearly faster\n\n| batch |";
    for (double h : hs) o << " hit " << format_number(h) << " |";
    o << "\n|---:|";
    for (std::size_t i = 0; i < hs.size(); ++i) o << "---:|";
    o << '\n';
    std::set<int> batches;
    for (const auto& b : ds) batches.insert(b.bucket.batch);
    for (int bt : batches) {
      o << "| " << bt << " |";
      for (double h : hs) {
        const auto& m = min_ctx[bt];
        o << ' ' << (m.count(h) ? std::to_string(m.at(h)) : "never") << " |";
      }
      o << '\n';
    }
    o << '\n';
  }
  o << unreachable_markdown(d.unreachable);
  if (model.models && model.rows) o << model_markdown(*model.models, *model.rows) << '\n';
  return wrap_markdown(o.str());
}

std::vector<std::string> write_report(const db::Store& store, const Decided& d,
                                      const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) input_error(dir, ": cannot create the report directory: ", ec.message());
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    write_file_atomically(path, text, "report file");
    written.push_back(path);
  };
  // The cost model of the device, when its rows can be fitted (both families measured).
  const std::vector<ModelRow> rows = load_model_rows(store, d.selection);
  const std::optional<DeviceModels> models = try_fit_device_models(rows, d.device);
  const ReportModel rm{models ? &*models : nullptr, &rows};
  write("report.md", report_markdown(d, store.path(), rm));
  for (const auto& [shape, ds] : by_shape(d.decisions)) {
    if (!hit_rates(ds).empty()) {
      write("speedup_" + shape + ".svg", svg::render(speedup_chart(ds)));
      write("breakeven_" + shape + ".svg", svg::render(break_even_chart(ds, rm)));
    }
    if (has_skip_curve(ds)) write("skip_" + shape + ".svg", svg::render(skip_speedup_chart(ds)));
  }
  return written;
}

}  // namespace mactune::tuner
