#include "db/nsys_timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

namespace mactune::db::nsys {
namespace {

constexpr const char* kKernels = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr const char* kMemcpy = "CUPTI_ACTIVITY_KIND_MEMCPY";
constexpr const char* kMemset = "CUPTI_ACTIVITY_KIND_MEMSET";
constexpr const char* kNvtx = "NVTX_EVENTS";
// CUDA API calls: runtime and driver calls both land in the RUNTIME table (eventClass tells
// them apart); a DRIVER table is read too where an export has one.
constexpr const char* kApiTables[] = {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"};
constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::int64_t>& p) const {
    return std::hash<std::int64_t>()(p.first * 1000003 ^ p.second);
  }
};

struct ApiCall {
  std::int64_t start, end, seq, global_tid;
  bool outer_than(const ApiCall& o) const {
    return start != o.start ? start < o.start : end != o.end ? end > o.end : seq < o.seq;
  }
};

// The launching call of each (process, correlation id), and of each correlation id alone
// for exports whose GPU tables carry no process.
class Launches {
 public:
  Launches(const Export& e, std::vector<std::string>& notes) {
    for (const char* table : kApiTables) {
      if (!e.has(table)) continue;
      if (!e.has(table, "correlationId") || !e.has(table, "start") || !e.has(table, "globalTid")) {
        notes.push_back(std::string(table) +
                        " has no correlationId/start/globalTid: GPU work is not attributed to "
                        "threads or NVTX ranges");
        continue;
      }
      for (const char* c : {"start", "end", "globalTid", "correlationId"})
        e.require_integers(table, c);
      auto s = e.conn().prepare("SELECT rowid, start, " + e.col(table, "a", "end") +
                                ", globalTid, correlationId FROM " + table +
                                " a WHERE correlationId IS NOT NULL AND globalTid IS NOT NULL");
      while (s.step()) {
        const ApiCall call{s.int64(1), s.is_null(2) ? s.int64(1) : s.int64(2), s.int64(0),
                           s.int64(3)};
        const std::int64_t corr = s.int64(4);
        auto [it, fresh] = by_process_.try_emplace({process_key(call.global_tid), corr}, call);
        if (!fresh) {
          ++nested_;
          if (call.outer_than(it->second)) it->second = call;
        }
      }
    }
    for (const auto& [key, call] : by_process_) {
      auto [it, fresh] = by_corr_.try_emplace(key.second, call);
      if (!fresh) ambiguous_.insert(key.second);
    }
    if (nested_ > 0)
      notes.push_back(std::to_string(nested_) +
                      " API calls share a correlation id with an enclosing call (a runtime call "
                      "and its versioned or driver entry point): the outermost is the launch");
    if (by_process_.empty() && e.has(kKernels))
      notes.push_back(
          "no CUDA API calls with correlation ids: kernels are not attributed to NVTX ranges");
  }

  std::optional<Launch> find(std::optional<std::int64_t> process,
                             std::optional<std::int64_t> corr) const {
    if (!corr) return std::nullopt;
    if (process) {
      const auto it = by_process_.find({*process, *corr});
      if (it == by_process_.end()) return std::nullopt;
      return Launch{it->second.global_tid, it->second.start};
    }
    if (ambiguous_.count(*corr)) return std::nullopt;
    const auto it = by_corr_.find(*corr);
    if (it == by_corr_.end()) return std::nullopt;
    return Launch{it->second.global_tid, it->second.start};
  }

 private:
  std::unordered_map<std::pair<std::int64_t, std::int64_t>, ApiCall, PairHash> by_process_;
  std::unordered_map<std::int64_t, ApiCall> by_corr_;
  std::set<std::int64_t> ambiguous_;
  std::int64_t nested_ = 0;
};

std::vector<Range> read_ranges(const Export& e,
                               const std::function<InstanceId(std::string_view)>& link,
                               std::vector<std::string>& notes) {
  std::vector<Range> out;
  if (!e.has(kNvtx)) {
    notes.push_back(std::string("no ") + kNvtx +
                    " table: no NVTX ranges (profile with --trace=cuda,nvtx)");
    return out;
  }
  for (const char* c : {"start", "end", "eventType"}) e.require(kNvtx, c);
  e.require_integers(kNvtx, "start");
  for (const char* c : {"end", "eventType", "domainId", "globalTid", "endGlobalTid"})
    e.require_integers(kNvtx, c);
  std::string joins;
  const std::string text = e.has(kNvtx, "text") ? "NULLIF(n.text, '')" : "NULL";
  const std::string text_id = e.name_expr(kNvtx, "n", "textId", joins);
  auto s =
      e.conn().prepare("SELECT n.rowid, n.start, n.\"end\", n.eventType, COALESCE(" + text + ", " +
                       text_id + ", ''), " + e.col(kNvtx, "n", "domainId") + ", " +
                       e.col(kNvtx, "n", "globalTid") + ", " + e.col(kNvtx, "n", "endGlobalTid") +
                       " FROM " + kNvtx + " n" + joins + " ORDER BY n.start, n.rowid");
  // Domain ids are per process; the default domain (0 or NULL) has no name.
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> domains;
  std::map<std::int64_t, std::set<std::string>> domains_by_id;
  std::vector<std::pair<std::size_t, std::optional<std::int64_t>>> domain_of;  // range -> id
  std::map<std::int64_t, std::int64_t> unknown;                                // id -> rows
  std::int64_t ends_only = 0;
  while (s.step()) {
    const NvtxKind kind = e.nvtx_kind(s.int64(3));
    const auto gtid = s.opt_int64(6);
    if (kind == NvtxKind::domain_create) {
      if (!s.is_null(5)) {
        domains[{gtid ? process_key(*gtid) : -1, s.int64(5)}] = s.text(4);
        domains_by_id[s.int64(5)].insert(s.text(4));
      }
      continue;
    }
    if (kind == NvtxKind::other) continue;
    if (kind == NvtxKind::unknown) {
      ++unknown[s.int64(3)];
      continue;
    }
    if (kind == NvtxKind::end_only) {
      ++ends_only;
      continue;
    }
    Range g;
    g.seq = s.int64(0);
    g.start = s.int64(1);
    g.kind = kind == NvtxKind::mark                                      ? "mark"
             : kind == NvtxKind::push_pop || kind == NvtxKind::push_only ? "push_pop"
                                                                         : "start_end";
    const bool open = kind == NvtxKind::push_only || kind == NvtxKind::start_only;
    if (kind != NvtxKind::mark && !open) g.end = s.opt_int64(2);
    g.name = s.text(4);
    g.global_tid = gtid;
    g.end_global_tid = s.opt_int64(7);
    g.instance = link(g.name);
    domain_of.emplace_back(out.size(), s.opt_int64(5));
    out.push_back(std::move(g));
  }
  for (const auto& [i, id] : domain_of) {
    if (!id || *id == 0) continue;
    Range& g = out[i];
    const auto it = domains.find({g.global_tid ? process_key(*g.global_tid) : -1, *id});
    if (it != domains.end())
      g.domain = it->second;
    else if (domains_by_id[*id].size() == 1)
      g.domain = *domains_by_id[*id].begin();
    else
      g.domain = "domain " + std::to_string(*id);
  }
  for (const auto& [id, n] : unknown)
    notes.push_back(std::to_string(n) + " NVTX events of type " + std::to_string(id) +
                    " not imported: the type is not an NVTX range or mark (" + e.nvtx_ids_source() +
                    ")");
  if (ends_only > 0)
    notes.push_back(std::to_string(ends_only) +
                    " NVTX range ends whose start precedes the capture not imported");
  return out;
}

// The SELECT list shared by the GPU tables: rowid, start, end and the optional columns.
std::string gpu_columns(const Export& e, const char* table) {
  e.require(table, "start");
  e.require(table, "end");
  e.require_integers(table, "start");
  e.require_integers(table, "end");
  for (const char* c : {"deviceId", "streamId", "correlationId", "globalPid", "graphNodeId"})
    e.require_integers(table, c);
  // GPU work that ends before it starts would give a negative time.
  {
    auto s = e.conn().prepare(std::string("SELECT rowid, start, \"end\" FROM ") + table +
                              " WHERE \"end\" < start LIMIT 1");
    if (s.step())
      input_error("nsys report '", e.path(), "': table ", table, " row ", s.int64(0),
                  " ends before it starts (start ", s.int64(1), " ns, end ", s.int64(2),
                  " ns): the export is damaged (", e.describe(), ")");
  }
  std::string sql = "x.rowid, x.start, x.\"end\"";
  for (const char* c : {"deviceId", "streamId", "correlationId", "globalPid", "graphNodeId"})
    sql += ", " + e.col(table, "x", c);
  return sql;
}
constexpr int kFirstExtra = 8;  // columns after gpu_columns()

void fill_op(GpuOp& op, const Statement& s) {
  op.seq = s.int64(0);
  op.start = s.int64(1);
  op.end = s.int64(2);
  op.gpu = s.opt_int64(3);
  op.stream = s.opt_int64(4);
  op.correlation = s.opt_int64(5);
  if (!s.is_null(6)) op.pid = process_key(s.int64(6));  // a process key until resolved
  op.graph_node = s.opt_int64(7);
}

std::vector<Kernel> read_kernels(const Export& e,
                                 const std::function<InstanceId(std::string_view)>& link) {
  std::vector<Kernel> out;
  if (!e.has(kKernels)) return out;
  MACTUNE_REQUIRE(e.has(kKernels, "demangledName") || e.has(kKernels, "shortName") ||
                      e.has(kKernels, "mangledName") || e.has(kKernels, "name"),
                  "nsys report '", e.path(), "': table ", kKernels,
                  " has neither 'demangledName' nor 'shortName' (", e.describe(), ")");
  std::string joins;
  const std::string demangled = e.name_expr(kKernels, "x", "demangledName", joins);
  const std::string short_name = e.name_expr(kKernels, "x", "shortName", joins);
  const std::string mangled = e.name_expr(kKernels, "x", "mangledName", joins);
  const std::string plain = e.name_expr(kKernels, "x", "name", joins);
  std::string sql = "SELECT " + gpu_columns(e, kKernels) + ", COALESCE(" + demangled + ", " +
                    short_name + ", " + plain + ", " + mangled + ", ''), COALESCE(" + short_name +
                    ", '')";
  for (const char* c : {"gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                        "registersPerThread", "staticSharedMemory", "dynamicSharedMemory"})
    sql += ", " + e.col(kKernels, "x", c);
  auto s = e.conn().prepare(sql + " FROM " + kKernels + " x" + joins + " ORDER BY x.rowid");
  while (s.step()) {
    Kernel k;
    fill_op(k, s);
    k.name = s.text(kFirstExtra);
    k.short_name = s.text(kFirstExtra + 1);
    for (int d = 0; d < 6; ++d) k.dims[d] = s.opt_int64(kFirstExtra + 2 + d);
    k.registers = s.opt_int64(kFirstExtra + 8);
    k.static_smem = s.opt_int64(kFirstExtra + 9);
    k.dynamic_smem = s.opt_int64(kFirstExtra + 10);
    k.instance = link(k.name);
    if (k.instance == 0 && !k.short_name.empty()) k.instance = link(k.short_name);
    out.push_back(std::move(k));
  }
  return out;
}

void read_memops(const Export& e, const char* table, const char* kind, std::vector<Memop>& out) {
  if (!e.has(table)) return;
  const bool copy = std::string_view(kind) == "memcpy";
  std::string sql = "SELECT " + gpu_columns(e, table) + ", " + e.col(table, "x", "bytes");
  sql += copy ? ", " + e.col(table, "x", "copyKind") + ", " + e.col(table, "x", "srcKind") + ", " +
                    e.col(table, "x", "dstKind") + ", NULL"
              : ", NULL, " + e.col(table, "x", "memKind") + ", NULL, " + e.col(table, "x", "value");
  auto s = e.conn().prepare(sql + " FROM " + table + " x ORDER BY x.rowid");
  while (s.step()) {
    Memop m;
    fill_op(m, s);
    m.kind = kind;
    m.bytes = s.opt_int64(kFirstExtra);
    if (copy) m.copy_kind = e.memcpy_kind(s.opt_int64(kFirstExtra + 1));
    m.src_kind = e.memory_kind(s.opt_int64(kFirstExtra + 2));
    m.dst_kind = e.memory_kind(s.opt_int64(kFirstExtra + 3));
    m.value = s.opt_int64(kFirstExtra + 4);
    out.push_back(std::move(m));
  }
}

// Innermost first: later start, then earlier end, then later row.
struct Inner {
  bool operator()(const Range* a, const Range* b) const {
    const std::int64_t ea = a->end.value_or(kOpen), eb = b->end.value_or(kOpen);
    if (a->start != b->start) return a->start > b->start;
    if (ea != eb) return ea < eb;
    return a->seq > b->seq;
  }
};

// One time-ordered sweep per process over its ranges and launches (see the header).
void attribute(std::vector<GpuOp*>& ops, const std::vector<Range>& ranges,
               const std::function<void(GpuOp&, const std::vector<const Range*>&)>& on_op) {
  std::unordered_map<std::int64_t, std::vector<const Range*>> by_process;
  for (const Range& g : ranges)
    if (g.is_range() && g.global_tid) by_process[process_key(*g.global_tid)].push_back(&g);
  std::unordered_map<std::int64_t, std::vector<GpuOp*>> launches;
  for (GpuOp* op : ops)
    if (op->launch) launches[process_key(op->launch->global_tid)].push_back(op);
  std::vector<const Range*> chain;
  for (auto& [process, ps] : launches) {
    const auto it = by_process.find(process);
    if (it == by_process.end()) continue;
    auto& rs = it->second;  // (start, seq) order, as read
    std::stable_sort(ps.begin(), ps.end(), [](const GpuOp* a, const GpuOp* b) {
      return a->launch->start < b->launch->start;
    });
    std::set<const Range*, Inner> process_open;
    std::unordered_map<std::int64_t, std::set<const Range*, Inner>> thread_open;
    using End = std::pair<std::int64_t, const Range*>;
    const auto later = [](const End& a, const End& b) { return a.first > b.first; };
    std::priority_queue<End, std::vector<End>, decltype(later)> ends(later);
    const auto set_of = [&](const Range* g) -> std::set<const Range*, Inner>& {
      return g->kind == "start_end" ? process_open : thread_open[*g->global_tid];
    };
    std::size_t next = 0;
    for (GpuOp* op : ps) {
      const std::int64_t t = op->launch->start;
      for (; next < rs.size() && rs[next]->start <= t; ++next) {
        set_of(rs[next]).insert(rs[next]);
        ends.push({rs[next]->end.value_or(kOpen), rs[next]});
      }
      while (!ends.empty() && ends.top().first < t) {
        set_of(ends.top().second).erase(ends.top().second);
        ends.pop();
      }
      chain.assign(process_open.begin(), process_open.end());
      if (const auto th = thread_open.find(op->launch->global_tid); th != thread_open.end())
        chain.insert(chain.end(), th->second.begin(), th->second.end());
      if (chain.empty()) continue;
      std::sort(chain.begin(), chain.end(), Inner());
      op->range = chain.front();
      on_op(*op, chain);
    }
  }
}

}  // namespace

Timeline read_timeline(const Export& e, const std::function<InstanceId(std::string_view)>& link) {
  Timeline t;
  t.ranges = read_ranges(e, link, t.notes);
  t.kernels = read_kernels(e, link);
  read_memops(e, kMemcpy, "memcpy", t.memops);
  read_memops(e, kMemset, "memset", t.memops);
  if (!e.has(kKernels))
    t.notes.push_back(std::string("no ") + kKernels +
                      " table: the report has no kernels (was CUDA traced?)");
  if (e.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE")) {
    const auto n = e.conn().scalar_int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE");
    if (n > 0)
      t.notes.push_back(std::to_string(n) +
                        " CUDA graph launches traced as whole graphs, not imported: profile with "
                        "--cuda-graph-trace=node to see their kernels");
  }

  const Launches launches(e, t.notes);
  std::vector<GpuOp*> kernels, memops;
  std::int64_t unlaunched = 0;
  const auto resolve = [&](GpuOp& op, std::vector<GpuOp*>& launched) {
    op.launch = launches.find(op.pid, op.correlation);
    if (op.pid)
      op.pid = *op.pid & 0xFFFFFF;  // the key's low 24 bits are the pid
    else if (op.launch)
      op.pid = pid_of(op.launch->global_tid);
    if (op.launch)
      launched.push_back(&op);
    else
      ++unlaunched;
  };
  for (Kernel& k : t.kernels) resolve(k, kernels);
  for (Memop& m : t.memops) resolve(m, memops);
  if (unlaunched > 0 && !(kernels.empty() && memops.empty()))
    t.notes.push_back(std::to_string(unlaunched) +
                      " GPU operations without a launching API call in the report");
  // A kernel whose own name names no instance takes the nearest enclosing range's.
  attribute(kernels, t.ranges, [](GpuOp& op, const std::vector<const Range*>& chain) {
    auto& k = static_cast<Kernel&>(op);
    if (k.instance != 0) return;
    for (const Range* g : chain)
      if (g->instance != 0) {
        k.instance = g->instance;
        break;
      }
  });
  attribute(memops, t.ranges, [](GpuOp&, const std::vector<const Range*>&) {});
  return t;
}

}  // namespace mactune::db::nsys
