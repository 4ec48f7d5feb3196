#include "db/nsys_summary.h"

#include <fnmatch.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "db/nsys.h"
#include "kernels/file_io.h"

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();

// A kernel or a memop of the report.
struct Op {
  bool kernel = true;
  std::int64_t start = 0, end = 0;
  std::optional<std::int64_t> gpu, pid, launch_tid, launch_start;
  std::string name;        // kernel name, or "memcpy <kind>" / "memset"
  std::string short_name;  // kernels: nsys's shortName, else short_kernel_name(name)
  std::string instance, family;
  std::int64_t bytes = 0;
  std::string launch;  // kernels: "2x1x1 x 512x1x1" (grid x block)
};

struct RangeRec {
  std::string kind, name, domain;
  std::int64_t start = 0;
  std::optional<std::int64_t> end, pid, tid;
};

// The workload fields a range name may carry: "b=4 ctx=32768 hit=0.9 K=512 r=256".
struct WorkloadHint {
  std::optional<long long> batch, context, ring, band;
  std::optional<double> hit_rate;
  bool empty() const { return !batch && !context && !ring && !band && !hit_rate; }
  std::string text() const {
    std::ostringstream o;
    const auto put = [&](const char* k, const auto& v) {
      if (v) o << (o.tellp() > 0 ? " " : "") << k << '=' << *v;
    };
    put("b", batch);
    put("ctx", context);
    put("hit", hit_rate);
    put("K", ring);
    put("r", band);
    return o.str();
  }
  // Fields of `name` not set yet (the caller goes from the innermost range outwards).
  void add_from(const std::string& name) {
    std::istringstream in(name);
    std::string tok;
    while (in >> tok) {
      const auto eq = tok.find('=');
      if (eq == std::string::npos || eq + 1 >= tok.size()) continue;
      const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
      char* end = nullptr;
      if (k == "hit") {
        const double d = std::strtod(v.c_str(), &end);
        if (*end == '\0' && !hit_rate) hit_rate = d;
        continue;
      }
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0') continue;
      auto* field = k == "b"     ? &batch
                    : k == "ctx" ? &context
                    : k == "K"   ? &ring
                    : k == "r"   ? &band
                                 : nullptr;
      if (field && !*field) *field = n;
    }
  }
};

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

// Length of the union of [start, end) intervals.
double union_ns(std::vector<std::pair<std::int64_t, std::int64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  double total = 0;
  std::int64_t cur_start = 0, cur_end = std::numeric_limits<std::int64_t>::min();
  for (const auto& [s, e] : iv) {
    if (s > cur_end) {
      if (cur_end > cur_start) total += double(cur_end - cur_start);
      cur_start = s;
      cur_end = e;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (cur_end > cur_start) total += double(cur_end - cur_start);
  return total;
}

bool matches(const std::string& pattern, const RangeRec& g) {
  if (pattern.empty()) return true;
  const std::string at = g.name + "@" + g.domain;
  return fnmatch(pattern.c_str(), g.name.c_str(), 0) == 0 ||
         fnmatch(pattern.c_str(), at.c_str(), 0) == 0;
}

std::optional<NsysTunePoint> find_tune_point(const Store& db, const std::string& instance,
                                             const WorkloadHint& hint, const std::string& gpus,
                                             std::string& why) {
  auto s = db.connection().prepare(
      "SELECT m.modeled_bytes, m.median_s, w.batch, w.context, w.hit_rate, w.ring_capacity,"
      " w.band, d.name FROM measurements m JOIN instances i ON i.id = m.instance_id"
      " JOIN workloads w ON w.id = m.workload_id JOIN devices d ON d.id = m.device_id"
      " WHERE i.name = ?1 AND m.status = 'ok' AND m.modeled_bytes IS NOT NULL"
      " ORDER BY m.finished_at DESC, m.id DESC");
  s.bind(1, instance);
  std::vector<NsysTunePoint> all, on_gpu;
  while (s.step()) {
    const long long b = s.int64(2), ctx = s.int64(3), k = s.int64(5), r = s.int64(6);
    const double hit = s.real(4);
    if ((hint.batch && *hint.batch != b) || (hint.context && *hint.context != ctx) ||
        (hint.ring && *hint.ring != k) || (hint.band && *hint.band != r) ||
        (hint.hit_rate && std::abs(*hint.hit_rate - hit) > 1e-9))
      continue;
    WorkloadHint w{b, ctx, k, r, hit};
    NsysTunePoint p{w.text(), s.text(7), s.real(0), s.real(1), 1};
    if (!gpus.empty() && gpus.find(p.device) != std::string::npos) on_gpu.push_back(p);
    all.push_back(std::move(p));
  }
  const auto& found = on_gpu.empty() ? all : on_gpu;
  const std::string at = hint.empty() ? "" : " at " + hint.text();
  if (found.empty()) {
    why = "no ok measurement of this instance" + at + " in the database";
    return std::nullopt;
  }
  for (const NsysTunePoint& p : found)
    if (std::abs(p.modeled_bytes - found[0].modeled_bytes) > 1e-9 * found[0].modeled_bytes) {
      why = std::to_string(found.size()) + " measurements of this instance" + at +
            " with different modeled bytes: name the workload in an enclosing NVTX range"
            " (b=.. ctx=.. hit=..)";
      return std::nullopt;
    }
  NsysTunePoint p = found[0];
  p.measurements = static_cast<int>(found.size());
  return p;
}

}  // namespace

DurationStats duration_stats(std::vector<double> ns) {
  DurationStats d;
  if (ns.empty()) return d;
  std::sort(ns.begin(), ns.end());
  d.count = static_cast<std::int64_t>(ns.size());
  for (double v : ns) d.total_ns += v;
  d.mean_ns = d.total_ns / double(d.count);
  d.p50_ns = percentile_sorted(ns, 0.50);
  d.p99_ns = percentile_sorted(ns, 0.99);
  d.min_ns = ns.front();
  d.max_ns = ns.back();
  return d;
}

std::optional<double> NsysInstanceRow::achieved_gb_per_s() const {
  if (!tune_point || time.mean_ns <= 0) return std::nullopt;
  return tune_point->modeled_bytes / time.mean_ns;  // bytes per ns = GB/s
}
std::optional<double> NsysInstanceRow::tuned_gb_per_s() const {
  if (!tune_point || tune_point->median_s <= 0) return std::nullopt;
  return tune_point->modeled_bytes / tune_point->median_s / 1e9;
}

NsysSummary summarize_nsys(const Store& st, Id report_id, const NsysSummaryOptions& o) {
  const Connection& c = st.connection();
  NsysSummary out;
  out.range_pattern = o.range_pattern;
  out.tune_db = o.tune_db != nullptr;
  {
    auto q = c.prepare(
        "SELECT path, nsys_version, export_schema, gpus, session_start_utc_ns FROM nsys_reports"
        " WHERE id = ?1");
    q.bind(1, report_id);
    MACTUNE_REQUIRE(q.step(), "no nsys report with id ", report_id, " in '", st.path(), "'");
    out.report_path = q.text(0);
    out.nsys_version = q.text(1);
    out.export_schema = q.text(2);
    out.gpus = q.text(3);
    out.session_start_utc_ns = q.opt_int64(4);
  }
  std::vector<Op> ops;
  {
    auto q = c.prepare(
        "SELECT k.start_ns, k.end_ns, k.gpu, k.pid, k.launch_tid, k.launch_start_ns, k.name,"
        " COALESCE(i.name, ''), COALESCE(i.family, ''), CASE WHEN k.grid_x IS NULL THEN ''"
        " ELSE k.grid_x || 'x' || k.grid_y || 'x' || k.grid_z || ' x ' || k.block_x || 'x' ||"
        " k.block_y || 'x' || k.block_z END, k.short_name FROM nsys_kernels k"
        " LEFT JOIN instances i ON i.id = k.instance_id WHERE k.report_id = ?1 ORDER BY k.seq");
    q.bind(1, report_id);
    while (q.step()) {
      const std::string stored_short = q.text(10);
      ops.push_back({true, q.int64(0), q.int64(1), q.opt_int64(2), q.opt_int64(3), q.opt_int64(4),
                     q.opt_int64(5), q.text(6),
                     stored_short.empty() ? short_kernel_name(q.text(6)) : stored_short, q.text(7),
                     q.text(8), 0, q.text(9)});
    }
    auto m = c.prepare(
        "SELECT start_ns, end_ns, gpu, pid, launch_tid, launch_start_ns,"
        " kind || CASE WHEN copy_kind != '' THEN ' ' || copy_kind ELSE '' END, COALESCE(bytes, 0)"
        " FROM nsys_memops WHERE report_id = ?1 ORDER BY kind, seq");
    m.bind(1, report_id);
    while (m.step())
      ops.push_back({false, m.int64(0), m.int64(1), m.opt_int64(2), m.opt_int64(3), m.opt_int64(4),
                     m.opt_int64(5), m.text(6), "", "", "", m.int64(7), ""});
  }
  std::vector<RangeRec> ranges;
  {
    auto q = c.prepare(
        "SELECT kind, name, domain, start_ns, end_ns, pid, tid FROM nsys_ranges"
        " WHERE report_id = ?1 ORDER BY start_ns, seq");
    q.bind(1, report_id);
    while (q.step())
      ranges.push_back({q.text(0), q.text(1), q.text(2), q.int64(3), q.opt_int64(4), q.opt_int64(5),
                        q.opt_int64(6)});
  }

  // Operations by launching thread and by process, in launch order.
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::size_t>> by_thread;
  std::map<std::int64_t, std::vector<std::size_t>> by_process;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (!op.launch_start || !op.pid || !op.launch_tid) continue;
    by_thread[{*op.pid, *op.launch_tid}].push_back(i);
    by_process[*op.pid].push_back(i);
  }
  const auto by_launch = [&](std::size_t a, std::size_t b) {
    return *ops[a].launch_start < *ops[b].launch_start;
  };
  for (auto& [k, v] : by_thread) std::stable_sort(v.begin(), v.end(), by_launch);
  for (auto& [k, v] : by_process) std::stable_sort(v.begin(), v.end(), by_launch);
  // The operations launched inside range g.
  const auto members = [&](const RangeRec& g) {
    std::vector<std::size_t> out_ops;
    if (g.kind == "mark" || !g.pid) return out_ops;
    const std::vector<std::size_t>* v = nullptr;
    if (g.kind == "start_end") {
      const auto it = by_process.find(*g.pid);
      if (it != by_process.end()) v = &it->second;
    } else if (g.tid) {
      const auto it = by_thread.find({*g.pid, *g.tid});
      if (it != by_thread.end()) v = &it->second;
    }
    if (!v) return out_ops;
    const std::int64_t end = g.end.value_or(kOpen);
    auto lo = std::lower_bound(v->begin(), v->end(), g.start, [&](std::size_t i, std::int64_t t) {
      return *ops[i].launch_start < t;
    });
    for (; lo != v->end() && *ops[*lo].launch_start <= end; ++lo) out_ops.push_back(*lo);
    return out_ops;
  };

  std::vector<std::vector<std::size_t>> range_members(ranges.size());
  std::vector<std::vector<std::size_t>> op_ranges(ops.size());  // enclosing ranges of each op
  std::vector<bool> selected_op(ops.size(), o.range_pattern.empty());
  std::vector<std::size_t> selected_ranges;
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    range_members[r] = members(ranges[r]);
    for (std::size_t i : range_members[r]) op_ranges[i].push_back(r);
    if (!matches(o.range_pattern, ranges[r])) continue;
    if (ranges[r].kind == "mark") {
      ++out.marks;
      continue;
    }
    selected_ranges.push_back(r);
    for (std::size_t i : range_members[r]) selected_op[i] = true;
  }

  // Totals and the GPU's busy time over what is summarized.
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> per_gpu;
  bool any = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!selected_op[i]) continue;
    const Op& op = ops[i];
    (op.kernel ? out.kernels : out.memops) += 1;
    (op.kernel ? out.kernel_ns : out.memop_ns) += double(op.end - op.start);
    if (op.kernel && !op_ranges[i].empty()) ++out.kernels_in_ranges;
    per_gpu[op.gpu.value_or(-1)].push_back({op.start, op.end});
    out.first_gpu_ns = any ? std::min(out.first_gpu_ns, op.start) : op.start;
    out.last_gpu_ns = any ? std::max(out.last_gpu_ns, op.end) : op.end;
    any = true;
  }
  for (auto& [gpu, iv] : per_gpu) out.gpu_busy_ns += union_ns(std::move(iv));
  out.gpus_used = static_cast<int>(per_gpu.size());

  // Per kernel name (and instance), per instance (and named workload), per memop kind.
  std::map<std::pair<std::string, std::string>, std::vector<double>> kernel_times;
  std::map<std::pair<std::string, std::string>, std::vector<double>> instance_times;
  std::map<std::string, std::string> family_of;
  std::map<std::pair<std::string, std::string>, std::string> launch_of;  // "mixed" if they differ
  std::map<std::string, std::string> short_of;                           // per kernel name
  std::map<std::string, std::pair<std::vector<double>, std::int64_t>> memop_times;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!selected_op[i]) continue;
    const Op& op = ops[i];
    const double dur = double(op.end - op.start);
    if (!op.kernel) {
      auto& [times, bytes] = memop_times[op.name];
      times.push_back(dur);
      bytes += op.bytes;
      continue;
    }
    kernel_times[{op.name, op.instance}].push_back(dur);
    short_of.try_emplace(op.name, op.short_name);
    auto [l, fresh] = launch_of.try_emplace({op.name, op.instance}, op.launch);
    if (!fresh && l->second != op.launch) l->second = "mixed";
    if (op.instance.empty()) continue;
    std::vector<std::size_t> chain = op_ranges[i];
    std::sort(chain.begin(), chain.end(), [&](std::size_t a, std::size_t b) {
      return ranges[a].start > ranges[b].start;  // innermost first
    });
    WorkloadHint hint;
    for (std::size_t r : chain) hint.add_from(ranges[r].name);
    hint.add_from(o.workload);
    instance_times[{op.instance, hint.text()}].push_back(dur);
    family_of[op.instance] = op.family;
  }
  for (auto& [key, times] : kernel_times) {
    NsysKernelRow row{key.first, short_of[key.first], key.second, launch_of[key],
                      duration_stats(std::move(times))};
    row.share = out.kernel_ns > 0 ? row.time.total_ns / out.kernel_ns : 0;
    out.kernel_rows.push_back(std::move(row));
  }
  for (auto& [key, times] : instance_times) {
    NsysInstanceRow row;
    row.instance = key.first;
    row.family = family_of[key.first];
    row.workload = key.second;
    row.time = duration_stats(std::move(times));
    row.share = out.kernel_ns > 0 ? row.time.total_ns / out.kernel_ns : 0;
    if (o.tune_db) {
      WorkloadHint hint;
      hint.add_from(row.workload);
      row.tune_point = find_tune_point(*o.tune_db, row.instance, hint, out.gpus, row.no_tune_point);
    } else {
      row.no_tune_point = "no tuner database (--db)";
    }
    out.instance_rows.push_back(std::move(row));
  }
  for (auto& [kind, tb] : memop_times)
    out.memop_rows.push_back({kind, duration_stats(std::move(tb.first)), tb.second});
  const auto by_total = [](const auto& a, const auto& b) {
    return a.time.total_ns != b.time.total_ns ? a.time.total_ns > b.time.total_ns
                                              : a.time.count > b.time.count;
  };
  std::stable_sort(out.kernel_rows.begin(), out.kernel_rows.end(), by_total);
  std::stable_sort(out.instance_rows.begin(), out.instance_rows.end(), by_total);
  std::stable_sort(out.memop_rows.begin(), out.memop_rows.end(), by_total);

  // Per range name: wall time, the kernels inside, their GPU span, busy time and gaps.
  struct Acc {
    NsysRangeRow row;
    std::vector<double> walls, gaps, latencies;
    std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, double>> inside;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Acc> groups;
  std::set<std::string> domains;
  for (std::size_t r : selected_ranges) {
    const RangeRec& g = ranges[r];
    domains.insert(g.domain);
    Acc& a = groups[{g.name, g.domain, g.kind}];
    a.row.name = g.name;
    a.row.domain = g.domain;
    a.row.kind = g.kind;
    ++a.row.instances;
    if (g.end)
      a.walls.push_back(double(*g.end - g.start));
    else
      ++a.row.open;
    std::vector<std::pair<std::int64_t, std::int64_t>> iv;
    for (std::size_t i : range_members[r]) {
      const Op& op = ops[i];
      if (!op.kernel) continue;
      iv.push_back({op.start, op.end});
      a.latencies.push_back(double(op.start - *op.launch_start));
      auto& [n, t] = a.inside[{op.name, op.instance}];
      short_of.try_emplace(op.name, op.short_name);
      ++n;
      t += double(op.end - op.start);
      a.row.kernel_ns += double(op.end - op.start);
    }
    if (iv.empty()) continue;
    a.row.kernels += static_cast<std::int64_t>(iv.size());
    std::sort(iv.begin(), iv.end());
    std::int64_t last_end = iv[0].second;
    for (std::size_t k = 1; k < iv.size(); ++k) {
      a.gaps.push_back(double(std::max<std::int64_t>(0, iv[k].first - last_end)));
      last_end = std::max(last_end, iv[k].second);
    }
    a.row.gpu_span_ns += double(last_end - iv[0].first);
    a.row.gpu_busy_ns += union_ns(std::move(iv));
  }
  for (auto& [key, a] : groups) {
    a.row.wall = duration_stats(std::move(a.walls));
    a.row.gaps = duration_stats(std::move(a.gaps));
    a.row.launch_latency = duration_stats(std::move(a.latencies));
    for (const auto& [k, nt] : a.inside)
      a.row.kernels_inside.push_back({k.first, short_of[k.first], k.second, nt.first, nt.second,
                                      a.row.kernel_ns > 0 ? nt.second / a.row.kernel_ns : 0});
    std::stable_sort(a.row.kernels_inside.begin(), a.row.kernels_inside.end(),
                     [](const auto& x, const auto& y) { return x.total_ns > y.total_ns; });
    out.range_rows.push_back(std::move(a.row));
  }
  std::stable_sort(out.range_rows.begin(), out.range_rows.end(), [](const auto& a, const auto& b) {
    return a.wall.total_ns != b.wall.total_ns ? a.wall.total_ns > b.wall.total_ns
                                              : a.kernel_ns > b.kernel_ns;
  });
  out.ranges = static_cast<std::int64_t>(selected_ranges.size());
  out.domains.assign(domains.begin(), domains.end());
  return out;
}

NsysSummary summarize_nsys_report(const std::string& report_path, const NsysSummaryOptions& o) {
  std::string tmpl = (fs::temp_directory_path() / "mactune-nsys-XXXXXX").string();
  MACTUNE_CHECK(mkdtemp(tmpl.data()) != nullptr, "cannot create a scratch directory in ",
                fs::temp_directory_path().string());
  struct Remove {
    fs::path dir;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove{tmpl};
  // A signal removes the scratch database and its folder (kernels/file_io.h).
  std::vector<TemporaryName> registered;
  registered.emplace_back(tmpl, true);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    registered.emplace_back(tmpl + "/summary.db" + suffix);
  Store scratch = Store::open((remove.dir / "summary.db").string());
  Connection& c = scratch.connection();
  c.exec("PRAGMA synchronous = OFF");  // scratch: nothing to keep across a crash
  if (o.tune_db) {
    Transaction t(c);
    auto in = o.tune_db->connection().prepare(
        "SELECT name, backend, family, config FROM instances ORDER BY id");
    auto ins =
        c.prepare("INSERT INTO instances (name, backend, family, config) VALUES (?1, ?2, ?3, ?4)");
    while (in.step()) {
      ins.reset();
      ins.bind(1, in.text(0)).bind(2, in.text(1)).bind(3, in.text(2)).bind(4, in.text(3)).run();
    }
    t.commit();
  }
  const NsysImport imported = import_nsys(scratch, report_path);
  NsysSummary s = summarize_nsys(scratch, imported.report_id, o);
  s.report_path = report_path;
  s.notes = imported.notes;
  return s;
}

}  // namespace mactune::db
