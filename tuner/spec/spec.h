// Sweep specs: what `mactune tune SPEC.yaml` measures (docs/spec.md documents every key).
//
// A spec is a set of named axes, each a list of values, plus settings. The grid is the
// Cartesian product of the axes (axes in one `zip` group advance together), filtered by the
// constraints. Every point of the grid is one pair: a MAC candidate and the full-attention
// baseline with the same launch parameters, measured interleaved.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "kernels/fields.h"
#include "kernels/timer.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/stats.h"

namespace mactune::tuner {

enum class Section { workload, mac, cpu, cuda };

// One value of an axis: typed (as its field reads it), its canonical text (what the DB and the
// report show) and, for numeric axes, its number (what constraints compute with).
struct Value {
  Scalar value;
  std::string text;
  double num = 0;
};

struct Axis {
  std::string name;  // e.g. "batch", "K", "chunk_tokens"
  Section section = Section::workload;
  FieldType type = FieldType::integer;
  std::vector<Value> values;
  int line = 0;        // 1-based line of the key in the spec (0: a built-in default)
  bool given = false;  // written in the spec (else the default single value)

  bool numeric() const { return type == FieldType::integer || type == FieldType::real; }
};

// A zip group: axes that advance together (all the same length).
struct ZipGroup {
  std::vector<std::string> axes;
  int line = 0;
};

struct Constraint {
  Expr expr;
  int line = 0;
};

// When two configs count as tied (tuner/decide/decide.h): within the tolerance of the best score
// only, or also when the measurement's intervals cannot tell them apart.
enum class TieRule { tolerance, overlap };
enum class CacheMode { cold, hot };

// What is measured interleaved: each point's two sides (point), or every config of a bucket at
// one hit rate and variant together (bucket: config comparisons come from one run too, at
// the cost of one live session per side).
enum class Interleave { point, bucket };

}  // namespace mactune::tuner
template <>
struct mactune::EnumNames<mactune::tuner::Section> {
  using S = tuner::Section;
  static constexpr std::string_view what = "spec section";
  static constexpr EnumName<S> names[] = {{S::workload, "workload"},
                                          {S::mac, "mac"},
                                          {S::cpu, "kernels.cpu"},
                                          {S::cuda, "kernels.cuda"}};
};
template <>
struct mactune::EnumNames<mactune::tuner::TieRule> {
  using S = tuner::TieRule;
  static constexpr std::string_view what = "tie rule";
  static constexpr EnumName<S> names[] = {{S::overlap, "overlap"}, {S::tolerance, "tolerance"}};
};
template <>
struct mactune::EnumNames<mactune::tuner::CacheMode> {
  using S = tuner::CacheMode;
  static constexpr std::string_view what = "cache mode";
  static constexpr EnumName<S> names[] = {{S::cold, "cold"}, {S::hot, "hot"}};
};
template <>
struct mactune::EnumNames<mactune::tuner::Interleave> {
  using S = tuner::Interleave;
  static constexpr std::string_view what = "interleave mode";
  static constexpr EnumName<S> names[] = {{S::point, "point"}, {S::bucket, "bucket"}};
};
namespace mactune::tuner {

struct MeasurePolicy {
  StoppingPolicy stop;
  Interleave interleave = Interleave::point;
  CacheMode mode = CacheMode::cold;
  // none ("auto"): the backend's default (steady_clock on CPUs, cuda_events on GPUs).
  std::optional<Timer> timer;
  // The part of the policy that changes what a sample measures: it belongs to the identity of
  // a point (a cold and a hot measurement are different points). Stopping limits only change
  // precision and are not part of it.
  std::string key() const { return std::string(name_of(mode)); }
};

// How the configs of a bucket are searched (docs/spec.md `search`). exhaustive: every point
// measured to the stopping rule. halving: successive halving over each bucket's configs
// (tuner/search/halving.h): brief interleaved rounds of `first_samples`, 2x, 4x, ... samples per
// case, the better half kept each round, then the survivors measured as exhaustive measures.
enum class SearchStrategy { exhaustive, halving };
}  // namespace mactune::tuner
template <>
struct mactune::EnumNames<mactune::tuner::SearchStrategy> {
  using S = tuner::SearchStrategy;
  static constexpr std::string_view what = "search strategy";
  static constexpr EnumName<S> names[] = {{S::exhaustive, "exhaustive"}, {S::halving, "halving"}};
};
namespace mactune::tuner {

struct Search {
  SearchStrategy strategy = SearchStrategy::exhaustive;
  int first_samples = 2;  // samples per case in the first brief round
};

// decide.break_even: search (bisect the hit rate after the grid, tuner/search/search.h) or grid
// (the break-even as the grid measured it).
enum class BreakEvenMode { search, grid };
}  // namespace mactune::tuner
template <>
struct mactune::EnumNames<mactune::tuner::BreakEvenMode> {
  using S = tuner::BreakEvenMode;
  static constexpr std::string_view what = "break-even mode";
  static constexpr EnumName<S> names[] = {{S::search, "search"}, {S::grid, "grid"}};
};
namespace mactune::tuner {

// The spec's `decide` section: how stored measurements become decisions.
struct DecidePolicy {
  double tie_tolerance = 0.01;  // configs within this fraction of the best score are tied
  TieRule ties = TieRule::overlap;
  BreakEvenMode break_even = BreakEvenMode::search;
  double resolution = 0.02;  // the break-even search's bracket width (hit rate)

  bool search_break_even() const { return break_even == BreakEvenMode::search; }
};

}  // namespace mactune::tuner

// The policy sections' keys (docs/spec.md `measure`, `search`, `decide`): the spec reads them
// through these tables, and checks across rows (max_samples >= min_samples) after.
template <>
struct mactune::FieldTable<mactune::tuner::MeasurePolicy> {
  static const std::vector<Field<tuner::MeasurePolicy>>& fields() {
    using M = tuner::MeasurePolicy;
    static const std::vector<Field<M>> t = [] {
      std::vector<Field<M>> rows = lift(fields_of<tuner::StoppingPolicy>(), &M::stop);
      rows.push_back(field<&M::interleave>(
          "interleave", "interleave",
          "point: each point's two sides in turn; bucket: every config of a bucket in turn"));
      rows.push_back(field<&M::timer>("timer", "timer",
                                      "what samples are timed with (auto: the backend's default)"));
      rows.push_back(field<&M::mode>("mode", "mode",
                                     "cold: caches flushed before every sample; hot: no flush"));
      return rows;
    }();
    return t;
  }
};
template <>
struct mactune::FieldTable<mactune::tuner::Search> {
  static const std::vector<Field<tuner::Search>>& fields() {
    using S = tuner::Search;
    static const std::vector<Field<S>> t = {
        field<&S::strategy>("strategy", "strategy",
                            "exhaustive: every point to the stopping rule; halving: successive "
                            "halving over each bucket's configs"),
        field<&S::first_samples>("first_samples", "first_samples",
                                 "halving: samples per case in the first round")
            .range(1, 1000),
    };
    return t;
  }
};
template <>
struct mactune::FieldTable<mactune::tuner::DecidePolicy> {
  static const std::vector<Field<tuner::DecidePolicy>>& fields() {
    using D = tuner::DecidePolicy;
    static const std::vector<Field<D>> t = {
        field<&D::tie_tolerance>("tie_tolerance", "tie_tolerance",
                                 "configs whose score is within this fraction of the best are tied")
            .range(0, 1)
            .open_above(),
        field<&D::ties>("ties", "ties",
                        "overlap: differences the measurement cannot resolve are none; "
                        "tolerance: the scores alone"),
        field<&D::break_even>(
            "break_even", "break_even",
            "search: bisect each bucket's hit rate after the grid; grid: the grid's hit rates"),
        field<&D::resolution>("resolution", "resolution",
                              "the break-even search stops when its bracket is this narrow")
            .range(0, 1)
            .open_below()
            .open_above(),
    };
    return t;
  }
};

namespace mactune::tuner {

struct DeviceFilter {
  BackendRequest backend;  // cpu | cuda | none: auto (cuda when a GPU is usable, else cpu)
  std::string name = "*";  // glob over the device name
  int line = 0;
};

struct Outputs {
  std::string db;        // SQLite database (created if absent)
  std::string dispatch;  // dispatch table JSON ("" = do not emit)
  std::string header;    // generated C++ header of the same table ("" = none)
  std::string report;    // report directory ("" = none)
};

struct Spec {
  std::string file;                // where it was read from (for messages)
  Backend backend = Backend::cpu;  // whose kernel section entered the grid
  std::string text;                // the spec as written (stored with each run)
  std::string name;
  std::string description;
  DeviceFilter device;
  std::vector<Axis> axes;  // every axis, in grid order (outermost first), defaults filled in
  std::vector<ZipGroup> zips;
  std::vector<Constraint> constraints;
  MeasurePolicy measure;
  Search search;
  DecidePolicy decide;
  std::uint64_t seed = 1;  // seeds the synthetic KV and queries of every point
  Outputs output;

  const Axis* find_axis(std::string_view name) const;
  const Axis& axis(std::string_view name) const;  // throws Error if absent
};

// Reads and validates a spec. Every problem is an InputError with one line
// "FILE:LINE: KEY: what is wrong" (unknown keys, wrong types, empty axes, bad values, zip groups
// of unequal length, constraints naming unknown axes). `backend` is the device backend the
// spec will run on: only that backend's kernel section enters the grid.
Spec parse_spec(std::string_view text, const std::string& file, Backend backend);
Spec load_spec(const std::string& path, Backend backend);

// The backend a spec asks for before a device is chosen: device.backend (auto when absent),
// read without validating the rest (parse_spec validates it again); `line` (when given) gets
// its line, 0 when absent. Throws InputError naming file and line for a value that is not cpu,
// cuda or auto.
BackendRequest requested_backend(std::string_view text, const std::string& file,
                                 int* line = nullptr);

// The largest spec file read: a spec is a page of YAML; anything this big is the wrong file.
constexpr std::uint64_t max_spec_bytes = 1u << 20;
// Reads a spec file (kernels/file_io.h: a regular file of at most max_spec_bytes).
std::string read_spec_file(const std::string& path);

// Glob match with '*' and '?' (used by device filters and instance filters).
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace mactune::tuner
