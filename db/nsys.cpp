#include "db/nsys.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "db/nsys_timeline.h"

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

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
    if (names_.empty()) return 0;
    const std::string name = find_instance_token(text, names_);
    return name.empty() ? 0 : ids_.at(name);
  }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, Id> ids_;
};

// The columns every GPU operation table shares, bound from `op` at parameters first..first+7:
// start, end, gpu, stream, correlation, pid, launch tid, launch start (8 parameters).
void bind_op(Statement& s, int first, const nsys::GpuOp& op) {
  s.bind(first, op.start).bind(first + 1, op.end).bind(first + 2, op.gpu);
  s.bind(first + 3, op.stream).bind(first + 4, op.correlation).bind(first + 5, op.pid);
  if (op.launch) {
    s.bind(first + 6, nsys::tid_of(op.launch->global_tid)).bind(first + 7, op.launch->start);
  } else {
    s.bind_null(first + 6).bind_null(first + 7);
  }
}
void bind_range(Statement& s, int first, const nsys::GpuOp& op) {
  if (op.range)
    s.bind(first, op.range->name).bind(first + 1, op.range->seq);
  else
    s.bind_null(first).bind_null(first + 1);
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
  // A report stored already (by an earlier import, or by another process importing the same
  // file at the same moment) is reported as such, never as a UNIQUE constraint failure.
  const auto stored = [&] {
    auto q = c.prepare(
        "SELECT id, kernels, memops, ranges, export_schema, nsys_version FROM nsys_reports"
        " WHERE content_hash = ?1");
    q.bind(1, hash);
    if (!q.step()) return false;
    result.already_imported = true;
    result.report_id = q.int64(0);
    result.kernels = q.int64(1);
    result.memops = q.int64(2);
    result.ranges = q.int64(3);
    result.export_schema = q.text(4);
    result.nsys_version = q.text(5);
    result.notes.clear();
    return true;
  };
  if (stored()) return result;

  const nsys::Export report(report_path);
  result.export_schema = report.schema_version();
  result.nsys_version = report.nsys_version();
  const InstanceIndex index(c);
  nsys::Timeline t =
      nsys::read_timeline(report, [&](std::string_view name) { return index.link(name); });
  result.notes = std::move(t.notes);

  Transaction tx(c);  // BEGIN IMMEDIATE: the write lock, so the check below is final
  if (stored()) return result;
  auto rep = c.prepare(
      "INSERT INTO nsys_reports (content_hash, path, export_schema, session_start_utc_ns,"
      " kernels, ranges, imported_at, nsys_version, gpus, memops)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  rep.bind(1, hash).bind(2, fs::absolute(report_path).string()).bind(3, result.export_schema);
  rep.bind(4, report.session_start_utc_ns()).bind(5, static_cast<std::int64_t>(t.kernels.size()));
  rep.bind(6, static_cast<std::int64_t>(t.ranges.size())).bind(7, now_utc());
  rep.bind(8, result.nsys_version).bind(9, report.gpus());
  rep.bind(10, static_cast<std::int64_t>(t.memops.size())).run();
  result.report_id = c.last_insert_rowid();

  auto ins_range = c.prepare(
      "INSERT INTO nsys_ranges (report_id, seq, kind, start_ns, end_ns, name, domain, pid, tid,"
      " instance_id, end_tid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  for (const nsys::Range& g : t.ranges) {
    ins_range.reset();
    ins_range.bind(1, result.report_id).bind(2, g.seq).bind(3, g.kind).bind(4, g.start);
    ins_range.bind(5, g.end).bind(6, g.name).bind(7, g.domain);
    if (g.global_tid)
      ins_range.bind(8, nsys::pid_of(*g.global_tid)).bind(9, nsys::tid_of(*g.global_tid));
    else
      ins_range.bind_null(8).bind_null(9);
    ins_range.bind_id(10, g.instance);
    if (g.end_global_tid && g.end_global_tid != g.global_tid)
      ins_range.bind(11, nsys::tid_of(*g.end_global_tid));
    else
      ins_range.bind_null(11);
    ins_range.run();
    result.ranges_linked += g.instance != 0;
  }
  auto ins_kernel = c.prepare(
      "INSERT INTO nsys_kernels (report_id, seq, start_ns, end_ns, gpu, stream_id,"
      " correlation_id, pid, launch_tid, launch_start_ns, nvtx_range, nvtx_range_seq, name,"
      " short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread,"
      " static_smem_bytes, dynamic_smem_bytes, graph_node_id, instance_id) VALUES (?1, ?2, ?3,"
      " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,"
      " ?23, ?24, ?25)");
  for (const nsys::Kernel& k : t.kernels) {
    ins_kernel.reset();
    ins_kernel.bind(1, result.report_id).bind(2, k.seq);
    bind_op(ins_kernel, 3, k);
    bind_range(ins_kernel, 11, k);
    ins_kernel.bind(13, k.name).bind(14, k.short_name);
    for (int d = 0; d < 6; ++d) ins_kernel.bind(15 + d, k.dims[d]);
    ins_kernel.bind(21, k.registers).bind(22, k.static_smem).bind(23, k.dynamic_smem);
    ins_kernel.bind(24, k.graph_node).bind_id(25, k.instance).run();
    result.kernels_linked += k.instance != 0;
    result.kernels_in_ranges += k.range != nullptr;
  }
  auto ins_memop = c.prepare(
      "INSERT INTO nsys_memops (report_id, kind, seq, start_ns, end_ns, gpu, stream_id,"
      " correlation_id, pid, launch_tid, launch_start_ns, nvtx_range, nvtx_range_seq, bytes,"
      " copy_kind, src_kind, dst_kind, value, graph_node_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,"
      " ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)");
  for (const nsys::Memop& m : t.memops) {
    ins_memop.reset();
    ins_memop.bind(1, result.report_id).bind(2, m.kind).bind(3, m.seq);
    bind_op(ins_memop, 4, m);
    bind_range(ins_memop, 12, m);
    ins_memop.bind(14, m.bytes).bind(15, m.copy_kind).bind(16, m.src_kind);
    ins_memop.bind(17, m.dst_kind).bind(18, m.value).bind(19, m.graph_node).run();
  }
  tx.commit();
  result.kernels = static_cast<std::int64_t>(t.kernels.size());
  result.memops = static_cast<std::int64_t>(t.memops.size());
  result.ranges = static_cast<std::int64_t>(t.ranges.size());
  return result;
}

}  // namespace mactune::db
