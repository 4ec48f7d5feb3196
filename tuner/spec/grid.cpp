#include "tuner/spec/grid.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "kernels/cpu/thread_pool.h"
#include "kernels/error.h"
#include "kernels/one_line.h"
#include "tuner/spec/axes.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {

Launch parse_launch(Backend backend, std::string_view text) {
  return parse_launch_params(backend, text);
}

Params to_params(const Launch& launch) {
  return Params(launch.begin(), launch.end());
}

Launch TunePoint::launch() const {
  return backend == Backend::cuda ? launch_params_of(cuda) : launch_params_of(cpu);
}

Bucket bucket_of(const TunePoint& p) {
  return Bucket::of(p.shape, p.context);
}

namespace {

// The grid as an odometer over "dimensions": a lone axis, or a zip group (one shared index).
struct Dim {
  std::vector<std::size_t> axes;  // indices into spec.axes
  std::size_t size = 0;
};

std::vector<Dim> dims_of(const Spec& spec) {
  std::vector<Dim> dims;
  std::map<std::string, std::size_t> zip_of;  // axis name -> zip group
  for (std::size_t z = 0; z < spec.zips.size(); ++z)
    for (const auto& a : spec.zips[z].axes) zip_of[a] = z;
  std::map<std::size_t, std::size_t> dim_of_zip;
  for (std::size_t i = 0; i < spec.axes.size(); ++i) {
    const auto z = zip_of.find(spec.axes[i].name);
    if (z == zip_of.end()) {
      dims.push_back({{i}, spec.axes[i].values.size()});
    } else if (auto d = dim_of_zip.find(z->second); d != dim_of_zip.end()) {
      dims[d->second].axes.push_back(i);
    } else {
      dim_of_zip[z->second] = dims.size();
      dims.push_back({{i}, spec.axes[i].values.size()});
    }
  }
  return dims;
}

// The point at one odometer position: every axis's value set through its field.
TunePoint make_point(const Spec& spec, const std::vector<std::size_t>& idx) {
  TunePoint p;
  p.backend = spec.backend;
  for (std::size_t i = 0; i < spec.axes.size(); ++i) {
    const AxisDef* def = find_axis_def(spec.axes[i].section, spec.axes[i].name);
    MACTUNE_CHECK(def != nullptr, "no axis ", spec.axes[i].name);
    def->field.set(p, spec.axes[i].values[idx[i]].value);
  }
  p.forced.enabled = true;
  p.forced.seed = spec.seed;
  if (sweeps_skip_ratio(spec)) p.forced.quota = ForcedQuota::skip_ratio;
  return p;
}

}  // namespace

std::vector<TunePoint> expand_grid(const Spec& spec, std::vector<std::string>* unreachable) {
  std::vector<std::string> unreachable_why;
  const std::vector<Dim> dims = dims_of(spec);
  std::vector<std::size_t> counter(dims.size(), 0);
  std::vector<std::size_t> idx(spec.axes.size(), 0);
  std::vector<std::size_t> kept_by(spec.constraints.size(), 0);
  std::vector<TunePoint> points;
  const auto qi = static_cast<std::size_t>(&spec.axis("q_heads") - spec.axes.data());
  const auto kvi = static_cast<std::size_t>(&spec.axis("kv_heads") - spec.axes.data());
  std::size_t total = 1;
  for (const Dim& d : dims) total *= d.size;
  if (total > 10'000'000)
    input_error(spec.file, ": the grid has ", total, " points before constraints");
  for (std::size_t n = 0; n < total; ++n) {
    // Decode n into the odometer: the last dimension turns fastest.
    std::size_t rest = n;
    for (std::size_t d = dims.size(); d-- > 0;) {
      counter[d] = rest % dims[d].size;
      rest /= dims[d].size;
      for (std::size_t a : dims[d].axes) idx[a] = counter[d];
    }
    auto lookup = [&](const std::string& name) -> std::optional<double> {
      if (name == "G")
        return spec.axes[qi].values[idx[qi]].num / spec.axes[kvi].values[idx[kvi]].num;
      for (std::size_t i = 0; i < spec.axes.size(); ++i)
        if (spec.axes[i].name == name) return spec.axes[i].values[idx[i]].num;
      return std::nullopt;
    };
    bool ok = true;
    for (std::size_t c = 0; c < spec.constraints.size(); ++c) {
      if (spec.constraints[c].expr.holds(lookup))
        ++kept_by[c];
      else
        ok = false;
    }
    if (!ok) continue;
    TunePoint p = make_point(spec, idx);
    // A skip ratio the step cannot reach exactly is skipped like a failed constraint, with
    // its reason (never measured at some other ratio).
    if (const std::string why = skip_unreachable(p); !why.empty()) {
      unreachable_why.push_back(unreachable_line(p, why));
      continue;
    }
    p.index = points.size();
    points.push_back(std::move(p));
  }
  for (std::size_t c = 0; c < spec.constraints.size(); ++c)
    if (kept_by[c] == 0)
      input_error(spec.file, ':', spec.constraints[c].line, ": constraints[", c, "]: '",
                  detail::one_line(spec.constraints[c].expr.text()),
                  "' is impossible: it rejects every point of the grid");
  if (points.empty() && !unreachable_why.empty())
    input_error(spec.file, ':', spec.axis("skip_ratio").line,
                ": workload.skip_ratio: no point of the grid can reach its skip ratio exactly (",
                unreachable_why.size(), " points; the first: ", unreachable_why.front(), ")");
  if (points.empty())
    input_error(spec.file, ':', spec.constraints.empty() ? 1 : spec.constraints.front().line,
                ": constraints: no point of the grid satisfies all constraints together");
  if (unreachable) *unreachable = std::move(unreachable_why);
  for (const TunePoint& p : points) {
    if (const std::optional<FieldProblem> bad = shape_problem(p.shape)) {
      // Reported at the line of the axis that set the field; only a head-count mismatch gets
      // the zip hint.
      const Axis* at = spec.find_axis(bad->field);
      const bool heads = bad->field == "kv_heads" && p.shape.kv_heads >= 1 &&
                         p.shape.q_heads % p.shape.kv_heads != 0;
      input_error(spec.file, ':', at ? at->line : spec.axis("kv_heads").line, ": workload",
                  at ? "." + bad->field : std::string(), ": ", bad->why,
                  heads ? " (zip the head axes or add a constraint such as "
                          "'q_heads % kv_heads == 0')"
                        : "");
    }
    const std::string mac_why = validate(p.mac);
    if (!mac_why.empty()) input_error(spec.file, ':', spec.axis("K").line, ": mac: ", mac_why);
    // The machine's bound on worker threads (kernels/cpu/thread_pool.h), before any point runs.
    if (p.backend == Backend::cpu) {
      try {
        cpu::check_worker_threads(p.cpu.threads);
      } catch (const InputError& e) {
        input_error(spec.file, ':', std::max(spec.axis("threads").line, 1), ": kernels.cpu.",
                    e.what());
      }
    }
    // A hit at step m reuses the ring entry of a position p in [m - K, m) whose summary is not
    // empty: p >= r (DESIGN.md section 1). At m = context <= r there is no such p, so every
    // step misses, and a point would be stored as hit rate h measured with no hit at all.
    if (p.context <= p.mac.band)
      input_error(spec.file, ':', std::max(spec.axis("context").line, 1),
                  ": workload.context: context ", p.context, " with r = ", p.mac.band,
                  ": no step can hit (a hit reuses a position p >= r before m = context); keep "
                  "such points out with the constraint 'r < context'");
    // Below min_context every step is a plain miss (DESIGN.md section 1): forced hits there
    // would be stored as a hit rate no step had.
    const bool hits_asked =
        p.forced.quota == ForcedQuota::skip_ratio ? p.forced.skip_ratio > 0 : p.forced.hit_rate > 0;
    if (hits_asked && p.context < p.mac.min_context)
      input_error(spec.file, ':', std::max(spec.axis("min_context").line, 1),
                  ": mac.min_context: context ", p.context,
                  " is below min_context = ", p.mac.min_context,
                  ": its steps are all misses, but the point asks for hits; keep such points out "
                  "with the constraint 'context >= min_context'");
  }
  return points;
}

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int i = -1, n = 0;
  bool ok = slash != std::string::npos;
  if (ok) {
    const char* b = text.data();
    ok = std::from_chars(b, b + slash, i).ptr == b + slash &&
         std::from_chars(b + slash + 1, b + text.size(), n).ptr == b + text.size();
  }
  if (!ok || n < 1 || i < 0 || i >= n)
    input_error("--shard '", text, "': expected i/N with 0 <= i < N (e.g. 0/4 ... 3/4)");
  return {i, n};
}

std::vector<TunePoint> shard_points(const std::vector<TunePoint>& points, int i, int n) {
  std::vector<TunePoint> out;
  for (const TunePoint& p : points)
    if (static_cast<int>(p.index % static_cast<std::size_t>(n)) == i) out.push_back(p);
  return out;
}

}  // namespace mactune::tuner
