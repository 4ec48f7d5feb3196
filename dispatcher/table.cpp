// Structure checks of a dispatch table (what holds whatever device reads it), and MAC choices.
#include "dispatcher/table.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <sstream>
#include <system_error>

#include "kernels/error.h"
#include "kernels/file_io.h"

namespace mactune::dispatch {
namespace {

std::string interval_text(const Interval& iv) {
  std::ostringstream s;
  s << '[' << iv.lo << ", ";
  if (iv.hi)
    s << *iv.hi << ']';
  else
    s << "inf)";
  return s.str();
}

// "" or why the interval is not [lo, hi] with 1 <= lo <= hi <= max.
std::string check_interval(const Interval& iv, std::int64_t max) {
  std::ostringstream e;
  if (iv.lo < 1 || iv.lo > max)
    e << "lo = " << iv.lo << " must be in [1, " << max << "]";
  else if (iv.hi && (*iv.hi < iv.lo || *iv.hi > max))
    e << "hi = " << *iv.hi << " must be in [lo = " << iv.lo << ", " << max << "]";
  return e.str();
}

std::string check_params(const Params& params) {
  for (const auto& [key, value] : params) {
    if (key.empty()) return "a parameter has an empty name";
    if (const double* d = std::get_if<double>(&value); d && !std::isfinite(*d))
      return "parameter '" + key + "' is not finite";
  }
  return "";
}

std::string shape_text(const ShapeKey& s) {
  std::ostringstream o;
  o << "head_dim " << s.head_dim << ", heads " << s.q_heads << '/' << s.kv_heads << ", "
    << dtype_name(s.kv_dtype) << ", page " << s.page_size;
  return o.str();
}

std::string check_entry(const Entry& e) {
  if (std::string why = validate(e.shape.problem()); !why.empty()) return "shape: " + why;
  if (std::string why = check_interval(e.batch, INT_MAX); !why.empty()) return "batch: " + why;
  if (std::string why = check_interval(e.context, kMaxContext); !why.empty())
    return "context: " + why;
  if (e.full.instance.empty()) return "full.instance is empty";
  if (std::string why = check_params(e.full.params); !why.empty()) return "full.params: " + why;
  if (e.mac) {
    const MacChoice& m = *e.mac;
    std::ostringstream w;
    if (m.instance.empty())
      w << "mac.instance is empty";
    else if (m.ring_capacity < 1)
      w << "mac.K = " << m.ring_capacity << " must be at least 1";
    else if (m.band < 1)
      w << "mac.r = " << m.band << " must be at least 1";
    else if (m.tau && !(std::isfinite(*m.tau) && *m.tau >= 0.0))
      w << "mac.tau = " << *m.tau << " must be finite and >= 0";
    else if (std::string why = check_params(m.params); !why.empty())
      w << "mac.params: " << why;
    if (!w.str().empty()) return w.str();
  }
  if (e.min_hit_rate) {
    if (!(*e.min_hit_rate >= 0.0 && *e.min_hit_rate <= 1.0))
      return "min_hit_rate = " + std::to_string(*e.min_hit_rate) + " must be in [0, 1]";
    if (!e.mac) return "min_hit_rate is set but mac is null";
  }
  return "";
}

// The top of an interval, unbounded as the largest value.
std::int64_t top(const Interval& iv) {
  return iv.hi ? *iv.hi : std::numeric_limits<std::int64_t>::max();
}

// A pair (lower index first) of the entries `idx` (of one shape) whose batch and context
// intervals both overlap, or nullopt. A sweep over batch: entries in order of batch.lo, with
// the ones whose batch interval is still open kept by context.lo. Those are pairwise disjoint
// in context (they overlap each other in batch, and no earlier pair overlapped), so a new
// entry overlaps one of them iff it overlaps its neighbour below or above it in context:
// O(n log n). (Checking every pair took over 20 s for a table of 100,000 entries.)
std::optional<std::pair<std::size_t, std::size_t>> first_overlap(const std::vector<Entry>& entries,
                                                                 std::vector<std::size_t> idx) {
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(entries[a].batch.lo, a) < std::pair(entries[b].batch.lo, b);
  });
  std::map<std::int64_t, std::size_t> open;  // context.lo -> entry, batch interval still open
  using Expiry = std::pair<std::int64_t, std::size_t>;  // (batch top, entry)
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> closing;
  for (const std::size_t i : idx) {
    const Entry& e = entries[i];
    while (!closing.empty() && closing.top().first < e.batch.lo) {
      open.erase(entries[closing.top().second].context.lo);
      closing.pop();
    }
    const auto above = open.lower_bound(e.context.lo);
    if (above != open.end() && above->first <= top(e.context))
      return std::pair(std::min(i, above->second), std::max(i, above->second));
    if (above != open.begin()) {
      const auto below = std::prev(above);
      if (top(entries[below->second].context) >= e.context.lo)
        return std::pair(std::min(i, below->second), std::max(i, below->second));
    }
    open.emplace(e.context.lo, i);
    closing.emplace(top(e.batch), i);
  }
  return std::nullopt;
}

}  // namespace

std::string check_structure(const DispatchTable& t) {
  if (t.schema != kDispatchSchema)
    return "schema '" + t.schema + "' is not supported (this build reads " +
           std::string(kDispatchSchema) + ")";
  if (t.device.fingerprint.empty()) return "device.fingerprint is empty";
  std::map<ShapeKey, std::vector<std::size_t>> by_shape;
  for (std::size_t i = 0; i < t.entries.size(); ++i) {
    if (std::string why = check_entry(t.entries[i]); !why.empty())
      return "entries[" + std::to_string(i) + "]." + why;
    by_shape[t.entries[i].shape].push_back(i);
  }
  // Buckets of one shape must not overlap: select() must never have two answers.
  for (const auto& [shape, idx] : by_shape) {
    if (const auto pair = first_overlap(t.entries, idx)) {
      const Entry& x = t.entries[pair->first];
      const Entry& y = t.entries[pair->second];
      std::ostringstream e;
      e << "entries[" << pair->first << "] and entries[" << pair->second << "] overlap ("
        << shape_text(shape) << "): batch " << interval_text(x.batch) << " and "
        << interval_text(y.batch) << ", context " << interval_text(x.context) << " and "
        << interval_text(y.context);
      return e.str();
    }
  }
  return "";
}

void detail::write_atomically(const std::filesystem::path& path, std::string_view text,
                              std::string_view what) {
  write_file_atomically(path.string(), text, what);
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- MAC choices: the MAC settings' table (kernels/problem.h) spelt as a table carries it.

MacChoice mac_choice(std::string instance, const MacParams& settings, Params launch,
                     bool with_tau) {
  MacChoice m;
  m.instance = std::move(instance);
  m.ring_capacity = settings.ring_capacity;
  m.band = settings.band;
  if (with_tau) m.tau = settings.tau;
  m.params = std::move(launch);
  for (const Field<MacParams>& f : fields_of<MacParams>())
    if (f.member != "ring_capacity" && f.member != "band" && f.member != "tau")
      m.params[std::string(f.name)] = f.get(settings);
  return m;
}

MacParams mac_settings(const MacChoice& choice, MacParams base) {
  base.ring_capacity = choice.ring_capacity;
  base.band = choice.band;
  if (choice.tau) base.tau = *choice.tau;
  Params own;  // the params the MAC table names
  for (const auto& [key, value] : choice.params)
    if (find_field<MacParams>(key)) own.emplace(key, value);
  assign_params(base, own);
  return base;
}

}  // namespace mactune::dispatch
