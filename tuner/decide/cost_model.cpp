#include "tuner/decide/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "kernels/error.h"
#include "kernels/plan_model.h"
#include "kernels/stats.h"

namespace mactune::tuner {

std::string_view term_name(Term t) {
  switch (t) {
    case Term::fixed:
      return "fixed";
    case Term::mac_step:
      return "mac_step";
    case Term::kv_bytes:
      return "kv_bytes";
    case Term::ring_bytes:
      return "ring_bytes";
    case Term::groups:
      return "groups";
    case Term::items:
      return "items";
  }
  return "?";
}

std::string_view term_unit(Term t) {
  switch (t) {
    case Term::fixed:
    case Term::mac_step:
      return "s/step";
    case Term::kv_bytes:
    case Term::ring_bytes:
      return "s/B";
    case Term::groups:
      return "s/group";
    case Term::items:
      return "s/item";
  }
  return "?";
}

StepFeatures step_features(const StepSpec& s) {
  const Problem& shape = s.shape;
  const int G = shape.group_size(), Hq = shape.q_heads, Hkv = shape.kv_heads;
  const int n = shape.batch, m = s.context;
  MACTUNE_CHECK(n >= 1 && m >= 0 && G >= 1, "step_features: batch ", n, ", context ", m);
  // The step index of the tuner's step: prefilled requests, not advanced (sessions count
  // advanced steps; the tuner's step is always the first).
  constexpr std::uint64_t step = 0;
  StepFeatures f;
  std::vector<GroupInfo> groups;
  std::vector<GroupSpan> spans;
  std::vector<HeadDecision> d(static_cast<std::size_t>(Hq));
  for (int b = 0; b < n; ++b) {
    for (int h = 0; h < Hq; ++h) {
      HeadDecision& hd = d[static_cast<std::size_t>(h)];
      hd = HeadDecision{};
      if (!s.mac_enabled || m < s.mac.min_context) continue;
      hd.eligible = true;
      // As the engines' forced override (kernels/cpu/session_step.cpp, reference.h): the
      // prefilled ring holds [m - K, m), each with a summary from p >= r, which
      // forced_max_lag keeps p inside, so a lag >= 1 always finds a valid entry.
      const ForcedSite at{b, n, h, Hq, Hkv, m, static_cast<long long>(b) * (m + 1)};
      const ForcedChoice c = forced_choice(s.forced, step, at, s.mac.ring_capacity, s.mac.band);
      hd.hit = c.hit;
      hd.p = hd.hit ? m - c.lag : -1;
      hd.start = hd.hit ? cache_end(hd.p, s.mac.band) : 0;
    }
    // group_hits: the engines' rule (kernels/stats.h), after the match, before the plan.
    if (s.mac.group_hits)
      for (int g = 0; g < Hkv; ++g) {
        const std::span<HeadDecision> group(d.data() + static_cast<std::size_t>(g) * G,
                                            static_cast<std::size_t>(G));
        if (!group_keeps_hits(group))
          for (HeadDecision& hd : group) demote_to_miss(hd);
      }
    const std::size_t first = groups.size();
    account_request(shape, s.mac, m, d.data(), groups, f.stats, s.mac_enabled);
    for (int g = 0; g < Hkv; ++g) {
      const GroupInfo& gi = groups[first + static_cast<std::size_t>(g)];
      GroupSpan span;
      span.batch_index = b;
      span.kv_head = g;
      span.kv_len = gi.kv_len;
      span.begin = gi.begin;
      span.cache_end = s.mac_enabled ? std::max(cache_end(m, s.mac.band), gi.begin) : gi.begin;
      spans.push_back(span);
    }
  }
  const HostPlan plan = make_plan(spans, s.limits);
  f.x[int(Term::fixed)] = 1.0;
  f.x[int(Term::mac_step)] = s.mac_enabled ? 1.0 : 0.0;
  f.x[int(Term::kv_bytes)] = static_cast<double>(f.stats.kv_bytes_read);
  f.x[int(Term::ring_bytes)] = static_cast<double>(f.stats.ring_bytes_read);
  f.x[int(Term::groups)] = static_cast<double>(spans.size());
  f.x[int(Term::items)] = static_cast<double>(plan.choice.items);
  return f;
}

double CostModel::predict(const StepFeatures& f) const {
  double t = 0;
  for (int i = 0; i < kTerms; ++i)
    t += coef[static_cast<std::size_t>(i)] * f.x[static_cast<std::size_t>(i)];
  return t;
}

namespace {

// Least squares min |A x - b| by Householder QR (A: rows x cols, row-major, rows >= cols).
// Returns nullopt when A is rank deficient (a column that is a combination of the others).
std::optional<std::vector<double>> least_squares(std::vector<double> a, std::size_t rows,
                                                 std::size_t cols, std::vector<double> b) {
  if (rows < cols) return std::nullopt;
  auto at = [&](std::size_t r, std::size_t c) -> double& { return a[r * cols + c]; };
  double scale = 0;
  for (double v : a) scale = std::max(scale, std::abs(v));
  for (std::size_t k = 0; k < cols; ++k) {
    double norm = 0;
    for (std::size_t r = k; r < rows; ++r) norm += at(r, k) * at(r, k);
    norm = std::sqrt(norm);
    if (norm <= 1e-12 * std::max(scale, 1e-300)) return std::nullopt;
    const double alpha = at(k, k) > 0 ? -norm : norm;
    // v = x - alpha e1, stored in place; H = I - 2 v v^T / (v^T v).
    at(k, k) -= alpha;
    double vv = 0;
    for (std::size_t r = k; r < rows; ++r) vv += at(r, k) * at(r, k);
    for (std::size_t c = k + 1; c < cols; ++c) {
      double dot = 0;
      for (std::size_t r = k; r < rows; ++r) dot += at(r, k) * at(r, c);
      const double f = 2 * dot / vv;
      for (std::size_t r = k; r < rows; ++r) at(r, c) -= f * at(r, k);
    }
    double dot = 0;
    for (std::size_t r = k; r < rows; ++r) dot += at(r, k) * b[r];
    const double f = 2 * dot / vv;
    for (std::size_t r = k; r < rows; ++r) b[r] -= f * at(r, k);
    at(k, k) = alpha;  // R's diagonal
  }
  std::vector<double> x(cols);
  for (std::size_t k = cols; k-- > 0;) {
    double s = b[k];
    for (std::size_t c = k + 1; c < cols; ++c) s -= at(k, c) * x[c];
    x[k] = s / at(k, k);
  }
  return x;
}

double quantile_of(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

std::vector<double> nnls(std::span<const double> a, std::size_t cols, std::span<const double> b) {
  MACTUNE_CHECK(cols >= 1 && cols <= 12 && a.size() == b.size() * cols, "nnls: ", a.size(),
                " entries for ", b.size(), " rows x ", cols, " columns");
  const std::size_t rows = b.size();
  std::vector<double> best(cols, 0.0);
  double best_res = 0;
  for (double v : b) best_res += v * v;  // the all-zero solution
  for (unsigned mask = 1; mask < (1u << cols); ++mask) {
    std::vector<std::size_t> idx;
    for (std::size_t c = 0; c < cols; ++c)
      if (mask >> c & 1u) idx.push_back(c);
    std::vector<double> sub(rows * idx.size());
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < idx.size(); ++j) sub[r * idx.size() + j] = a[r * cols + idx[j]];
    const auto x = least_squares(std::move(sub), rows, idx.size(), {b.begin(), b.end()});
    if (!x || std::any_of(x->begin(), x->end(), [](double v) { return v < 0; })) continue;
    std::vector<double> full(cols, 0.0);
    for (std::size_t j = 0; j < idx.size(); ++j) full[idx[j]] = (*x)[j];
    double res = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      double e = -b[r];
      for (std::size_t c = 0; c < cols; ++c) e += a[r * cols + c] * full[c];
      res += e * e;
    }
    if (res < best_res * (1 - 1e-12)) best_res = res, best = full;
  }
  return best;
}

namespace {

// One least-squares fit of the rows `use` marks.
std::array<double, kTerms> fit_once(std::span<const FitRow> rows, const std::vector<bool>& use) {
  // Relative residuals: each row divided by its measured time. Columns scaled to a maximum of
  // 1 so the QR's rank test sees bytes and counts alike; terms zero everywhere are dropped.
  std::array<double, kTerms> col_max{};
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t i = 0; i < kTerms && use[r]; ++i)
      col_max[i] = std::max(col_max[i], std::abs(rows[r].features.x[i]));
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < kTerms; ++i)
    if (col_max[i] > 0) used.push_back(i);
  std::vector<double> a, b;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (!use[r]) continue;
    for (std::size_t i : used) a.push_back(rows[r].features.x[i] / col_max[i] / rows[r].seconds);
    b.push_back(1.0);
  }
  std::array<double, kTerms> coef{};
  if (used.empty()) return coef;
  const std::vector<double> c = nnls(a, used.size(), b);
  for (std::size_t j = 0; j < used.size(); ++j) coef[used[j]] = c[j] / col_max[used[j]];
  return coef;
}

}  // namespace

CostModel fit_cost_model(std::span<const FitRow> rows) {
  MACTUNE_CHECK(!rows.empty(), "fit_cost_model: no rows");
  for (const FitRow& r : rows)
    MACTUNE_CHECK(r.seconds > 0, "fit_cost_model: a row of ", r.seconds, " s");
  // Least squares, then once more without the rows far off the first fit (beyond 4 robust
  // standard deviations of the relative residuals, and beyond 10%): one sample burst on a
  // shared machine, or a regime the terms do not describe, must not bend the model for every
  // other point. disagreements() reports such rows.
  std::vector<bool> use(rows.size(), true);
  CostModel m;
  m.coef = fit_once(rows, use);
  std::vector<double> res(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    res[r] = std::abs(m.predict(rows[r].features) / rows[r].seconds - 1.0);
  const double bound = std::max(4 * 1.4826 * quantile_of(res, 0.5), 0.1);
  std::size_t kept = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) kept += (use[r] = res[r] <= bound) ? 1 : 0;
  if (kept >= kTerms && kept < rows.size()) m.coef = fit_once(rows, use);
  m.rows = rows.size();
  m.trimmed = kept >= kTerms ? rows.size() - kept : 0;
  m.fit_rel_err = prediction_error(m, rows).median;
  return m;
}

ErrorSummary summarize_errors(std::vector<double> e) {
  ErrorSummary s;
  s.n = e.size();
  if (e.empty()) return s;
  s.median = quantile_of(e, 0.5);
  s.p90 = quantile_of(e, 0.9);
  s.max = *std::max_element(e.begin(), e.end());
  return s;
}

ErrorSummary prediction_error(const CostModel& m, std::span<const FitRow> rows) {
  std::vector<double> e;
  for (const FitRow& r : rows) e.push_back(std::abs(m.predict(r.features) / r.seconds - 1.0));
  return summarize_errors(std::move(e));
}

std::vector<double> cross_validated_errors(std::span<const FitRow> rows, int k) {
  if (rows.size() < 2) return {};
  const std::size_t folds = std::min<std::size_t>(std::max(k, 2), rows.size());
  std::vector<double> e(rows.size());
  for (std::size_t fold = 0; fold < folds; ++fold) {
    std::vector<FitRow> train;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (i % folds != fold) train.push_back(rows[i]);
    const CostModel m = fit_cost_model(train);
    for (std::size_t i = fold; i < rows.size(); i += folds)
      e[i] = std::abs(m.predict(rows[i].features) / rows[i].seconds - 1.0);
  }
  return e;
}

ErrorSummary cross_validated_error(std::span<const FitRow> rows, int k) {
  return summarize_errors(cross_validated_errors(rows, k));
}

std::optional<double> predicted_break_even(const CostModel& mac, const CostModel& full,
                                           StepSpec step, double resolution) {
  step.mac_enabled = false;
  const double t_full = full.predict(step_features(step));
  step.mac_enabled = true;
  auto mac_wins = [&](double h) {
    step.forced.hit_rate = h;
    return mac.predict(step_features(step)) < t_full;
  };
  if (!mac_wins(1.0)) return std::nullopt;
  if (mac_wins(0.0)) return 0.0;
  // MAC's predicted time falls with the hit rate (every hit only removes KV reads): bisect.
  double lo = 0, hi = 1;
  while (hi - lo > resolution) {
    const double mid = 0.5 * (lo + hi);
    (mac_wins(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace mactune::tuner
