// `mactune db`: look after result databases.
//   db info --db DB                        schema version, row counts, devices, runs
//   db merge A.db B.db ... -o C.db         merge shards by natural key (idempotent)
//   db export --db DB [--csv] [--table T] [-o FILE]
//   db import-nsys REPORT.sqlite --db DB   kernels, copies and NVTX ranges of an nsys export
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/registry.h"
#include "db/export.h"
#include "db/merge.h"
#include "db/nsys.h"
#include "db/nsys_export.h"
#include "db/store.h"
#include "kernels/file_io.h"
#include "kernels/output_paths.h"

namespace mactune::cli {
namespace {

namespace fs = std::filesystem;

std::string counts_line(const std::vector<std::pair<std::string, std::int64_t>>& counts,
                        bool skip_zero) {
  std::string out;
  for (const auto& [table, n] : counts) {
    if (skip_zero && n == 0) continue;
    out += (out.empty() ? "" : ", ") + table + " " + (skip_zero ? "+" : "") + std::to_string(n);
  }
  return out.empty() ? "nothing new" : out;
}

void print_info(const std::string& path) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  const auto& c = s.connection();
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  std::printf("database  %s\n", path.c_str());
  std::printf("schema    version %d, %.1f MiB\n", s.schema_version(),
              static_cast<double>(ec ? 0 : bytes) / (1 << 20));
  std::printf("rows      %s\n", counts_line(s.table_counts(), false).c_str());

  std::printf("devices\n");
  for (const db::DeviceRow& d : s.devices()) {
    auto q = c.prepare(
        "SELECT COUNT(*), COALESCE(SUM(status = 'failed'), 0) FROM measurements"
        " WHERE device_id = ?1");
    q.bind(1, d.id);
    q.step();
    const auto& f = d.fingerprint;
    std::printf("  %s  %s %s (%d units, %lld GiB, %s%s%s, %d threads): %lld measurements",
                d.digest.c_str(), std::string(name_of(f.backend)).c_str(), f.name.c_str(),
                f.compute_units, f.memory_mib / 1024, f.arch.c_str(), f.runtime.empty() ? "" : ", ",
                f.runtime.c_str(), f.threads, static_cast<long long>(q.int64(0)));
    if (q.int64(1) > 0) std::printf(" (%lld failed)", static_cast<long long>(q.int64(1)));
    std::printf("\n");
  }
  auto runs = c.prepare(
      "SELECT status, COUNT(*), MAX(started_at) FROM runs GROUP BY status ORDER BY status");
  std::string line;
  while (runs.step())
    line += (line.empty() ? "" : ", ") + runs.text(0) + " " + std::to_string(runs.int64(1)) +
            " (last " + runs.text(2) + ")";
  std::printf("runs      %s\n", line.empty() ? "none" : line.c_str());
  auto be = c.prepare("SELECT status, COUNT(*) FROM break_even GROUP BY status ORDER BY status");
  line.clear();
  while (be.step()) line += (line.empty() ? "" : ", ") + be.text(0) + " " + be.text(1);
  std::printf("break-even %s\n", line.empty() ? "none" : line.c_str());
}

void run_merge(const std::vector<std::string>& inputs, const std::string& output) {
  // An input that is the output itself is skipped, not refused: merge adds to its output in
  // place and never replaces it, so `db merge shards/*.db -o shards/all.db` loses nothing
  // (docs/errors.md). The output must still be a database file in an existing folder.
  OutputPaths().output(output, "database", "-o", Output::database).check();
  std::vector<std::pair<std::string, std::int64_t>> total;
  for (const auto& t : db::table_names()) total.emplace_back(t, 0);
  for (const db::MergedInput& m : db::merge_files(inputs, output)) {
    if (m.stats.same_file) {
      std::printf("%s: is the output itself, skipped\n", m.path.c_str());
      continue;
    }
    std::printf("%s: %s\n", m.path.c_str(), counts_line(m.stats.changed, true).c_str());
    for (std::size_t i = 0; i < total.size(); ++i) total[i].second += m.stats.changed[i].second;
  }
  std::printf("-> %s: %s\n", output.c_str(), counts_line(total, true).c_str());
}

void run_export(const std::string& path, const std::string& table, const std::string& output) {
  OutputPaths()
      .input(path, "database", "--db")
      .output(output == "-" ? "" : output, "export", "-o")
      .check();
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  if (output.empty() || output == "-") {
    db::export_csv(s, table, std::cout);
    std::cout.flush();
    return;
  }
  // Written beside the target and renamed: a failed export never leaves half a file.
  AtomicFile f(output, "export");
  std::ostringstream csv;
  const std::int64_t rows = db::export_csv(s, table, csv);
  f.write(csv.str());
  f.commit();
  std::fprintf(stderr, "%s: %lld rows of %s\n", output.c_str(), static_cast<long long>(rows),
               table.c_str());
}

void run_import(const std::string& report, const std::string& path) {
  OutputPaths()
      .input(report, "nsys report")
      .output(path, "database", "--db", Output::database)
      .check();
  // The report is read (and refused when it is not an nsys export) before the database is
  // created or opened for writing: a refused report leaves no new database behind.
  { const db::nsys::Export check(report); }
  db::Store s = db::Store::open(path);
  const db::NsysImport r = db::import_nsys(s, report);
  if (r.already_imported) {
    std::printf(
        "%s: already imported (report %lld: %lld kernels, %lld memcpy/memset, %lld ranges); "
        "nothing added\n",
        report.c_str(), static_cast<long long>(r.report_id), static_cast<long long>(r.kernels),
        static_cast<long long>(r.memops), static_cast<long long>(r.ranges));
    return;
  }
  for (const auto& note : r.notes) std::printf("note: %s\n", note.c_str());
  std::string version = r.nsys_version.empty() ? "" : ", nsys " + r.nsys_version;
  if (!r.export_schema.empty()) version += ", export schema " + r.export_schema;
  std::printf(
      "%s: %lld kernels (%lld linked to instances, %lld inside NVTX ranges), %lld memcpy/memset, "
      "%lld NVTX ranges and marks (%lld linked)%s\n",
      report.c_str(), static_cast<long long>(r.kernels), static_cast<long long>(r.kernels_linked),
      static_cast<long long>(r.kernels_in_ranges), static_cast<long long>(r.memops),
      static_cast<long long>(r.ranges), static_cast<long long>(r.ranges_linked), version.c_str());
}

// Opens the file for writing, which applies every schema step it lacks and brings its settings
// columns up to this build's field tables (db/schema.cpp, db/settings.h), each step in its own
// transaction: what a read-only command (info, export, report, compare) asks for first.
void run_migrate(const std::string& path) {
  int before = -1;
  try {
    const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
    before = s.schema_version();
    std::printf("%s: schema version %d, up to date; nothing to do\n", path.c_str(), before);
    return;
  } catch (const InputError&) {
    // Not readable as it is: an older schema (migrated below), or not a database at all
    // (refused below, by the writable open, with its own message).
  }
  try {
    const db::Connection c(db::file_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    before = db::stored_version(c, path);
  } catch (const Error&) {
  }
  const db::Store s = db::Store::open(path, {.create = false});
  std::printf("%s: schema version %d -> %d\n", path.c_str(), before, s.schema_version());
}

struct DbOptions {
  std::string db_path;
  std::vector<std::string> inputs;
  std::string output;
  std::string table = db::kDefaultExportTable;
  std::string report;
  bool csv = true;
};

void add_db(CLI::App& app) {
  auto opt = std::make_shared<DbOptions>();
  auto* db = app.add_subcommand("db", "Inspect, merge, export and import into result databases");
  db->require_subcommand(1);

  auto* info = db->add_subcommand("info", "Schema version, row counts, devices and runs");
  info->add_option("--db", opt->db_path, "Database file")->required();
  info->callback([opt] { print_info(opt->db_path); });

  auto* migrate = db->add_subcommand(
      "migrate", "Bring a database written by an older mactune up to this build's schema");
  migrate->add_option("--db", opt->db_path, "Database file")->required();
  migrate->callback([opt] { run_migrate(opt->db_path); });

  auto* merge = db->add_subcommand(
      "merge", "Merge databases (e.g. the shards of one sweep) into one, by natural key");
  merge->add_option("inputs", opt->inputs, "Databases to merge")->required();
  merge->add_option("-o,--output", opt->output, "Output database (created or added to)")
      ->required();
  merge->callback([opt] { run_merge(opt->inputs, opt->output); });

  auto* exp = db->add_subcommand("export", "Write a table as CSV");
  exp->add_option("--db", opt->db_path, "Database file")->required();
  exp->add_flag("--csv", opt->csv, "CSV output (the only format, and the default)");
  std::string tables;
  for (const auto& t : db::exportable_tables()) tables += (tables.empty() ? "" : ", ") + t;
  exp->add_option("--table", opt->table, "Table or view: " + tables)->capture_default_str();
  exp->add_option("-o,--output", opt->output, "Output file (default: stdout)");
  exp->callback([opt] { run_export(opt->db_path, opt->table, opt->output); });

  auto* imp = db->add_subcommand(
      "import-nsys",
      "Import kernels, memcpy/memset and NVTX ranges of an `nsys export --type sqlite` file");
  imp->add_option("report", opt->report, "The .sqlite export of an nsys report")->required();
  imp->add_option("--db", opt->db_path, "Database file")->required();
  imp->callback([opt] { run_import(opt->report, opt->db_path); });
}

const bool registered_db = register_command("db", add_db);

}  // namespace
}  // namespace mactune::cli
