#include "profiler/summary.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <ostream>
#include <unordered_map>

namespace mactune::prof {
namespace {

constexpr std::array kReported = {Phase::rope,   Phase::append, Phase::match,     Phase::plan,
                                  Phase::attend, Phase::merge,  Phase::ring_write};

using Interval = std::pair<std::int64_t, std::int64_t>;

std::int64_t union_length(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end());
  std::int64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [a, b] : v) {
    if (open && a <= cur_end) {
      cur_end = std::max(cur_end, b);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = a;
    cur_end = b;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ProfileSummary summarize(const std::vector<ThreadSpans>& threads,
                         const std::vector<StepSample>& steps, const ActivityLog& activity) {
  ProfileSummary r;
  r.steps = static_cast<int>(steps.size());
  if (steps.empty()) return r;
  const std::size_t n = steps.size();
  auto step_of = [&](std::int64_t t) -> int {  // index of the step holding t, or -1
    auto it = std::upper_bound(steps.begin(), steps.end(), t,
                               [](std::int64_t x, const StepSample& s) { return x < s.start_ns; });
    if (it == steps.begin()) return -1;
    --it;
    return t <= it->end_ns ? static_cast<int>(it - steps.begin()) : -1;
  };

  std::vector<double> step_us;
  for (const auto& s : steps) step_us.push_back(double(s.end_ns - s.start_ns) * 1e-3);
  r.mean_step_us = mean(step_us);
  r.p50_step_us = median(step_us);
  r.min_step_us = *std::min_element(step_us.begin(), step_us.end());

  // Phases: per (phase, step) the intervals of its spans.
  for (Phase p : kReported) {
    std::vector<std::vector<Interval>> per_step(n);
    for (const auto& t : threads)
      for (const PhaseSpan& s : t.spans) {
        if (s.phase != p) continue;
        const int i = step_of(s.start_ns);
        if (i >= 0) per_step[static_cast<std::size_t>(i)].push_back({s.start_ns, s.end_ns});
      }
    PhaseStat st;
    st.name = std::string(name_of(p));
    std::vector<double> wall, thread;
    std::size_t spans = 0;
    for (auto& v : per_step) {
      std::int64_t sum = 0;
      for (const auto& [a, b] : v) sum += b - a;
      spans += v.size();
      st.steps_present += v.empty() ? 0 : 1;
      thread.push_back(double(sum) * 1e-3);
      wall.push_back(double(union_length(v)) * 1e-3);
    }
    if (st.steps_present == 0) continue;
    st.mean_wall_us = mean(wall);
    st.p50_wall_us = median(wall);
    st.mean_thread_us = mean(thread);
    st.share = r.mean_step_us > 0 ? st.mean_wall_us / r.mean_step_us : 0.0;
    st.spans_per_step = double(spans) / double(n);
    r.phases.push_back(std::move(st));
  }

  // Kernels, attributed to the step that launched them.
  std::unordered_map<std::uint32_t, std::int64_t> launch_ns;
  for (const auto& a : activity.api) launch_ns.emplace(a.correlation, a.start_ns);
  std::map<std::string, std::vector<double>> durations;
  std::vector<std::vector<Interval>> busy(n);
  for (const auto& d : activity.device) {
    auto it = launch_ns.find(d.correlation);
    const int i = step_of(it != launch_ns.end() ? it->second : d.start_ns);
    if (i < 0) continue;
    busy[static_cast<std::size_t>(i)].push_back({d.start_ns, d.end_ns});
    if (d.op == DeviceOp::kernel) durations[d.name].push_back(double(d.end_ns - d.start_ns) * 1e-3);
  }
  for (auto& [name, v] : durations) {
    KernelStat k;
    k.name = name;
    k.per_step = double(v.size()) / double(n);
    k.mean_us = mean(v);
    k.p50_us = median(v);
    k.gpu_us_per_step = k.mean_us * k.per_step;
    r.kernels.push_back(std::move(k));
  }
  std::sort(r.kernels.begin(), r.kernels.end(), [](const KernelStat& a, const KernelStat& b) {
    return a.gpu_us_per_step > b.gpu_us_per_step;
  });
  if (!activity.device.empty()) {
    double share = 0;
    for (std::size_t i = 0; i < n; ++i)
      share += double(union_length(busy[i])) /
               std::max<double>(1.0, double(steps[i].end_ns - steps[i].start_ns));
    r.gpu_busy_share = share / double(n);
  }

  for (const auto& s : steps) {
    r.kv_bytes_read += double(s.stats.kv_bytes_read);
    r.ring_bytes_read += double(s.stats.ring_bytes_read);
    r.bytes_written += double(s.stats.bytes_written);
    r.modeled_bytes += double(s.stats.modeled_bytes());
    r.skip_ratio += s.stats.skip_ratio();
    r.head_skip_ratio += s.stats.head_skip_ratio();
    r.hit_heads += s.stats.hit_heads;
    r.eligible_heads += s.stats.eligible_heads;
  }
  for (double* x : {&r.kv_bytes_read, &r.ring_bytes_read, &r.bytes_written, &r.modeled_bytes,
                    &r.skip_ratio, &r.head_skip_ratio, &r.hit_heads, &r.eligible_heads})
    *x /= double(n);
  return r;
}

namespace {

std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string shorten(const std::string& s, std::size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

}  // namespace

void print_summary(std::ostream& out, const ProfileSummary& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %9s %11s %11s %7s %12s %10s\n", "phase", "steps",
                "mean us", "p50 us", "share", "thread us", "spans/step");
  out << line;
  for (const auto& p : r.phases) {
    std::snprintf(line, sizeof line, "%-12s %4d/%-4d %11.1f %11.1f %6.1f%% %12.1f %10.1f\n",
                  p.name.c_str(), p.steps_present, r.steps, p.mean_wall_us, p.p50_wall_us,
                  100.0 * p.share, p.mean_thread_us, p.spans_per_step);
    out << line;
  }
  std::snprintf(line, sizeof line, "%-12s %9d %11.1f %11.1f %6.1f%%   (min %.1f us)\n", "step",
                r.steps, r.mean_step_us, r.p50_step_us, 100.0, r.min_step_us);
  out << line;
  out << "(wall time per step: the union over threads of each phase's spans; share = mean / "
         "mean step)\n";
  if (!r.kernels.empty()) {
    out << '\n';
    std::snprintf(line, sizeof line, "%-56s %9s %10s %10s %12s\n", "kernel", "per step", "mean us",
                  "p50 us", "GPU us/step");
    out << line;
    for (const auto& k : r.kernels) {
      std::snprintf(line, sizeof line, "%-56s %9.1f %10.2f %10.2f %12.1f\n",
                    shorten(k.name, 56).c_str(), k.per_step, k.mean_us, k.p50_us,
                    k.gpu_us_per_step);
      out << line;
    }
    std::snprintf(line, sizeof line, "GPU busy: %.1f%% of the step\n", 100.0 * r.gpu_busy_share);
    out << line;
  }
  out << '\n';
  out << "modeled bytes per step (kernels/stats.h): KV read " << bytes_text(r.kv_bytes_read)
      << ", ring read " << bytes_text(r.ring_bytes_read) << ", written "
      << bytes_text(r.bytes_written) << ", total " << bytes_text(r.modeled_bytes) << '\n';
  std::snprintf(line, sizeof line,
                "skip ratio %.3f per group, %.3f per head; hit heads %.1f of %.1f eligible\n",
                r.skip_ratio, r.head_skip_ratio, r.hit_heads, r.eligible_heads);
  out << line;
  if (r.mean_step_us > 0) {
    std::snprintf(
        line, sizeof line,
        "modeled KV read rate %.2f GB/s at the mean step (all modeled bytes: %.2f GB/s)\n",
        r.kv_bytes_read / (r.mean_step_us * 1e3), r.modeled_bytes / (r.mean_step_us * 1e3));
    out << line;
  }
}

}  // namespace mactune::prof
