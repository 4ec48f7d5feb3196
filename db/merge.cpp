#include "db/merge.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "db/db_error.h"
#include "kernels/file_io.h"

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

// How one table's rows are copied: the columns that hold row ids of other tables are
// recomputed from the destination through natural-key joins; every other column (read from
// the live schema, so later migrations need no change here) is copied as it is.
struct CopySpec {
  std::string table;
  std::vector<std::pair<std::string, std::string>> mapped;  // column -> expression
  std::string joins;                                        // FROM src.<table> s <joins>
  std::string conflict;                                     // ON CONFLICT ...
};

// Natural-key joins from a source row id column onto the destination's row.
std::string join_device(const std::string& col, const std::string& a) {
  return " JOIN src.devices s" + a + " ON s" + a + ".id = s." + col + " JOIN main.devices " + a +
         " ON " + a + ".fingerprint = s" + a + ".fingerprint";
}
std::string join_build(const std::string& col, const std::string& a, bool optional) {
  const std::string j = optional ? " LEFT JOIN" : " JOIN";
  return j + " src.builds s" + a + " ON s" + a + ".id = s." + col + j + " main.builds " + a +
         " ON " + a + ".git_revision = s" + a + ".git_revision AND " + a + ".compiler = s" + a +
         ".compiler AND " + a + ".registry_hash = s" + a + ".registry_hash";
}
std::string join_instance(const std::string& col, const std::string& a, bool optional) {
  const std::string j = optional ? " LEFT JOIN" : " JOIN";
  return j + " src.instances s" + a + " ON s" + a + ".id = s." + col + j + " main.instances " + a +
         " ON " + a + ".name = s" + a + ".name";
}
std::string join_by(const std::string& table, const std::string& col, const std::string& a,
                    const std::string& key, bool optional) {
  const std::string j = optional ? " LEFT JOIN" : " JOIN";
  return j + " src." + table + " s" + a + " ON s" + a + ".id = s." + col + j + " main." + table +
         " " + a + " ON " + a + "." + key + " = s" + a + "." + key;
}

// A launch row: by backend and key.
std::string join_launch(const std::string& col, const std::string& a) {
  return " LEFT JOIN src.launches s" + a + " ON s" + a + ".id = s." + col +
         " LEFT JOIN main.launches " + a + " ON " + a + ".backend = s" + a + ".backend AND " + a +
         ".key = s" + a + ".key";
}
// A measurement row (a decision's reference, `source` its id in the source): by its point key,
// each id in it mapped through its own natural key. Measurements are copied before decisions,
// so the row is there.
std::string join_measurement(const std::string& source, const std::string& a) {
  const std::string s = "s" + a;
  return " LEFT JOIN src.measurements " + s + " ON " + s + ".id = " + source +
         " LEFT JOIN src.devices " + s + "d ON " + s + "d.id = " + s + ".device_id" +
         " LEFT JOIN main.devices " + a + "d ON " + a + "d.fingerprint = " + s + "d.fingerprint" +
         " LEFT JOIN src.builds " + s + "b ON " + s + "b.id = " + s + ".build_id" +
         " LEFT JOIN main.builds " + a + "b ON " + a + "b.git_revision = " + s +
         "b.git_revision AND " + a + "b.compiler = " + s + "b.compiler AND " + a +
         "b.registry_hash = " + s + "b.registry_hash" + " LEFT JOIN src.instances " + s + "i ON " +
         s + "i.id = " + s + ".instance_id" + " LEFT JOIN main.instances " + a + "i ON " + a +
         "i.name = " + s + "i.name" + " LEFT JOIN src.workloads " + s + "w ON " + s +
         "w.id = " + s + ".workload_id" + " LEFT JOIN main.workloads " + a + "w ON " + a +
         "w.key = " + s + "w.key" + " LEFT JOIN main.measurements " + a + " ON " + a +
         ".device_id = " + a + "d.id AND " + a + ".build_id = " + a + "b.id AND " + a +
         ".instance_id = " + a + "i.id AND " + a + ".params = " + s + ".params AND " + a +
         ".workload_id = " + a + "w.id AND " + a + ".policy = " + s + ".policy AND " + a +
         ".cold = " + s + ".cold";
}

// A decision's tie_set with each entry's measurement_id mapped like the decision's own (an entry
// whose row is not found keeps no id), in the source's order.
std::string mapped_tie_set() {
  return "(SELECT coalesce(json_group_array(json(e)), '[]') FROM (SELECT CASE WHEN"
         " json_extract(t.value, '$.measurement_id') IS NULL THEN t.value ELSE json_set(t.value,"
         " '$.measurement_id', tm.id) END AS e FROM json_each(s.tie_set) t" +
         join_measurement("json_extract(t.value, '$.measurement_id')", "tm") + " ORDER BY t.key))";
}

// "SET c = excluded.c, ..." over every non-key column of a table.
std::string set_all(const std::vector<std::string>& columns, const std::set<std::string>& keep) {
  std::string out;
  for (const auto& c : columns) {
    if (keep.count(c)) continue;
    out += (out.empty() ? " SET " : ", ") + c + " = excluded." + c;
  }
  return out;
}

std::vector<std::string> columns_of(const Connection& c, const std::string& table) {
  auto s = c.prepare("SELECT name FROM pragma_table_info(?1, 'main') ORDER BY cid");
  s.bind(1, table);
  std::vector<std::string> out;
  while (s.step())
    if (s.text(0) != "id") out.push_back(s.text(0));
  return out;
}

std::vector<CopySpec> copy_specs(const Connection& c) {
  const auto cols = [&](const char* t) { return columns_of(c, t); };
  const std::string point = "device_id, build_id, instance_id, params, workload_id, policy, cold";
  return {
      {"devices", {}, "", "ON CONFLICT (fingerprint) DO NOTHING"},
      {"builds", {}, "", "ON CONFLICT (git_revision, compiler, registry_hash) DO NOTHING"},
      {"instances", {}, "", "ON CONFLICT (name) DO NOTHING"},
      {"workloads", {}, "", "ON CONFLICT (key) DO NOTHING"},
      {"launches", {}, "", "ON CONFLICT (backend, key) DO NOTHING"},
      {"runs",
       {{"device_id", "d.id"}, {"build_id", "b.id"}},
       join_device("device_id", "d") + join_build("build_id", "b", false),
       // A run merged while it was still going is completed by a later merge.
       "ON CONFLICT (run_key) DO UPDATE SET status = excluded.status,"
       " finished_at = excluded.finished_at"
       " WHERE runs.finished_at IS NULL AND excluded.finished_at IS NOT NULL"},
      {"measurements",
       {{"device_id", "d.id"},
        {"build_id", "b.id"},
        {"instance_id", "i.id"},
        {"workload_id", "w.id"},
        {"run_id", "r.id"},
        {"launch_id", "l.id"}},
       join_device("device_id", "d") + join_build("build_id", "b", false) +
           join_instance("instance_id", "i", false) +
           join_by("workloads", "workload_id", "w", "key", false) +
           join_by("runs", "run_id", "r", "run_key", true) + join_launch("launch_id", "l"),
       "ON CONFLICT (" + point + ") DO UPDATE" +
           set_all(cols("measurements"), {"device_id", "build_id", "instance_id", "params",
                                          "workload_id", "policy", "cold"}) +
           " WHERE excluded.status = 'ok' AND (measurements.status = 'failed' OR"
           " (measurements.partial = 1 AND excluded.partial = 0))"},
      {"best_configs",
       {{"device_id", "d.id"},
        {"build_id", "b.id"},
        {"instance_id", "i.id"},
        {"measurement_id", "cm.id"},
        {"tie_set", mapped_tie_set()}},
       join_device("device_id", "d") + join_build("build_id", "b", true) +
           join_instance("instance_id", "i", false) + join_measurement("s.measurement_id", "cm"),
       "ON CONFLICT (device_id, bucket, family, policy) DO UPDATE" +
           set_all(cols("best_configs"), {"device_id", "bucket", "family", "policy"}) +
           " WHERE excluded.decided_at > best_configs.decided_at"},
      {"break_even",
       {{"device_id", "d.id"},
        {"build_id", "b.id"},
        {"mac_instance_id", "mi.id"},
        {"full_instance_id", "fi.id"},
        {"mac_measurement_id", "mm.id"},
        {"full_measurement_id", "fm.id"}},
       join_device("device_id", "d") + join_build("build_id", "b", true) +
           join_instance("mac_instance_id", "mi", true) +
           join_instance("full_instance_id", "fi", true) +
           join_measurement("s.mac_measurement_id", "mm") +
           join_measurement("s.full_measurement_id", "fm"),
       "ON CONFLICT (device_id, bucket, policy) DO UPDATE" +
           set_all(cols("break_even"), {"device_id", "bucket", "policy"}) +
           " WHERE excluded.decided_at > break_even.decided_at"},
      {"fidelity",
       {{"build_id", "b.id"}},
       join_build("build_id", "b", true),
       "ON CONFLICT (trace_hash, layer, settings) DO UPDATE" +
           set_all(cols("fidelity"), {"trace_hash", "layer", "settings"}) +
           " WHERE excluded.recorded_at > fidelity.recorded_at"},
      {"nsys_reports", {}, "", "ON CONFLICT (content_hash) DO NOTHING"},
      {"nsys_kernels",
       {{"report_id", "p.id"}, {"instance_id", "i.id"}},
       join_by("nsys_reports", "report_id", "p", "content_hash", false) +
           join_instance("instance_id", "i", true),
       "ON CONFLICT (report_id, seq) DO NOTHING"},
      {"nsys_memops",
       {{"report_id", "p.id"}},
       join_by("nsys_reports", "report_id", "p", "content_hash", false),
       "ON CONFLICT (report_id, kind, seq) DO NOTHING"},
      {"nsys_ranges",
       {{"report_id", "p.id"}, {"instance_id", "i.id"}},
       join_by("nsys_reports", "report_id", "p", "content_hash", false) +
           join_instance("instance_id", "i", true),
       "ON CONFLICT (report_id, seq) DO NOTHING"},
  };
}

std::string copy_sql(const Connection& c, const CopySpec& spec) {
  std::set<std::string> mapped;
  for (const auto& [col, expr] : spec.mapped) mapped.insert(col);
  std::string into, select;
  for (const auto& col : columns_of(c, spec.table)) {
    if (mapped.count(col)) continue;
    into += (into.empty() ? "" : ", ") + col;
    select += (select.empty() ? "s." : ", s.") + col;
  }
  for (const auto& [col, expr] : spec.mapped) {
    into += ", " + col;
    select += ", " + expr;
  }
  // "WHERE true" tells the parser that ON CONFLICT is not a join constraint.
  return "INSERT INTO main." + spec.table + " (" + into + ") SELECT " + select + " FROM src." +
         spec.table + " s" + spec.joins + " WHERE true ORDER BY s.id " + spec.conflict;
}

// Rows are copied through natural-key joins, so a row whose foreign key names no row would be
// dropped without a word: such a source (changed by hand, or damaged; mactune writes with
// foreign keys on) is refused, naming the table, before anything is copied.
void check_foreign_keys(const Connection& c, const std::string& schema, const std::string& source) {
  auto s = c.prepare("PRAGMA " + schema + ".foreign_key_check");
  std::int64_t rows = 0, row = 0;
  std::string table, parent;
  while (s.step())
    if (rows++ == 0) {
      table = s.text(0);
      row = s.int64(1);
      parent = s.text(2);
    }
  if (rows > 0)
    input_error("cannot merge '", source, "': ", rows, " row(s) refer to rows it does not hold",
                " (e.g. row ", row, " of table ", table, " names a row of ", parent,
                " that does not exist); it was changed by hand or is damaged: repair or delete "
                "those rows, then merge again (nothing was merged)");
}

void check_instances_agree(const Connection& c, const std::string& source) {
  auto s = c.prepare(
      "SELECT s.name, s.backend || '/' || s.family || ' {' || s.config || '}',"
      " m.backend || '/' || m.family || ' {' || m.config || '}'"
      " FROM src.instances s JOIN main.instances m ON m.name = s.name"
      " WHERE s.backend != m.backend OR s.family != m.family OR s.config != m.config LIMIT 1");
  if (s.step())
    input_error("cannot merge '", source, "': instance '", s.text(0), "' is ", s.text(1),
                " there but ", s.text(2), " here");
}

// Attaches the source read-only the way Store::open reads it (read_only_uri: no -wal or -shm
// left beside it), as immutable when its folder cannot hold a WAL index.
void attach_source(Connection& c, const std::string& path) {
  const std::string abs = fs::absolute(path).string();
  c.exec("ATTACH DATABASE " + sql_literal(read_only_uri(path)) + " AS src");
  try {
    c.scalar_int("SELECT COUNT(*) FROM src.sqlite_master");
  } catch (const SqliteError&) {
    c.exec("DETACH DATABASE src");
    c.exec("ATTACH DATABASE " + sql_literal(file_uri(abs, "immutable=1")) + " AS src");
  }
}

void remove_database_files(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
}

}  // namespace

std::int64_t MergeStats::total() const {
  std::int64_t n = 0;
  for (const auto& [t, k] : changed) n += k;
  return n;
}

std::int64_t MergeStats::of(const std::string& table) const {
  for (const auto& [t, k] : changed)
    if (t == table) return k;
  return 0;
}

namespace {
MergeStats merge_one(Store& dest, const std::string& source_path, bool checked);
}

MergeStats merge_into(Store& dest, const std::string& source_path) {
  return merge_one(dest, source_path, false);
}

namespace {
MergeStats merge_one(Store& dest, const std::string& source_path, bool checked) {
  MergeStats stats;
  for (const auto& t : table_names()) stats.changed.emplace_back(t, 0);
  std::error_code ec;
  if (fs::equivalent(source_path, dest.path(), ec)) {
    stats.same_file = true;
    return stats;
  }
  // Validates the source (exists, is an intact database at this schema version).
  if (!checked) Store::open(source_path, {.mode = OpenMode::read_only, .verify = true});

  Connection& c = dest.connection();
  attach_source(c, source_path);
  try {
    if (!checked) check_foreign_keys(c, "src", source_path);
    check_instances_agree(c, source_path);
    Transaction t(c);
    for (const CopySpec& spec : copy_specs(c)) {
      c.exec(copy_sql(c, spec));
      for (auto& [table, n] : stats.changed)
        if (table == spec.table) n += c.changes();
    }
    t.commit();
  } catch (...) {
    sqlite3_exec(c.handle(), "DETACH DATABASE src", nullptr, nullptr, nullptr);
    throw;
  }
  c.exec("DETACH DATABASE src");
  return stats;
}
}  // namespace

std::vector<MergedInput> merge_files(const std::vector<std::string>& inputs,
                                     const std::string& output) {
  // Every input whole before the output is touched.
  for (const std::string& in : inputs) {
    const Store s = Store::open(in, {.mode = OpenMode::read_only, .verify = true});
    check_foreign_keys(s.connection(), "main", in);
  }
  std::error_code ec;
  std::vector<MergedInput> out;
  if (fs::exists(output, ec)) {
    // Added to in place, one transaction per input: another process may have the file open
    // (a shard still writing, a reader), which a renamed copy would cut off.
    Store dest = Store::open(output);
    for (const std::string& in : inputs) out.push_back({in, merge_one(dest, in, true)});
    return out;
  }
  // A new output is built under a temporary name beside it and renamed when complete, so a
  // failure leaves no output (and no temporary) at all.
  const std::string tmp = output + ".tmp-" + std::to_string(getpid());
  // A signal removes them (kernels/file_io.h): registered before any of them exists.
  std::vector<TemporaryName> registered;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) registered.emplace_back(tmp + suffix);
  try {
    {
      Store dest = Store::open(tmp);
      for (const std::string& in : inputs) out.push_back({in, merge_one(dest, in, true)});
    }  // closed: its WAL is checkpointed into the file and removed
    fs::rename(tmp, output, ec);
    if (ec) input_error("cannot create '", output, "': ", ec.message());
  } catch (const DbError& e) {
    remove_database_files(tmp);
    throw e.for_file(output);
  } catch (...) {
    remove_database_files(tmp);
    throw;
  }
  return out;
}

}  // namespace mactune::db
