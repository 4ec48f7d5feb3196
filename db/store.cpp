// Store: opening (with the error cases), keys, upserts, runs and measurements.
// Decisions, fidelity and counts are in decisions.cpp.
#include "db/store.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <thread>

#include "db/db_error.h"
#include "db/settings.h"
#include "kernels/file_io.h"

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

bool is_not_a_database(const SqliteError& e) {
  return e.primary_code() == SQLITE_NOTADB || e.primary_code() == SQLITE_CORRUPT;
}
bool is_read_only(const SqliteError& e) {
  return e.primary_code() == SQLITE_READONLY || e.primary_code() == SQLITE_CANTOPEN ||
         e.primary_code() == SQLITE_PERM;
}

[[noreturn]] void not_a_database(const std::string& path, const SqliteError& e) {
  if (e.primary_code() == SQLITE_CORRUPT)
    input_error("database '", path, "' is corrupt (", sqlite3_errstr(e.primary_code()),
                "); it was left untouched: restore it from a copy, or merge the shards it came "
                "from again");
  input_error("'", path, "' is not a usable mactune database (", sqlite3_errstr(e.primary_code()),
              "); it was left untouched");
}
[[noreturn]] void read_only_file(const std::string& path) {
  input_error("database '", path,
              "' is read-only (no write permission on the file or its directory); "
              "copy it somewhere writable or pass another --db");
}

// A read-only open leaves nothing beside the file (see read_only_uri), and reads a file in a
// folder it cannot write: a WAL database needs its -shm index, which such a reader cannot
// create, but when its -wal holds no frames the main file is the whole database.
Connection open_read_only(const std::string& path) {
  const std::string abs = fs::absolute(path).string();
  try {
    Connection c(read_only_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    c.scalar_int("SELECT COUNT(*) FROM sqlite_master");
    return c;
  } catch (const SqliteError& e) {
    if (is_not_a_database(e)) not_a_database(path, e);
    std::error_code ec;
    const bool wal_pending = fs::exists(path + "-wal", ec) && fs::file_size(path + "-wal", ec) > 0;
    if (!is_read_only(e) || wal_pending) throw;
  }
  Connection imm(file_uri(abs, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  imm.scalar_int("SELECT COUNT(*) FROM sqlite_master");
  return imm;
}

// sqlite's multi-line diagnostics, folded into one line for the CLI.
std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

void check_stats(const Measurement& m) {
  if (m.status != PointStatus::ok) return;
  const TimeStats& s = m.stats;
  MACTUNE_CHECK(s.samples > 0, "an ok measurement needs samples");
  for (double v : {s.median_s, s.q1_s, s.q3_s, s.min_s, s.max_s, s.mean_s})
    MACTUNE_CHECK(std::isfinite(v) && v >= 0, "measurement times must be finite and >= 0");
  MACTUNE_CHECK(
      s.min_s <= s.q1_s && s.q1_s <= s.median_s && s.median_s <= s.q3_s && s.q3_s <= s.max_s,
      "measurement stats out of order: min ", s.min_s, " q1 ", s.q1_s, " median ", s.median_s,
      " q3 ", s.q3_s, " max ", s.max_s);
  MACTUNE_CHECK(m.samples.empty() || static_cast<int>(m.samples.size()) == s.samples,
                "a measurement of ", s.samples, " samples lists ", m.samples.size());
  for (double v : m.samples)
    MACTUNE_CHECK(std::isfinite(v) && v >= 0, "sample times must be finite and >= 0");
}

}  // namespace

// ---- Small helpers.

std::string now_utc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

std::string fnv1a_hex(std::string_view bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string format_double(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Workload::key() const {
  std::string k = fields_text(problem) + ",context=" + std::to_string(context) + "," +
                  fields_text(forced) + "," + fields_text(mac);
  if (!extra.empty()) k += ",extra=" + extra;
  return k;
}

std::string decision_key(const Bucket& b, std::optional<double> hit_rate,
                         const std::string& extra) {
  std::string k = b.key();
  if (hit_rate) k += "_h" + format_real(*hit_rate);
  if (!extra.empty()) k += "_x" + extra;
  return k;
}

std::string FidelitySettings::key() const {
  return "engine=" + engine + ",kv_dtype=" + std::string(dtype_name(kv_dtype)) + "," +
         fields_text(mac);
}

// ---- Opening.

Store Store::open(const std::string& path, const OpenOptions& options) {
  const auto& migrations = options.migrations ? *options.migrations : builtin_migrations();
  const bool read_only = options.mode == OpenMode::read_only;
  MACTUNE_REQUIRE(!path.empty(), "the database path is empty");
  std::error_code ec;
  MACTUNE_REQUIRE(!fs::is_directory(path, ec), "database '", path, "' is a directory");
  // A FIFO would block SQLite's open (it opens without O_NONBLOCK), a device reads forever.
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    input_error("database '", path, "' is ", mactune::detail::file_kind(st.st_mode),
                ", not a regular file");
  if (read_only || !options.create || fs::exists(path, ec)) {
    MACTUNE_REQUIRE(fs::exists(path, ec), "database '", path, "' does not exist");
  } else {
    const fs::path parent = fs::path(path).parent_path();
    MACTUNE_REQUIRE(parent.empty() || fs::is_directory(parent, ec), "cannot create database '",
                    path, "': directory '", parent.string(), "' does not exist");
  }
  const int timeout_ms =
      options.busy_timeout_ms >= 0 ? options.busy_timeout_ms : default_lock_timeout_ms();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);

  Connection c;
  try {
    c = read_only ? open_read_only(path)
                  : Connection(file_uri(fs::absolute(path).string()),
                               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
  } catch (const DbError& e) {
    if (is_not_a_database(e)) not_a_database(path, e);
    if (!read_only && is_read_only(e)) read_only_file(path);
    throw;
  } catch (const SqliteError& e) {
    input_error("cannot open database '", path, "': ", e.what());
  }
  // sqlite opens a write-protected file read-only without complaint; a writer must know now.
  if (!read_only && sqlite3_db_readonly(c.handle(), "main") == 1) read_only_file(path);
  c.set_lock_timeout(timeout_ms);

  // Every step below is idempotent, and another process may be creating or migrating the same
  // file (shards started together on a new database): a step that fails on the lock without
  // sqlite's busy handler being asked (a journal-mode change, WAL recovery) is retried until
  // the lock timeout, like every statement waits that long.
  const auto setup = [&] {
    try {
      // The first statements read the header and take the WAL index: a file that is not a
      // database, or cannot be written, fails here, before anything is written to it.
      // Nothing is written (not even the journal mode) before the file is known to be empty
      // or an intact mactune database.
      if ((!read_only || options.verify) && stored_version(c, path) > 0) {
        auto qc = c.prepare("PRAGMA quick_check");
        MACTUNE_REQUIRE(qc.step() && qc.text(0) == "ok", "database '", path,
                        "' is corrupt (quick_check: ", one_line(qc.text(0)),
                        "); it was left untouched");
      }
      if (!read_only) {
        auto jm = c.prepare("PRAGMA journal_mode = WAL");
        jm.step();
        c.exec("PRAGMA synchronous = FULL");
      }
      c.exec("PRAGMA foreign_keys = ON");
    } catch (const SqliteError& e) {
      if (is_not_a_database(e)) not_a_database(path, e);
      if (!read_only && is_read_only(e)) read_only_file(path);
      throw;
    }

    if (read_only) {
      const int have = stored_version(c, path);
      const int latest = latest_version(migrations);
      MACTUNE_REQUIRE(have > 0, "'", path, "' is empty, not a mactune database");
      MACTUNE_REQUIRE(have <= latest, "'", path, "' has schema version ", have,
                      ", newer than this mactune understands (", latest, ")");
      MACTUNE_REQUIRE(have == latest, "'", path, "' has schema version ", have,
                      "; this mactune reads version ", latest, " (`mactune db migrate --db ", path,
                      "` brings it up to date)");
      const std::string stale = c.table_exists("key_formats") ? detail::settings_mismatch(c) : "";
      MACTUNE_REQUIRE(stale.empty(), "'", path, "': ", stale, " (`mactune db migrate --db ", path,
                      "` brings it up to date)");
    } else {
      try {
        migrate(c, path, migrations);
        // The settings columns and derived keys follow the field tables (db/settings.h); a
        // file at a version before the key formats were recorded has none to follow yet.
        if (c.table_exists("key_formats")) detail::sync_settings(c);
      } catch (const SqliteError& e) {
        if (is_read_only(e)) read_only_file(path);
        throw;
      }
    }
  };
  for (;;) {
    try {
      setup();
      break;
    } catch (const DbError& e) {
      if (e.failure() != DbFailure::locked) throw;
      if (interrupt_requested())
        throw DbError(e.file(), DbFailure::interrupted, e.code(), e.detail());
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return Store(path, std::move(c));
}

std::string read_only_uri(const std::string& path) {
  std::error_code ec;
  const std::string abs = fs::absolute(path).string();
  return file_uri(abs, fs::exists(path + "-wal", ec) ? "mode=ro" : "immutable=1");
}

int Store::schema_version() const {
  return stored_version(c_, path_);
}

Id Store::id_of(Statement& select) const {
  MACTUNE_CHECK(select.step(), "upserted row not found");
  return select.int64(0);
}

// ---- Upserts.

Id Store::upsert_device(const DeviceFingerprint& d) {
  const std::string key = d.key();
  auto ins = c_.prepare(
      "INSERT INTO devices (fingerprint, digest, backend, name, compute_units, memory_mib, arch,"
      " runtime, threads, first_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
      " ON CONFLICT (fingerprint) DO NOTHING");
  ins.bind(1, key).bind(2, d.digest()).bind(3, name_of(d.backend)).bind(4, d.name);
  ins.bind(5, d.compute_units).bind(6, d.memory_mib).bind(7, d.arch).bind(8, d.runtime);
  ins.bind(9, d.threads).bind(10, now_utc()).run();
  auto sel = c_.prepare("SELECT id FROM devices WHERE fingerprint = ?1");
  sel.bind(1, key);
  return id_of(sel);
}

Id Store::upsert_build(const BuildInfo& b) {
  auto ins = c_.prepare(
      "INSERT INTO builds (git_revision, compiler, registry_hash, version, build_type,"
      " first_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
      " ON CONFLICT (git_revision, compiler, registry_hash) DO NOTHING");
  ins.bind(1, b.git_revision).bind(2, b.compiler).bind(3, b.registry_hash);
  ins.bind(4, b.version).bind(5, b.build_type).bind(6, now_utc()).run();
  auto sel = c_.prepare(
      "SELECT id FROM builds WHERE git_revision = ?1 AND compiler = ?2 AND registry_hash = ?3");
  sel.bind(1, b.git_revision).bind(2, b.compiler).bind(3, b.registry_hash);
  return id_of(sel);
}

Id Store::upsert_instance(const InstanceDesc& i) {
  MACTUNE_REQUIRE(!i.name.empty(), "an instance needs a canonical name");
  auto ins = c_.prepare(
      "INSERT INTO instances (name, backend, family, config) VALUES (?1, ?2, ?3, ?4)"
      " ON CONFLICT (name) DO NOTHING");
  ins.bind(1, i.name).bind(2, name_of(i.backend)).bind(3, name_of(i.family)).bind(4, i.config);
  ins.run();
  auto sel = c_.prepare("SELECT id, backend, family, config FROM instances WHERE name = ?1");
  sel.bind(1, i.name);
  MACTUNE_CHECK(sel.step(), "upserted instance not found");
  // One canonical name is one config everywhere; a mismatch is a registry bug, never data.
  MACTUNE_CHECK(sel.text(1) == name_of(i.backend) && sel.text(2) == name_of(i.family) &&
                    sel.text(3) == i.config,
                "instance '", i.name, "' is stored as ", sel.text(1), "/", sel.text(2), " {",
                sel.text(3), "} in '", path_, "' but this build has ", name_of(i.backend), "/",
                name_of(i.family), " {", i.config, "}");
  return sel.int64(0);
}

Id Store::upsert_workload(const Workload& w) {
  require_valid(w.problem);
  MACTUNE_REQUIRE(w.forced.hit_rate >= 0.0 && w.forced.hit_rate <= 1.0, "hit rate ",
                  w.forced.hit_rate, " is outside [0, 1]");
  const std::string key = w.key();
  // The settings columns come from the field tables (db/settings.h).
  const std::string cols = detail::field_columns<Problem>() + ", " +
                           detail::field_columns<ForcedHits>() + ", " +
                           detail::field_columns<MacParams>();
  std::string marks = "?1, ?2, ?3";
  const int n = 3 + static_cast<int>(fields_of<Problem>().size() + fields_of<ForcedHits>().size() +
                                     fields_of<MacParams>().size());
  for (int i = 4; i <= n; ++i) marks += ", ?" + std::to_string(i);
  auto ins = c_.prepare("INSERT INTO workloads (key, context, extra, " + cols + ") VALUES (" +
                        marks + ") ON CONFLICT (key) DO NOTHING");
  ins.bind(1, key).bind(2, w.context).bind(3, w.extra);
  int at = detail::bind_fields(ins, 4, w.problem);
  at = detail::bind_fields(ins, at, w.forced);
  detail::bind_fields(ins, at, w.mac);
  ins.run();
  auto sel = c_.prepare("SELECT id FROM workloads WHERE key = ?1");
  sel.bind(1, key);
  return id_of(sel);
}

Id Store::upsert_run(const RunInfo& r) {
  MACTUNE_REQUIRE(!r.run_key.empty(), "a run needs a run_key");
  MACTUNE_CHECK(r.device_id > 0 && r.build_id > 0, "a run needs device and build ids");
  MACTUNE_REQUIRE(r.shard_count >= 1 && r.shard_index >= 0 && r.shard_index < r.shard_count,
                  "shard ", r.shard_index, "/", r.shard_count, " is not a valid shard");
  auto ins = c_.prepare(
      "INSERT INTO runs (run_key, spec_hash, spec_text, shard_index, shard_count, status,"
      " started_at, device_id, build_id, host, command)"
      " VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9, ?10)"
      " ON CONFLICT (run_key) DO NOTHING");
  ins.bind(1, r.run_key).bind(2, r.spec_hash.empty() ? fnv1a_hex(r.spec_text) : r.spec_hash);
  ins.bind(3, r.spec_text).bind(4, r.shard_index).bind(5, r.shard_count).bind(6, now_utc());
  ins.bind_id(7, r.device_id).bind_id(8, r.build_id).bind(9, r.host).bind(10, r.command).run();
  auto sel = c_.prepare("SELECT id FROM runs WHERE run_key = ?1");
  sel.bind(1, r.run_key);
  return id_of(sel);
}

// A run of this host still marked running whose process is gone was killed (SIGKILL, OOM,
// power): it is marked interrupted, so only live runs read as running. A reused pid keeps a
// dead run "running" a while longer; never the other way round.
void Store::close_dead_runs(const std::string& host) {
  std::vector<std::pair<Id, std::string>> running;
  {
    auto q = c_.prepare("SELECT id, run_key FROM runs WHERE status = 'running' AND host = ?1");
    q.bind(1, host);
    while (q.step()) running.emplace_back(q.int64(0), q.text(1));
  }
  const std::string prefix = host + ':';
  for (const auto& [id, key] : running) {
    if (key.rfind(prefix, 0) != 0) continue;  // a caller-chosen key: no pid to check
    long pid = 0;
    const char* first = key.data() + prefix.size();
    const auto [end, ec] = std::from_chars(first, key.data() + key.size(), pid);
    if (ec != std::errc() || end == first || *end != ':' || pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    auto u =
        c_.prepare("UPDATE runs SET status = 'interrupted' WHERE id = ?1 AND status = 'running'");
    u.bind(1, id).run();
  }
}

Id Store::begin_run(RunInfo r) {
  if (r.host.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) r.host = host;
  }
  close_dead_runs(r.host);
  if (r.run_key.empty()) {
    static std::atomic<int> counter{0};
    std::ostringstream k;
    k << r.host << ':' << getpid() << ':' << now_utc() << ':' << counter++;
    r.run_key = k.str();
  }
  return upsert_run(r);
}

void Store::finish_run(Id run_id, RunStatus status) {
  auto s = c_.prepare("UPDATE runs SET status = ?2, finished_at = ?3 WHERE id = ?1");
  s.bind(1, run_id).bind(2, name_of(status));
  if (status == RunStatus::running)
    s.bind_null(3);
  else
    s.bind(3, now_utc());
  s.run();
  MACTUNE_CHECK(c_.changes() == 1, "no run with id ", run_id, " in '", path_, "'");
}

// ---- Measurements.

namespace {
constexpr const char* kPointWhere =
    " WHERE device_id = ?1 AND build_id = ?2 AND instance_id = ?3 AND params = ?4"
    " AND workload_id = ?5 AND policy = ?6 AND cold = ?7";

void bind_point(Statement& s, const PointKey& p) {
  s.bind(1, p.device_id).bind(2, p.build_id).bind(3, p.instance_id).bind(4, p.params);
  s.bind(5, p.workload_id).bind(6, p.policy).bind(7, p.cold ? 1 : 0);
}
}  // namespace

std::optional<PointStatus> Store::point_status(const PointKey& p) const {
  auto s = c_.prepare(std::string("SELECT status FROM measurements") + kPointWhere);
  bind_point(s, p);
  if (!s.step()) return std::nullopt;
  return parse_enum<PointStatus>(s.text(0));
}

bool Store::point_partial(const PointKey& p) const {
  auto s = c_.prepare(std::string("SELECT partial FROM measurements") + kPointWhere);
  bind_point(s, p);
  return s.step() && s.int64(0) != 0;
}

bool Store::has_measurement(const PointKey& p) const {
  return point_status(p).has_value();
}

RecordOutcome Store::record_measurement(const Measurement& m) {
  return record_measurements(std::span<const Measurement>(&m, 1)).front();
}

std::vector<RecordOutcome> Store::record_measurements(std::span<const Measurement> ms) {
  for (const Measurement& m : ms) {
    const PointKey& p = m.point;
    MACTUNE_CHECK(p.device_id > 0 && p.build_id > 0 && p.instance_id > 0 && p.workload_id > 0,
                  "a measurement needs device, build, instance and workload ids");
    check_stats(m);
  }
  std::vector<RecordOutcome> out;
  Transaction t(c_);
  for (const Measurement& m : ms) out.push_back(record_locked(m));
  t.commit();
  return out;
}

RecordOutcome Store::record_locked(const Measurement& m) {
  const PointKey& p = m.point;
  const bool ok = m.status == PointStatus::ok;
  const auto existing = point_status(p);
  const bool was_partial = existing && point_partial(p);
  const bool replaces_partial = was_partial && ok && !m.partial;
  if (existing && (*existing == PointStatus::ok || !ok) && !replaces_partial)
    return RecordOutcome::kept_existing;
  // The launch, typed, through the engine table of the instance's backend.
  const auto inst = instance(p.instance_id);
  MACTUNE_CHECK(inst.has_value(), "measurement of instance id ", p.instance_id,
                ", which is not stored; upsert_instance() it first");
  Id launch_id = 0;
  try {
    launch_id = detail::upsert_launch(c_, inst->backend, p.params);
  } catch (const InputError& e) {
    input_error("launch params '", p.params, "' of ", inst->name, ": ", e.what());
  }
  if (existing) {  // a stored failure (or partial row), now measured: the new row replaces it
    auto del = c_.prepare(std::string("DELETE FROM measurements") + kPointWhere);
    bind_point(del, p);
    del.run();
  }
  auto ins = c_.prepare(
      "INSERT INTO measurements (device_id, build_id, instance_id, params, workload_id, policy,"
      " cold, run_id, status, error, median_s, q1_s, q3_s, min_s, max_s, mean_s, samples,"
      " rel_noise, stop_reason, modeled_bytes, clock_mhz, throttled_samples, notes, started_at,"
      " finished_at, partial, samples_s, kv_tokens_read, kv_tokens_total, launch_id) VALUES"
      " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,"
      " ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)");
  bind_point(ins, p);
  ins.bind_id(8, m.run_id).bind(9, name_of(m.status)).bind(10, m.error);
  const TimeStats& s = m.stats;
  if (ok) {
    ins.bind(11, s.median_s).bind(12, s.q1_s).bind(13, s.q3_s).bind(14, s.min_s);
    ins.bind(15, s.max_s).bind(16, s.mean_s).bind(17, s.samples).bind(18, s.rel_noise);
  } else {
    for (int i = 11; i <= 16; ++i) ins.bind_null(i);
    ins.bind(17, 0).bind_null(18);
  }
  ins.bind(19, m.stop_reason ? name_of(*m.stop_reason) : std::string_view(""))
      .bind(20, m.modeled_bytes)
      .bind(21, m.clock_mhz);
  ins.bind(22, m.throttled_samples).bind(23, m.notes);
  const std::string now = now_utc();
  ins.bind(24, m.started_at.empty() ? now : m.started_at);
  ins.bind(25, m.finished_at.empty() ? now : m.finished_at);
  ins.bind(26, m.partial ? 1 : 0);
  if (ok && !m.samples.empty())
    ins.bind(27, samples_text(m.samples));
  else
    ins.bind_null(27);
  ins.bind(28, m.kv_tokens_read).bind(29, m.kv_tokens_total);
  ins.bind(30, launch_id);
  ins.run();
  if (replaces_partial) return RecordOutcome::replaced_partial;
  return existing ? RecordOutcome::replaced_failure : RecordOutcome::inserted;
}

}  // namespace mactune::db
