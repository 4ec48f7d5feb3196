#include "tuner/spec/skip_ratio.h"

#include <algorithm>
#include <climits>
#include <sstream>

#include "kernels/forced.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/spec_yaml.h"

namespace mactune::tuner {

void resolve_skip_ratio_axis(Spec& spec) {
  Axis* skip = nullptr;
  for (Axis& a : spec.axes)
    if (a.section == Section::workload && a.name == "skip_ratio") skip = &a;
  if (!skip || !skip->given) return;
  for (Axis& a : spec.axes) {
    if (a.section != Section::workload || !a.given) continue;
    const std::string where = spec.file + ":" + std::to_string(a.line) + ": workload." + a.name;
    if (a.name == "hit_rate")
      spec_error(where, ": cannot be set together with workload.skip_ratio (line ", skip->line,
                 "): a workload fixes either its hit rate or its skip ratio");
    if (a.name == "lag")
      spec_error(where, ": cannot be set together with workload.skip_ratio (line ", skip->line,
                 "): the skip-ratio quota solves each hit's lag");
    if (a.name == "coherence")
      for (const Value& v : a.values)
        if (v.text != name_of(Coherence::per_group))
          spec_error(where, ": ", v.text, " cannot be swept with workload.skip_ratio (line ",
                     skip->line, "): the skip-ratio quota hits whole (request, KV head) groups ",
                     "(coherence per-group)");
  }
  for (Axis& a : spec.axes) {
    if (a.section != Section::workload) continue;
    if (a.name == "hit_rate") a.values = {{0.0, "0", 0.0}};
    if (a.name == "coherence") {
      const std::string g(name_of(Coherence::per_group));
      a.values = {{g, g, 0.0}};
    }
  }
}

bool sweeps_skip_ratio(const Spec& spec) {
  const Axis* a = spec.find_axis("skip_ratio");
  return a && a->given;
}

std::string skip_unreachable(const TunePoint& p) {
  if (p.forced.quota != ForcedQuota::skip_ratio || p.forced.skip_ratio == 0) return "";
  const int m = p.context, Hkv = p.shape.kv_heads, K = p.mac.ring_capacity, r = p.mac.band;
  std::ostringstream o;
  if (p.mac.accept_eps < 1.0) {
    o << "the acceptance gate (accept_eps = " << format_number(p.mac.accept_eps)
      << ") can send a forced hit back to a miss; the skip-ratio quota needs accept_eps = 1";
    return o.str();
  }
  if (m < p.mac.min_context) {
    o << "context " << m << " is below min_context = " << p.mac.min_context
      << ": no head is eligible to hit";
    return o.str();
  }
  const int kv_len = m + 1;
  const int max_lag = forced_max_lag(m, K, r);
  long long need_k = 0, read_each = 0;
  int band_at_most = INT_MAX;
  bool by_band = false;
  for (int b = 0; b < p.shape.batch; ++b) {
    const long long skipped =
        forced_skip_budget(p.forced.skip_ratio, static_cast<long long>(b) * kv_len, kv_len, Hkv);
    if (forced_skip_solve(skipped, Hkv, kv_len, r, max_lag).reachable) continue;
    const long long s_max = static_cast<long long>(kv_len) - r - 1;
    const long long n = s_max >= 1 ? (skipped + s_max - 1) / s_max : LLONG_MAX;
    if (n > Hkv) {  // even every group hitting at lag 1 reads more than that
      by_band = true;
      const long long per_group = (skipped + Hkv - 1) / Hkv;
      band_at_most = std::min<long long>(band_at_most, kv_len - 1 - per_group);
    } else {  // the fewest hits that skip enough must each read more than r + max_lag
      need_k = std::max(need_k, static_cast<long long>(kv_len) - r - skipped / n);
      read_each = std::max(read_each, (n * kv_len - skipped + n - 1) / n);
    }
  }
  if (by_band) {
    o << "the hit groups would have to read fewer than r + 1 = " << r + 1
      << " tokens each (a hit reads its lag >= 1 plus the band r)";
    if (band_at_most >= 0)
      o << "; reachable with band r <= " << band_at_most;
    else
      o << "; no band reaches it (every group reads at least one token)";
    return o.str();
  }
  if (need_k > 0) {
    o << "each hit group would read about " << read_each << " tokens, more than r + K = " << r
      << " + " << K << "; reachable with K >= " << need_k;
    return o.str();
  }
  return "";
}

std::string quota_label(const ForcedHits& f) {
  return f.quota == ForcedQuota::skip_ratio ? "skip=" + format_number(f.skip_ratio)
                                            : "hit=" + format_number(f.hit_rate);
}

std::string unreachable_line(const TunePoint& p, const std::string& why) {
  std::ostringstream o;
  o << "skip_ratio " << format_number(p.forced.skip_ratio) << " at " << bucket_of(p).key() << " (K "
    << p.mac.ring_capacity << ", r " << p.mac.band << "): " << why;
  return o.str();
}

}  // namespace mactune::tuner
