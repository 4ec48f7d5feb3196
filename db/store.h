// mactune's SQLite store: every measurement of every point, the runs that took them, the
// decisions drawn from them (best configs, break-even points), replay fidelity and imported
// nsys reports. See docs/database.md for the schema and the rules below.
//
// Rules:
//  - Natural keys. Every table has a UNIQUE natural key (device fingerprint, build triple,
//    instance name, workload key, run key, point identity, ...), so inserting a fact twice is
//    a no-op and `merge` is idempotent. Row ids are local to one file; never compare them
//    across files.
//  - The same point. A measurement is identified by PointKey: device + build + instance +
//    launch params + workload + measurement policy + cold/hot. A resumed or re-run sweep on
//    the same device and build skips every point with a stored row (has_measurement); a new
//    build (a code change) is a new point. The first stored result of a point is kept, except
//    that a successful one replaces a stored failure.
//  - Crash safety. WAL journal, synchronous=FULL, one transaction per recorded point: a
//    process killed at any instant leaves every committed point intact and no partial row.
//  - Errors. A file that is not a database, a foreign SQLite file, a newer schema or a
//    read-only file opened for writing throws InputError naming the file; nothing is
//    written to a file that cannot be opened cleanly. A file that is damaged, locked past the
//    lock timeout, on a full disk or unwritable later on throws DbError (db/db_error.h): one
//    line naming the file and the condition; what was committed before stays.
//  - Concurrency. Every statement, and every step of opening (creation, WAL setup,
//    migration), waits for another process's lock up to the lock timeout; Ctrl-C in a tune
//    ends the wait at once. Readers leave no -wal or -shm file behind (read_only_uri).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "db/break_even_status.h"
#include "db/schema.h"
#include "db/sqlite.h"
#include "kernels/device.h"
#include "kernels/forced.h"
#include "kernels/instance.h"
#include "kernels/launch_params.h"
#include "kernels/problem.h"
#include "kernels/stop_reason.h"
#include "kernels/time_stats.h"

namespace mactune::db {

using Id = std::int64_t;  // a row id in one file; 0 means "none"

// ---- Keys and rows.

struct BuildInfo {
  std::string git_revision{};  // natural key, with compiler and registry_hash
  std::string compiler{};
  std::string registry_hash{};  // digest of the compiled instance names
  std::string version{};
  std::string build_type{};
};

// What a point measures: a decode step of `problem` over `context` KV tokens per request
// with forced hits, under one layer's MAC settings. Its columns are the fields of those
// structs (kernels/fields.h), named by member: a field added to a table gets its column.
struct Workload {
  Problem problem{};
  long long context = 0;  // KV tokens per request
  ForcedHits forced{};    // hit rate, lag, coherence (not `enabled` and `seed`: not stored)
  MacParams mac{};
  std::string extra{};  // anything else that changes the work, "key=value,..."

  // Canonical text of every field above: equal keys <=> the same workload.
  std::string key() const;
};

// A run: one invocation of the tuner over a spec (or one shard of it).
struct RunInfo {
  std::string run_key{};  // unique per invocation; begin_run() makes one when empty
  std::string spec_text{};
  std::string spec_hash{};  // begin_run() computes it from spec_text when empty
  int shard_index = 0;
  int shard_count = 1;
  Id device_id = 0;
  Id build_id = 0;
  std::string host{};
  std::string command{};
};

enum class RunStatus { running, finished, interrupted, failed };
}  // namespace mactune::db
template <>
struct mactune::EnumNames<mactune::db::RunStatus> {
  using S = db::RunStatus;
  static constexpr std::string_view what = "run status";
  static constexpr EnumName<S> names[] = {{S::running, "running"},
                                          {S::finished, "finished"},
                                          {S::interrupted, "interrupted"},
                                          {S::failed, "failed"}};
};
namespace mactune::db {

// The identity of a measured point (see the rules above).
struct PointKey {
  Id device_id = 0;
  Id build_id = 0;
  Id instance_id = 0;
  std::string params{};  // launch params not compiled in, canonical "key=value,..." text
  Id workload_id = 0;
  std::string policy{};  // measurement policy key (timer, launch mode, flush, ...)
  bool cold = true;      // caches flushed before each sample
};

enum class PointStatus { ok, failed };
}  // namespace mactune::db
template <>
struct mactune::EnumNames<mactune::db::PointStatus> {
  using S = db::PointStatus;
  static constexpr std::string_view what = "point status";
  static constexpr EnumName<S> names[] = {{S::ok, "ok"}, {S::failed, "failed"}};
};
namespace mactune::db {

struct Measurement {
  PointKey point{};
  Id run_id = 0;  // the run that measured it (0: none)
  PointStatus status = PointStatus::ok;
  std::string error{};                      // why a failed point failed
  TimeStats stats{};                        // ignored for failed points (stdev_s is not stored)
  std::optional<StopReason> stop_reason{};  // unset for failed rows (stored as '')
  std::optional<double> modeled_bytes{};
  std::optional<double> clock_mhz{};
  int throttled_samples = 0;
  // The KV tokens the measured step read (sum over groups of kv_len - begin) and its total
  // (sum of kv_len), as the engine counted them (kernels/stats.h StepStats): the measured skip
  // ratio is 1 - read / total. Unset for failed rows and rows whose step did not count them.
  std::optional<long long> kv_tokens_read{}, kv_tokens_total{};
  std::string notes{};
  // A search (`search: halving`) dropped this config after brief samples: the row is kept (it
  // was measured) but the decisions skip it, and a complete measurement replaces it.
  bool partial = false;
  // Every kept sample (seconds), in the order taken: measure_group interleaves its cases
  // round by round, so sample k of two rows of one group was taken in the same round. What
  // `tune --replay` replays a search over. Empty for failed rows and rows stored before
  // schema v5 (stored as NULL); when set, stats summarizes exactly these.
  std::vector<double> samples{};
  std::string started_at{};   // ISO 8601 UTC; now_utc() when empty
  std::string finished_at{};  // ISO 8601 UTC; now_utc() when empty
};

enum class RecordOutcome {
  inserted,          // a new point
  replaced_failure,  // an ok result replaced a stored failure
  replaced_partial,  // a complete result replaced a stored partial one
  kept_existing,     // the point was already stored; nothing changed
};

// A stored measurement with its keys resolved, for the decision step.
struct MeasurementRow {
  Id id = 0;
  Measurement m{};
  InstanceDesc instance{};
  Workload workload{};
  // The launch params of m.point.params, typed (the row's `launches` row: every param field of
  // the instance's engine, in table order). Empty only for a row a migration could not read
  // (a params text this build's engine tables do not know).
  LaunchParams launch{};
};

// Which measurements to read. Unset fields match everything.
struct MeasurementFilter {
  Id device_id = 0;        // required
  std::optional<Id> id{};  // one row
  std::optional<Id> build_id{};
  std::optional<Id> workload_id{};
  std::optional<std::string> instance{};  // canonical name
  std::optional<Family> family{};
  std::optional<std::string> policy{};
  std::optional<bool> cold{};
  bool ok_only = true;
};

struct DeviceRow {
  Id id = 0;
  DeviceFingerprint fingerprint{};
  std::string digest{};
  std::string first_seen{};
};

// The key of a decision row: a bucket (kernels/problem.h), optionally at one hit rate and
// with anything else that sets it apart ("hd128_q32_kv8_bf16_p16_b4_c16384[_h0.9][_x...]").
std::string decision_key(const Bucket& b, std::optional<double> hit_rate, const std::string& extra);

struct TieEntry {
  std::string instance{};
  std::string params{};  // the config as text, for reading by hand
  double median_s = 0;
  Id measurement_id = 0;  // a measurement of this config in the bucket (0: none known)
};

struct BestConfig {
  Id device_id = 0;
  Id build_id = 0;  // measurements of which build it was drawn from (0: mixed / unknown)
  Bucket bucket{};
  std::optional<double> hit_rate{};  // unset: the decision spans hit rates
  std::string extra{};
  Family family = Family::mac;  // what was chosen among: MAC configs or full-attention ones
  std::string policy{};
  std::string instance{};  // canonical name; must be stored in instances
  std::string params{};    // the config as text (launch, ';', MAC settings), to read by hand
  // A measurement of the chosen config (its instance, typed launch and, for MAC, its
  // workload's MAC settings are the config); 0: none (a decision migrated from a file whose
  // measurements no longer hold it). What readers take the config from.
  Id measurement_id = 0;
  double median_s = 0;
  std::optional<double> margin{};  // runner-up median / best median - 1
  double tie_tolerance = 0.01;
  std::vector<TieEntry> tie_set{};  // every candidate within the tolerance, best first
  std::string decided_at{};         // now_utc() when empty
};

// A break_even row: one bucket's break-even (the decision's status, hit rate and the speedup
// there; tuner/decide/decide.h BreakEven holds the whole curve) with its keys and the configs
// it was read for.
struct BreakEvenRow {
  Id device_id = 0;
  Id build_id = 0;
  Bucket bucket{};  // a break-even runs over hit rates: its key has none
  std::string extra{};
  std::string policy{};
  BreakEvenStatus status = BreakEvenStatus::ambiguous;
  std::optional<double> hit_rate{};  // set iff status == ok
  std::optional<double> speedup{};   // full median / MAC median at hit_rate
  std::string mac_instance{}, mac_params{};
  std::string full_instance{}, full_params{};
  Id mac_measurement_id = 0, full_measurement_id = 0;  // of those configs (0: none)
  std::string notes{};
  std::string decided_at{};
};

// Replay settings of one fidelity row (issue 6).
struct FidelitySettings {
  MacParams mac{};
  DType kv_dtype = DType::f32;
  std::string engine = "cpu";  // "cpu" | "ref" | "cuda"
  std::string key() const;
};

struct ErrorStats {
  double mean = 0, p50 = 0, p99 = 0, max = 0, frac_gt_0_1 = 0;
};

struct FidelityResult {
  std::string trace_hash{};
  std::string trace_name{};
  int layer = 0;
  FidelitySettings settings{};
  long long steps = 0;
  double hit_rate = 0, group_all_hit_rate = 0, skip_ratio = 0, head_skip_ratio = 0;
  ErrorStats rel_err{};                        // vs full attention recomputed
  std::optional<ErrorStats> rel_err_vs_ref{};  // vs the model's own output, when the trace has it
  Id build_id = 0;
  std::string recorded_at{};
};

// ---- The store.

enum class OpenMode {
  read_write,  // create the file if missing, migrate it to the latest schema
  read_only,   // never writes; the file must exist and be at the latest schema
};

struct OpenOptions {
  OpenMode mode = OpenMode::read_write;
  // read_write: create a missing file (tune, merge's output); false: refuse it as read_only
  // does (a command that reads what another wrote, such as emit).
  bool create = true;
  // Run PRAGMA quick_check also on a read-only open (merge's inputs: checked before the
  // output is touched). A read-write open always checks an existing file.
  bool verify = false;
  // Wait this long for another writer (shards on one file); -1: default_lock_timeout_ms()
  // (30 s, or MACTUNE_DB_TIMEOUT).
  int busy_timeout_ms = -1;
  // The schema steps to apply; tests inject extra steps to exercise the mechanism.
  const std::vector<Migration>* migrations = nullptr;  // nullptr: builtin_migrations()
};

class Store {
 public:
  static Store open(const std::string& path, const OpenOptions& options = {});

  const std::string& path() const { return path_; }
  int schema_version() const;
  Connection& connection() { return c_; }
  const Connection& connection() const { return c_; }

  // Upserts by natural key; return the row id (existing or new). Each new key is one
  // durable commit (an fsync, ~6 ms here); register many keys at once inside one
  // `Transaction t(store.connection()); ... t.commit();` (~0.1 ms per key).
  Id upsert_device(const DeviceFingerprint& d);
  Id upsert_build(const BuildInfo& b);
  Id upsert_instance(const InstanceDesc& i);  // throws Error if the name has another config
  Id upsert_workload(const Workload& w);
  Id upsert_run(const RunInfo& r);  // by run_key (required)

  // Starts a run: a fresh run_key (host, pid, time) unless given; status running. Runs of this
  // host left "running" by a process that no longer exists are marked interrupted first.
  Id begin_run(RunInfo r);
  void finish_run(Id run_id, RunStatus status);

  // Resume: whether the point has a stored row (ok or failed), and which.
  bool has_measurement(const PointKey& p) const;
  std::optional<PointStatus> point_status(const PointKey& p) const;
  // Whether the stored row of the point is partial (false when there is none).
  bool point_partial(const PointKey& p) const;
  // Stores one finished point in its own transaction (see the rules above).
  RecordOutcome record_measurement(const Measurement& m);
  // Stores several rows in one transaction: all or none. For measurements that only mean
  // something together (MAC and its full-attention baseline, interleaved in one run), so a
  // kill between them cannot leave half a pair to be completed by another run.
  std::vector<RecordOutcome> record_measurements(std::span<const Measurement> ms);

  std::vector<MeasurementRow> measurements(const MeasurementFilter& f) const;
  std::vector<DeviceRow> devices() const;
  std::optional<Id> find_device(const DeviceFingerprint& d) const;
  std::optional<InstanceDesc> instance(Id id) const;
  std::optional<Id> find_instance(const std::string& name) const;

  // Decisions: each write replaces the row of the same bucket (and family, for configs).
  void write_best_config(const BestConfig& b);
  void write_break_even(const BreakEvenRow& b);
  std::vector<BestConfig> best_configs(Id device_id) const;
  std::vector<BreakEvenRow> break_evens(Id device_id) const;

  // Fidelity: replaces the row of the same trace, layer and settings.
  void record_fidelity(const FidelityResult& r);
  std::vector<FidelityResult> fidelity(const std::string& trace_hash = "") const;

  // Row counts of every table, in schema order (for `db info` and tests).
  std::vector<std::pair<std::string, std::int64_t>> table_counts() const;

 private:
  void close_dead_runs(const std::string& host);
  Store(std::string path, Connection c) : path_(std::move(path)), c_(std::move(c)) {}
  Id id_of(Statement& select) const;
  RecordOutcome record_locked(const Measurement& m);  // inside an open transaction

  std::string path_{};
  Connection c_;
};

// The URI a reader opens `path` with. Without a -wal file beside it no connection has the
// database open in WAL mode and the main file is the whole database: it is opened immutable,
// which creates no -wal or -shm file (a plain read-only open would create both and leave
// them). With one, a writer may be at work: "mode=ro" reads its committed frames.
std::string read_only_uri(const std::string& path);

// The tables of the schema, in dependency order (parents first).
const std::vector<std::string>& table_names();

// "2025-11-29T16:53:07.123Z" for the current time.
std::string now_utc();
// 16 hex digits of FNV-1a 64 over the bytes.
std::string fnv1a_hex(std::string_view bytes);
// Shortest text that reads back as the same double ("0.9", "1e-06").
std::string format_double(double v);
// measurements.samples_s: "[1.25e-05,1.3e-05]" (a JSON array of seconds, each shortest
// round-trip), and back; InputError naming the text when it is not such an array.
std::string samples_text(std::span<const double> samples);
std::vector<double> parse_samples_text(std::string_view text);

}  // namespace mactune::db
