// A cost model of one decode step per device, fitted to stored measurements: step seconds as
// a non-negative combination of the terms the kernels already count (kernels/stats.h,
// kernels/plan.h),
//
//   t = c_fixed + c_mac · [a MAC step] + c_kv · KV bytes read + c_ring · ring bytes read
//       + c_group · groups + c_item · work items
//
// with the features of a step computed on the host exactly as the engines decide and plan it
// (the same forced decisions of kernels/forced.h, account_request, the engine's planner and
// policy), so a shape that was never measured has features too. Every coefficient is a cost
// (seconds per byte, per group, per item, per step): non-negative, fitted by exact
// non-negative least squares on relative residuals (times span orders of magnitude; a 1 ms
// step must count as much as a 100 ms one). Its honesty is its held-out error: k-fold
// cross-validation over the rows, or a split by context (fit on 4K and 16K, predict 64K).
//
// One model serves both families ("mac", "full"): the family enters as its own fixed cost (a
// MAC step also launches the match and writes the ring); the per-byte, per-group and per-item
// costs are shared, because both stream the KV through the same attend kernels and planner.
// Fitted apart, the two families' KV costs differed by their noise (37 vs 46 ns/KiB on the
// quick CPU spec), and that difference, not MAC's real overhead, decided the predicted
// break-even (MAC "faster" at hit rate 0).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/forced.h"
#include "kernels/plan.h"
#include "kernels/problem.h"
#include "kernels/stats.h"

namespace mactune::tuner {

// The step a model predicts: one decode step at m = context over a batch of requests.
struct StepSpec {
  Problem shape;  // shape.batch = requests in the step
  int context = 0;
  MacParams mac;
  ForcedHits forced;        // MAC only; forced.enabled is implied
  bool mac_enabled = true;  // false: the full-attention baseline
  PlanLimits limits;        // the engine's planning policy (cpu_plan_limits, cuda_plan_limits)
};

// The model's terms, in coefficient order.
enum class Term : int { fixed, mac_step, kv_bytes, ring_bytes, groups, items };
inline constexpr int kTerms = 6;
std::string_view term_name(Term t);  // "fixed", "kv_bytes", ...
std::string_view term_unit(Term t);  // "s/step", "s/B", ...

struct StepFeatures {
  // [fixed = 1, MAC step (1 or 0), KV bytes, ring bytes, groups, work items]
  std::array<double, kTerms> x{};
  StepStats stats;  // the step's accounting (skip ratio, modeled bytes, ...)
};

// The features of the step, as the engines would decide, account and plan it (the ring warm,
// as the tuner's prefill leaves it: every position of [m - K, m) at or past r holds a summary).
StepFeatures step_features(const StepSpec& s);

// One measured step: its features and its time.
struct FitRow {
  StepFeatures features;
  double seconds = 0;    // median
  double rel_noise = 0;  // IQR / median of the measurement: what "beyond the noise" means
};

struct CostModel {
  std::array<double, kTerms> coef{};  // seconds per unit of each term, all >= 0
  std::size_t rows = 0;               // rows given
  std::size_t trimmed = 0;            // of them, left out of the final fit as outliers
  double fit_rel_err = 0;             // median |pred / meas - 1| over the fitted rows

  double predict(const StepFeatures& f) const;
};

// Non-negative least squares, exactly: minimises |A c - b| over c >= 0 by solving the
// unconstrained problem on every subset of the columns (at most 2^kTerms small QR solves) and
// keeping the best feasible one. A: rows x cols, row-major; cols <= 12.
std::vector<double> nnls(std::span<const double> a, std::size_t cols, std::span<const double> b);

// Fits the model to the rows (at least one). Terms that are zero in every row get 0. Rows far
// off a first fit (beyond 4 robust standard deviations of the relative residuals and beyond
// 10%) are left out of the second, final one.
CostModel fit_cost_model(std::span<const FitRow> rows);

struct ErrorSummary {
  std::size_t n = 0;
  double median = 0, p90 = 0, max = 0;  // of |predicted / measured - 1|
};
ErrorSummary summarize_errors(std::vector<double> rel_errors);
ErrorSummary prediction_error(const CostModel& m, std::span<const FitRow> rows);
// k-fold cross-validation: row i is held out in fold i mod k; every row is predicted by a
// model that did not see it. k is capped at the row count; fewer than 2 rows: n = 0.
// The _errors form gives each row's |pred / meas - 1|, in row order (empty: fewer than 2 rows).
std::vector<double> cross_validated_errors(std::span<const FitRow> rows, int k = 5);
ErrorSummary cross_validated_error(std::span<const FitRow> rows, int k = 5);

// The break-even the two models predict for a step: the smallest hit rate in [0, 1] at which
// the MAC model's time is below the full model's (bisected to `resolution` on the hit rate,
// each probe's features computed exactly), or none when MAC is slower even at 1.
std::optional<double> predicted_break_even(const CostModel& mac, const CostModel& full,
                                           StepSpec step, double resolution = 0.005);

}  // namespace mactune::tuner
