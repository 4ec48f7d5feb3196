#include "db/nsys.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKernelTable = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr const char* kRuntimeTable = "CUPTI_ACTIVITY_KIND_RUNTIME";
constexpr const char* kNvtxTable = "NVTX_EVENTS";

enum NvtxEventType : int { kMark = 34, kPushPop = 59, kStartEnd = 60, kDomainCreate = 75 };

// nsys packs process and thread ids into one integer.
std::int64_t pid_of(std::int64_t global_id) {
  return (global_id >> 24) & 0xFFFFFF;
}
std::int64_t tid_of(std::int64_t global_tid) {
  return global_tid & 0xFFFFFF;
}

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MACTUNE_REQUIRE(in, "cannot read nsys report '", path, "'");
  std::uint64_t h = 1469598103934665603ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i)
      h = (h ^ static_cast<unsigned char>(buf[static_cast<std::size_t>(i)])) * 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// The report, opened read-only, with its tables and their columns.
class Report {
 public:
  explicit Report(const std::string& path) : path_(path) {
    const std::string abs = fs::absolute(path).string();
    try {
      c_ = Connection(file_uri(abs, "mode=ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      load_schema();
    } catch (const SqliteError& e) {
      if (e.primary_code() == SQLITE_NOTADB || e.primary_code() == SQLITE_CORRUPT)
        input_error("'", path, "' is not an SQLite file (", sqlite3_errstr(e.primary_code()),
                    "); export the report with `nsys export --type sqlite`");
      // A read-only directory cannot hold a WAL index; nsys writes rollback-journal files,
      // which immutable mode reads as they are.
      c_ = Connection(file_uri(abs, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      load_schema();
    }
  }

  bool has(const std::string& table) const { return columns_.count(table) != 0; }
  bool has(const std::string& table, const std::string& column) const {
    const auto it = columns_.find(table);
    return it != columns_.end() && it->second.count(column) != 0;
  }
  void require(const std::string& table, const std::string& column) const {
    MACTUNE_REQUIRE(has(table, column), "nsys report '", path_, "': table ", table,
                    " has no column '", column, "' (nsys export schema ", schema_version(), ")");
  }
  // `column` qualified by `alias` when the table has it, else NULL: lets one query serve
  // every export version.
  std::string col(const std::string& table, const std::string& alias,
                  const std::string& column) const {
    return has(table, column) ? alias + "." + sql_ident(column) : "NULL";
  }
  // A name column: an id into StringIds (the usual case), or text in older exports.
  std::string name_expr(const std::string& table, const std::string& alias,
                        const std::string& column, std::string& joins) const {
    if (!has(table, column)) return "NULL";
    const std::string ref = alias + "." + sql_ident(column);
    if (!has("StringIds")) return "CAST(" + ref + " AS TEXT)";
    const std::string s = "s_" + column;
    joins += " LEFT JOIN StringIds " + s + " ON " + s + ".id = " + ref;
    return "COALESCE(" + s + ".value, CAST(" + ref + " AS TEXT))";
  }

  std::string schema_version() const {
    if (!has("META_DATA_EXPORT", "name") || !has("META_DATA_EXPORT", "value")) return "";
    auto s = c_.prepare("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'");
    return s.step() ? s.text(0) : "";
  }
  std::optional<std::int64_t> session_start_utc_ns() const {
    if (!has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) return std::nullopt;
    auto s = c_.prepare("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
    return s.step() ? s.opt_int64(0) : std::nullopt;
  }

  const Connection& conn() const { return c_; }
  const std::string& path() const { return path_; }

 private:
  void load_schema() {
    auto t = c_.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
    while (t.step()) columns_[t.text(0)];
    for (auto& [table, cols] : columns_) {
      auto s = c_.prepare("SELECT name FROM pragma_table_info(?1)");
      s.bind(1, table);
      while (s.step()) cols.insert(s.text(0));
    }
  }

  std::string path_;
  Connection c_;
  std::map<std::string, std::set<std::string>> columns_;
};

struct Range {
  std::int64_t seq, start, end;  // end: -1 for marks
  std::string kind, name, domain;
  std::int64_t pid = -1, tid = -1, global_tid = -1;
  Id instance = 0;
};

struct Kernel {
  std::int64_t seq, start, end;
  std::optional<std::int64_t> gpu, stream, correlation, global_pid;
  std::string name, short_name;
  std::optional<std::int64_t> dims[6], registers, static_smem, dynamic_smem, graph_node;
  std::optional<std::int64_t> launch_global_tid, launch_start;
  std::optional<std::string> nvtx_range;
  Id instance = 0;
};

class InstanceIndex {
 public:
  explicit InstanceIndex(const Connection& c) {
    auto s = c.prepare("SELECT name, id FROM instances ORDER BY name");
    while (s.step()) {
      names_.push_back(s.text(0));
      ids_[s.text(0)] = s.int64(1);
    }
  }
  Id link(std::string_view text) const {
    const std::string name = find_instance_token(text, names_);
    return name.empty() ? 0 : ids_.at(name);
  }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, Id> ids_;
};

std::vector<Range> read_ranges(const Report& r, const InstanceIndex& index) {
  std::vector<Range> out;
  if (!r.has(kNvtxTable)) return out;
  for (const char* c : {"start", "end", "eventType"}) r.require(kNvtxTable, c);
  std::string joins;
  const std::string text = r.has(kNvtxTable, "text") ? "n.text" : "NULL";
  const std::string text_id = r.name_expr(kNvtxTable, "n", "textId", joins);
  auto s = r.conn().prepare("SELECT n.rowid, n.start, n.\"end\", n.eventType, COALESCE(" + text +
                            ", " + text_id + ", ''), " + r.col(kNvtxTable, "n", "domainId") + ", " +
                            r.col(kNvtxTable, "n", "globalTid") + " FROM " + kNvtxTable + " n" +
                            joins + " ORDER BY n.start, n.rowid");
  std::unordered_map<std::int64_t, std::string> domains;
  std::vector<std::pair<Range, std::optional<std::int64_t>>> pending;  // with domain id
  while (s.step()) {
    const int type = s.int32(3);
    if (type == kDomainCreate) {
      if (!s.is_null(5)) domains[s.int64(5)] = s.text(4);
      continue;
    }
    if (type != kMark && type != kPushPop && type != kStartEnd) continue;
    Range g;
    g.seq = s.int64(0);
    g.start = s.int64(1);
    g.end = type == kMark || s.is_null(2) ? -1 : s.int64(2);
    g.kind = type == kMark ? "mark" : type == kPushPop ? "push_pop" : "start_end";
    g.name = s.text(4);
    if (!s.is_null(6)) {
      g.global_tid = s.int64(6);
      g.pid = pid_of(g.global_tid);
      g.tid = tid_of(g.global_tid);
    }
    g.instance = index.link(g.name);
    pending.emplace_back(std::move(g), s.opt_int64(5));
  }
  for (auto& [g, domain] : pending) {
    if (domain && domains.count(*domain)) g.domain = domains[*domain];
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<Kernel> read_kernels(const Report& r, const InstanceIndex& index) {
  std::vector<Kernel> out;
  if (!r.has(kKernelTable)) return out;
  r.require(kKernelTable, "start");
  r.require(kKernelTable, "end");
  MACTUNE_REQUIRE(r.has(kKernelTable, "demangledName") || r.has(kKernelTable, "shortName"),
                  "nsys report '", r.path(), "': table ", kKernelTable,
                  " has neither 'demangledName' nor 'shortName'");
  std::string joins;
  const std::string demangled = r.name_expr(kKernelTable, "k", "demangledName", joins);
  const std::string short_name = r.name_expr(kKernelTable, "k", "shortName", joins);
  std::string sql = "SELECT k.rowid, k.start, k.\"end\", COALESCE(" + demangled + ", " +
                    short_name + ", ''), COALESCE(" + short_name + ", '')";
  for (const char* c : {"deviceId", "streamId", "correlationId", "globalPid", "gridX", "gridY",
                        "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                        "staticSharedMemory", "dynamicSharedMemory", "graphNodeId"})
    sql += ", " + r.col(kKernelTable, "k", c);
  // The launching runtime call, by correlation id within the process.
  const bool runtime = r.has(kKernelTable, "correlationId") &&
                       r.has(kRuntimeTable, "correlationId") && r.has(kRuntimeTable, "globalTid") &&
                       r.has(kRuntimeTable, "start");
  if (runtime) {
    sql += ", rt.globalTid, rt.start";
    joins +=
        std::string(" LEFT JOIN ") + kRuntimeTable + " rt ON rt.correlationId = k.correlationId";
    if (r.has(kKernelTable, "globalPid"))
      joins += " AND (rt.globalTid >> 24) & 16777215 = (k.globalPid >> 24) & 16777215";
  } else {
    sql += ", NULL, NULL";
  }
  auto s =
      r.conn().prepare(sql + " FROM " + kKernelTable + " k" + joins + " ORDER BY k.start, k.rowid");
  while (s.step()) {
    Kernel k;
    k.seq = s.int64(0);
    k.start = s.int64(1);
    k.end = s.int64(2);
    k.name = s.text(3);
    k.short_name = s.text(4);
    k.gpu = s.opt_int64(5);
    k.stream = s.opt_int64(6);
    k.correlation = s.opt_int64(7);
    k.global_pid = s.opt_int64(8);
    for (int d = 0; d < 6; ++d) k.dims[d] = s.opt_int64(9 + d);
    k.registers = s.opt_int64(15);
    k.static_smem = s.opt_int64(16);
    k.dynamic_smem = s.opt_int64(17);
    k.graph_node = s.opt_int64(18);
    k.launch_global_tid = s.opt_int64(19);
    k.launch_start = s.opt_int64(20);
    k.instance = index.link(k.name);
    if (k.instance == 0 && !k.short_name.empty()) k.instance = index.link(k.short_name);
    out.push_back(std::move(k));
  }
  return out;
}

// For each kernel launched on a thread with NVTX ranges: the innermost range open at the
// launch, and the nearest enclosing one that names an instance. One sweep per thread over
// range starts, range ends and launches in time order (ranges include their end points).
void attribute(std::vector<Kernel>& kernels, const std::vector<Range>& ranges) {
  std::unordered_map<std::int64_t, std::vector<const Range*>> by_thread;
  for (const Range& g : ranges)
    if (g.end >= 0 && g.global_tid >= 0) by_thread[g.global_tid].push_back(&g);
  std::unordered_map<std::int64_t, std::vector<Kernel*>> launches;
  for (Kernel& k : kernels)
    if (k.launch_global_tid && k.launch_start && by_thread.count(*k.launch_global_tid))
      launches[*k.launch_global_tid].push_back(&k);
  for (auto& [thread, ks] : launches) {
    auto& rs = by_thread[thread];  // already in (start, seq) order
    std::sort(ks.begin(), ks.end(),
              [](const Kernel* a, const Kernel* b) { return *a->launch_start < *b->launch_start; });
    // Open ranges by (start, seq): the last one is the innermost.
    std::set<std::pair<std::int64_t, std::int64_t>> open;
    std::unordered_map<std::int64_t, const Range*> by_seq;
    using End = std::pair<std::int64_t, std::int64_t>;  // (end, seq)
    std::priority_queue<End, std::vector<End>, std::greater<>> ends;
    std::size_t next = 0;
    for (Kernel* k : ks) {
      const std::int64_t t = *k->launch_start;
      for (; next < rs.size() && rs[next]->start <= t; ++next) {
        open.insert({rs[next]->start, rs[next]->seq});
        by_seq[rs[next]->seq] = rs[next];
        ends.push({rs[next]->end, rs[next]->seq});
      }
      while (!ends.empty() && ends.top().first < t) {
        const Range* g = by_seq[ends.top().second];
        open.erase({g->start, g->seq});
        ends.pop();
      }
      if (open.empty()) continue;
      k->nvtx_range = by_seq[open.rbegin()->second]->name;
      if (k->instance != 0) continue;
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        const Range* g = by_seq[it->second];
        if (g->instance != 0) {
          k->instance = g->instance;
          break;
        }
      }
    }
  }
}

}  // namespace

std::string find_instance_token(std::string_view text,
                                const std::vector<std::string>& sorted_instance_names) {
  const auto word = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
  };
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !word(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && word(text[j])) ++j;
    if (j > i) {
      const std::string token(text.substr(i, j - i));
      if (std::binary_search(sorted_instance_names.begin(), sorted_instance_names.end(), token))
        return token;
    }
    i = j;
  }
  return "";
}

NsysImport import_nsys(Store& dest, const std::string& report_path) {
  std::error_code ec;
  MACTUNE_REQUIRE(fs::is_regular_file(report_path, ec), "nsys report '", report_path,
                  "' does not exist or is not a file");
  NsysImport result;
  const std::string hash = file_hash(report_path);
  Connection& c = dest.connection();
  {
    auto q = c.prepare("SELECT id, kernels, ranges FROM nsys_reports WHERE content_hash = ?1");
    q.bind(1, hash);
    if (q.step()) {
      result.already_imported = true;
      result.report_id = q.int64(0);
      result.kernels = q.int64(1);
      result.ranges = q.int64(2);
      return result;
    }
  }

  const Report report(report_path);
  MACTUNE_REQUIRE(report.has(kKernelTable) || report.has(kNvtxTable) || report.has("StringIds"),
                  "'", report_path, "' is not an nsys SQLite export (no ", kKernelTable, ", ",
                  kNvtxTable, " or StringIds table)");
  result.export_schema = report.schema_version();
  if (!report.has(kKernelTable))
    result.notes.push_back(std::string("no ") + kKernelTable +
                           " table: the report has no kernels (was CUDA traced?)");
  if (!report.has(kNvtxTable))
    result.notes.push_back(std::string("no ") + kNvtxTable +
                           " table: no NVTX ranges (profile with --trace=cuda,nvtx)");
  if (report.has(kKernelTable) && !report.has(kRuntimeTable, "correlationId"))
    result.notes.push_back(std::string("no ") + kRuntimeTable +
                           " correlation: kernels are not attributed to NVTX ranges");

  const InstanceIndex index(c);
  const std::vector<Range> ranges = read_ranges(report, index);
  std::vector<Kernel> kernels = read_kernels(report, index);
  attribute(kernels, ranges);

  Transaction t(c);
  auto rep = c.prepare(
      "INSERT INTO nsys_reports (content_hash, path, export_schema, session_start_utc_ns,"
      " kernels, ranges, imported_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  rep.bind(1, hash).bind(2, fs::absolute(report_path).string()).bind(3, result.export_schema);
  rep.bind(4, report.session_start_utc_ns()).bind(5, static_cast<std::int64_t>(kernels.size()));
  rep.bind(6, static_cast<std::int64_t>(ranges.size())).bind(7, now_utc()).run();
  result.report_id = c.last_insert_rowid();

  auto ins_range = c.prepare(
      "INSERT INTO nsys_ranges (report_id, seq, kind, start_ns, end_ns, name, domain, pid, tid,"
      " instance_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  for (const Range& g : ranges) {
    ins_range.reset();
    ins_range.bind(1, result.report_id).bind(2, g.seq).bind(3, g.kind).bind(4, g.start);
    if (g.end >= 0) ins_range.bind(5, g.end);
    ins_range.bind(6, g.name).bind(7, g.domain);
    if (g.global_tid >= 0) ins_range.bind(8, g.pid).bind(9, g.tid);
    ins_range.bind_id(10, g.instance).run();
    result.ranges_linked += g.instance != 0;
  }
  auto ins_kernel = c.prepare(
      "INSERT INTO nsys_kernels (report_id, seq, start_ns, end_ns, gpu, stream_id,"
      " correlation_id, pid, name, short_name, grid_x, grid_y, grid_z, block_x, block_y,"
      " block_z, registers_per_thread, static_smem_bytes, dynamic_smem_bytes, graph_node_id,"
      " launch_tid, nvtx_range, instance_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
      " ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)");
  for (const Kernel& k : kernels) {
    ins_kernel.reset();
    ins_kernel.bind(1, result.report_id).bind(2, k.seq).bind(3, k.start).bind(4, k.end);
    ins_kernel.bind(5, k.gpu).bind(6, k.stream).bind(7, k.correlation);
    if (k.global_pid) ins_kernel.bind(8, pid_of(*k.global_pid));
    ins_kernel.bind(9, k.name).bind(10, k.short_name);
    for (int d = 0; d < 6; ++d) ins_kernel.bind(11 + d, k.dims[d]);
    ins_kernel.bind(17, k.registers).bind(18, k.static_smem).bind(19, k.dynamic_smem);
    ins_kernel.bind(20, k.graph_node);
    if (k.launch_global_tid) ins_kernel.bind(21, tid_of(*k.launch_global_tid));
    ins_kernel.bind(22, k.nvtx_range).bind_id(23, k.instance).run();
    result.kernels_linked += k.instance != 0;
    result.kernels_in_ranges += k.nvtx_range.has_value();
  }
  t.commit();
  result.kernels = static_cast<std::int64_t>(kernels.size());
  result.ranges = static_cast<std::int64_t>(ranges.size());
  return result;
}

}  // namespace mactune::db
