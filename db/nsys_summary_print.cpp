// Rendering of an NsysSummary: aligned columns for a terminal, markdown tables, JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <ostream>
#include <sstream>

#include "db/nsys_summary.h"

namespace mactune::db {
namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string ms(double ns) {
  return fixed(ns / 1e6, 3);
}
std::string us(double ns) {
  return fixed(ns / 1e3, 1);
}
std::string pct(double share) {
  return fixed(100.0 * share, 1);
}
std::string domain_name(const std::string& d) {
  return d.empty() ? "(default)" : d;
}
std::string utc(std::int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A table: columns right-aligned unless named in `left`.
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<bool> left)
      : header_(std::move(header)), left_(std::move(left)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }

  void print(std::ostream& out, NsysTableStyle style, std::size_t max_rows) const {
    const std::size_t n = std::min(max_rows, rows_.size());
    if (style == NsysTableStyle::markdown) {
      const auto line = [&](const std::vector<std::string>& r) {
        out << '|';
        for (const std::string& cell : r) out << ' ' << escape(cell) << " |";
        out << '\n';
      };
      line(header_);
      out << '|';
      for (std::size_t c = 0; c < header_.size(); ++c) out << (left_[c] ? " --- |" : " ---: |");
      out << '\n';
      for (std::size_t i = 0; i < n; ++i) line(rows_[i]);
    } else {
      std::vector<std::size_t> width(header_.size());
      for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < header_.size(); ++c)
          width[c] = std::max(width[c], rows_[i][c].size());
      const auto line = [&](const std::vector<std::string>& r) {
        std::string s = " ";
        for (std::size_t c = 0; c < r.size(); ++c) {
          const std::string pad(width[c] - r[c].size(), ' ');
          // The last column is not padded: long kernel names stay on one line.
          s += left_[c] ? r[c] + (c + 1 < r.size() ? pad : "") : pad + r[c];
          if (c + 1 < r.size()) s += "  ";
        }
        out << s << '\n';
      };
      line(header_);
      for (std::size_t i = 0; i < n; ++i) line(rows_[i]);
    }
    if (n < rows_.size())
      out << "  (" << rows_.size() - n << " more rows; --top N or --json shows them)\n";
  }

 private:
  static std::string escape(const std::string& s) {
    std::string out;
    for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return out;
  }
  std::vector<std::string> header_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

void heading(std::ostream& out, NsysTableStyle style, const std::string& title) {
  out << '\n' << (style == NsysTableStyle::markdown ? "### " : "") << title << "\n";
  if (style == NsysTableStyle::markdown) out << '\n';
}

// ---- JSON

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}
std::string json_number(double v) {
  return std::isfinite(v) ? format_double(v) : "null";
}
std::string json_stats(const DurationStats& d) {
  return "{\"count\": " + std::to_string(d.count) + ", \"total_ns\": " + json_number(d.total_ns) +
         ", \"mean_ns\": " + json_number(d.mean_ns) + ", \"p50_ns\": " + json_number(d.p50_ns) +
         ", \"p99_ns\": " + json_number(d.p99_ns) + ", \"min_ns\": " + json_number(d.min_ns) +
         ", \"max_ns\": " + json_number(d.max_ns) + "}";
}
template <class T, class F>
std::string json_array(const std::vector<T>& v, F&& item) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ",\n    " : "\n    ") + item(v[i]);
  return out + (v.empty() ? "]" : "\n  ]");
}
std::string json_opt(const std::optional<double>& v) {
  return v ? json_number(*v) : "null";
}

// The name each kernel is printed by, per demangled name: the full name, or its short name
// with "(k of n)" where n kernels share it (k in the order of the kernel table).
std::map<std::string, std::string> display_names(const NsysSummary& s, NsysKernelNames names) {
  std::map<std::string, std::vector<std::string>> sharing;  // short name -> full names
  for (const auto& r : s.kernel_rows) {
    auto& list = sharing[r.short_name];
    if (std::find(list.begin(), list.end(), r.name) == list.end()) list.push_back(r.name);
  }
  std::map<std::string, std::string> out;
  for (const auto& [short_name, list] : sharing)
    for (std::size_t k = 0; k < list.size(); ++k) {
      std::string shown = short_name;
      if (names == NsysKernelNames::full)
        shown = list[k];
      else if (list.size() > 1)
        shown += " (" + std::to_string(k + 1) + " of " + std::to_string(list.size()) + ")";
      out[list[k]] = shown;
    }
  return out;
}

}  // namespace

void print_nsys_summary(std::ostream& out, const NsysSummary& s, NsysTableStyle style,
                        std::size_t max_rows, NsysKernelNames names) {
  const bool md = style == NsysTableStyle::markdown;
  const auto field = [&](const char* key, const std::string& value) {
    if (md)
      out << "- **" << key << "**: " << value << '\n';
    else
      out << key << std::string(10 - std::min<std::size_t>(9, std::string(key).size()), ' ')
          << value << '\n';
  };
  field("report", s.report_path);
  std::string exported = s.nsys_version.empty() ? "" : "nsys " + s.nsys_version;
  if (!s.export_schema.empty())
    exported += (exported.empty() ? "" : ", ") + std::string("export schema ") + s.export_schema;
  if (s.session_start_utc_ns)
    exported += (exported.empty() ? "" : "; ") + std::string("session start ") +
                utc(*s.session_start_utc_ns);
  field("export", exported.empty() ? "no export metadata" : exported);
  if (!s.gpus.empty()) field("GPUs", s.gpus);
  std::string domains;
  for (const std::string& d : s.domains) domains += (domains.empty() ? "" : ", ") + domain_name(d);
  field("holds", std::to_string(s.kernels) + " kernels (" + std::to_string(s.kernels_in_ranges) +
                     " launched inside an NVTX range), " + std::to_string(s.memops) +
                     " memcpy/memset, " + std::to_string(s.ranges) + " NVTX ranges, " +
                     std::to_string(s.marks) + " marks" +
                     (domains.empty() ? "" : " (domains: " + domains + ")"));
  if (!s.range_pattern.empty())
    field("range", "only ranges matching '" + s.range_pattern +
                       "' and the GPU operations launched inside them");
  const double span = double(s.last_gpu_ns - s.first_gpu_ns);
  if (s.kernels + s.memops > 0)
    field("GPU", ms(s.kernel_ns) + " ms of kernels, " + ms(s.memop_ns) +
                     " ms of copies/sets; busy " +
                     pct(span > 0 ? s.gpu_busy_ns / (span * std::max(1, s.gpus_used)) : 0) +
                     "% of the " + ms(span) + " ms from the first GPU operation to the last");

  const auto say = [&](const std::string& line) { out << (md ? "" : "  ") << line << '\n'; };
  const std::map<std::string, std::string> shown = display_names(s, names);
  const auto shown_name = [&](const std::string& name, const std::string& short_name) {
    const auto it = shown.find(name);
    if (it != shown.end()) return it->second;
    return names == NsysKernelNames::full ? name : short_name;
  };
  heading(out, style, "Kernels (by total GPU time)");
  Table k({"time %", "total ms", "count", "mean us", "p50 us", "p99 us", "grid x block", "instance",
           "name"},
          {false, false, false, false, false, false, true, true, true});
  for (const auto& r : s.kernel_rows)
    k.add({pct(r.share), ms(r.time.total_ns), std::to_string(r.time.count), us(r.time.mean_ns),
           us(r.time.p50_ns), us(r.time.p99_ns), r.launch.empty() ? "-" : r.launch,
           r.instance.empty() ? "-" : r.instance, shown_name(r.name, r.short_name)});
  if (k.empty()) {
    say("none");
  } else {
    k.print(out, style, max_rows);
    bool shortened = false, shared = false;
    for (const auto& r : s.kernel_rows) {
      shortened = shortened || r.short_name != r.name;
      shared = shared || shown.at(r.name) != r.short_name;
    }
    if (names == NsysKernelNames::short_names && shortened)
      say(std::string("names: base names") +
          (shared ? ", kernels that share one numbered (k of n)" : "") +
          "; --full-names for the demangled ones");
  }

  heading(out, style, "mactune instances (kernels linked by canonical name)");
  if (s.instance_rows.empty()) {
    say(s.tune_db ? "none: no kernel or enclosing range names an instance of the database"
                  : "none linked: pass --db with the tuner's database to link kernels to its "
                    "instances and tune points");
  } else {
    Table t({"instance", "family", "workload", "count", "total ms", "mean us", "p50 us", "p99 us",
             "time %", "modeled MiB", "GB/s", "tuner GB/s"},
            {true, true, true, false, false, false, false, false, false, false, false, false});
    for (const auto& r : s.instance_rows) {
      const auto gb = [](const std::optional<double>& v) { return v ? fixed(*v, 1) : "-"; };
      t.add({r.instance, r.family, r.workload.empty() ? "-" : r.workload,
             std::to_string(r.time.count), ms(r.time.total_ns), us(r.time.mean_ns),
             us(r.time.p50_ns), us(r.time.p99_ns), pct(r.share),
             r.tune_point ? fixed(r.tune_point->modeled_bytes / 1048576.0, 2) : "-",
             gb(r.achieved_gb_per_s()), gb(r.tuned_gb_per_s())});
    }
    t.print(out, style, max_rows);
    for (const auto& r : s.instance_rows)
      out << (md ? "- " : "  ") << r.instance << (r.workload.empty() ? "" : " (" + r.workload + ")")
          << ": "
          << (r.tune_point
                  ? "tune point " + r.tune_point->workload + " on " + r.tune_point->device + " (" +
                        std::to_string(r.tune_point->measurements) +
                        " measurement(s)); GB/s = modeled step bytes / mean kernel time"
                  : r.no_tune_point)
          << '\n';
  }

  heading(out, style, "Memory operations");
  Table m({"kind", "count", "total ms", "mean us", "p50 us", "MiB", "GB/s"},
          {true, false, false, false, false, false, false});
  for (const auto& r : s.memop_rows)
    m.add({r.kind, std::to_string(r.time.count), ms(r.time.total_ns), us(r.time.mean_ns),
           us(r.time.p50_ns), fixed(double(r.bytes) / 1048576.0, 1), fixed(r.gb_per_s(), 2)});
  if (m.empty())
    say("none");
  else
    m.print(out, style, max_rows);

  heading(out, style,
          "NVTX ranges (by total wall time; kernels = those launched inside, nested included)");
  Table g({"range", "domain", "kind", "count", "wall ms", "mean us", "p50 us", "p99 us", "kernels",
           "kernel ms", "busy %", "gap p50 us", "gap p99 us", "gaps ms", "launch p50 us"},
          {true, true, true, false, false, false, false, false, false, false, false, false, false,
           false, false});
  for (const auto& r : s.range_rows) {
    const bool k_in = r.kernels > 0;
    g.add({r.name, domain_name(r.domain), r.kind,
           std::to_string(r.instances) + (r.open ? " (" + std::to_string(r.open) + " open)" : ""),
           ms(r.wall.total_ns), us(r.wall.mean_ns), us(r.wall.p50_ns), us(r.wall.p99_ns),
           std::to_string(r.kernels), k_in ? ms(r.kernel_ns) : "-",
           k_in && r.gpu_span_ns > 0 ? pct(r.gpu_busy_ns / r.gpu_span_ns) : "-",
           r.gaps.count ? us(r.gaps.p50_ns) : "-", r.gaps.count ? us(r.gaps.p99_ns) : "-",
           r.gaps.count ? ms(r.gaps.total_ns) : "-", k_in ? us(r.launch_latency.p50_ns) : "-"});
  }
  if (g.empty())
    say("none");
  else
    g.print(out, style, max_rows);

  std::size_t listed = 0;
  for (const auto& r : s.range_rows) {
    if (r.kernels_inside.empty() || listed++ >= max_rows) continue;
    if (listed == 1)
      heading(out, style, "Kernels inside ranges (share of the range's kernel time)");
    out << (md ? "- " : "  ") << r.name << (r.domain.empty() ? "" : " [" + r.domain + "]") << ": ";
    for (std::size_t i = 0; i < r.kernels_inside.size() && i < 5; ++i) {
      const auto& k_in = r.kernels_inside[i];
      out << (i ? "; " : "") << pct(k_in.share) << "% " << shown_name(k_in.name, k_in.short_name)
          << " x" << k_in.count << " (" << ms(k_in.total_ns) << " ms)";
    }
    if (r.kernels_inside.size() > 5) out << "; " << r.kernels_inside.size() - 5 << " more";
    out << '\n';
  }
  if (!s.notes.empty()) {
    heading(out, style, "Notes on the report");
    for (const std::string& n : s.notes) out << (md ? "- " : "  ") << n << '\n';
  }
}

std::string nsys_summary_json(const NsysSummary& s) {
  std::ostringstream o;
  o << "{\n  \"report\": {\"path\": " << json_string(s.report_path)
    << ", \"nsys_version\": " << json_string(s.nsys_version)
    << ", \"export_schema\": " << json_string(s.export_schema)
    << ", \"gpus\": " << json_string(s.gpus) << ", \"session_start_utc_ns\": "
    << (s.session_start_utc_ns ? std::to_string(*s.session_start_utc_ns) : "null") << "},\n";
  o << "  \"range_pattern\": " << json_string(s.range_pattern)
    << ",\n  \"tune_db\": " << (s.tune_db ? "true" : "false") << ",\n";
  o << "  \"totals\": {\"kernels\": " << s.kernels << ", \"memops\": " << s.memops
    << ", \"ranges\": " << s.ranges << ", \"marks\": " << s.marks
    << ", \"kernels_in_ranges\": " << s.kernels_in_ranges
    << ", \"kernel_ns\": " << json_number(s.kernel_ns)
    << ", \"memop_ns\": " << json_number(s.memop_ns) << ", \"first_gpu_ns\": " << s.first_gpu_ns
    << ", \"last_gpu_ns\": " << s.last_gpu_ns << ", \"gpu_busy_ns\": " << json_number(s.gpu_busy_ns)
    << ", \"gpus_used\": " << s.gpus_used << ", \"domains\": "
    << json_array(s.domains, [](const std::string& d) { return json_string(d); }) << "},\n";
  o << "  \"kernels\": " << json_array(s.kernel_rows, [](const NsysKernelRow& r) {
    return "{\"name\": " + json_string(r.name) + ", \"short_name\": " + json_string(r.short_name) +
           ", \"instance\": " + json_string(r.instance) + ", \"launch\": " + json_string(r.launch) +
           ", \"time\": " + json_stats(r.time) + ", \"share\": " + json_number(r.share) + "}";
  }) << ",\n";
  o << "  \"instances\": " << json_array(s.instance_rows, [](const NsysInstanceRow& r) {
    std::string tp = "null";
    if (r.tune_point)
      tp = "{\"workload\": " + json_string(r.tune_point->workload) +
           ", \"device\": " + json_string(r.tune_point->device) +
           ", \"modeled_bytes\": " + json_number(r.tune_point->modeled_bytes) +
           ", \"median_s\": " + json_number(r.tune_point->median_s) +
           ", \"measurements\": " + std::to_string(r.tune_point->measurements) + "}";
    return "{\"instance\": " + json_string(r.instance) + ", \"family\": " + json_string(r.family) +
           ", \"workload\": " + json_string(r.workload) + ", \"time\": " + json_stats(r.time) +
           ", \"share\": " + json_number(r.share) + ", \"tune_point\": " + tp +
           ", \"no_tune_point\": " + json_string(r.no_tune_point) +
           ", \"achieved_gb_per_s\": " + json_opt(r.achieved_gb_per_s()) +
           ", \"tuned_gb_per_s\": " + json_opt(r.tuned_gb_per_s()) + "}";
  }) << ",\n";
  o << "  \"memops\": " << json_array(s.memop_rows, [](const NsysMemopRow& r) {
    return "{\"kind\": " + json_string(r.kind) + ", \"time\": " + json_stats(r.time) +
           ", \"bytes\": " + std::to_string(r.bytes) +
           ", \"gb_per_s\": " + json_number(r.gb_per_s()) + "}";
  }) << ",\n";
  o << "  \"ranges\": " << json_array(s.range_rows, [](const NsysRangeRow& r) {
    return "{\"name\": " + json_string(r.name) + ", \"domain\": " + json_string(r.domain) +
           ", \"kind\": " + json_string(r.kind) +
           ", \"instances\": " + std::to_string(r.instances) +
           ", \"open\": " + std::to_string(r.open) + ", \"wall\": " + json_stats(r.wall) +
           ", \"kernels\": " + std::to_string(r.kernels) +
           ", \"kernel_ns\": " + json_number(r.kernel_ns) +
           ", \"gpu_span_ns\": " + json_number(r.gpu_span_ns) +
           ", \"gpu_busy_ns\": " + json_number(r.gpu_busy_ns) +
           ", \"gaps\": " + json_stats(r.gaps) +
           ", \"launch_latency\": " + json_stats(r.launch_latency) + ", \"kernels_inside\": " +
           json_array(r.kernels_inside,
                      [](const NsysRangeKernel& k) {
                        return "{\"name\": " + json_string(k.name) +
                               ", \"short_name\": " + json_string(k.short_name) +
                               ", \"instance\": " + json_string(k.instance) +
                               ", \"count\": " + std::to_string(k.count) +
                               ", \"total_ns\": " + json_number(k.total_ns) +
                               ", \"share\": " + json_number(k.share) + "}";
                      }) +
           "}";
  }) << ",\n";
  o << "  \"notes\": " << json_array(s.notes, [](const std::string& n) { return json_string(n); })
    << "\n}\n";
  return o.str();
}

}  // namespace mactune::db
