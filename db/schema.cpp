#include "db/schema.h"

#include "db/migrations.h"
#include "db/nsys_schema.h"

namespace mactune::db {
namespace {

// Version 1. Every table has a natural key under a UNIQUE constraint, so inserting the same
// fact twice (a resumed run, a merge of overlapping files) is a no-op. Times are seconds;
// timestamps are ISO 8601 UTC text ("2025-11-29T16:53:07.123Z").
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE devices (
  id            INTEGER PRIMARY KEY,
  fingerprint   TEXT    NOT NULL UNIQUE,  -- DeviceFingerprint::key(): every field below
  digest        TEXT    NOT NULL,         -- DeviceFingerprint::digest(): short hex of the key
  backend       TEXT    NOT NULL,         -- 'cpu' | 'cuda'
  name          TEXT    NOT NULL,
  compute_units INTEGER NOT NULL,         -- logical CPUs or SMs
  memory_mib    INTEGER NOT NULL,
  arch          TEXT    NOT NULL,         -- 'avx512' | 'avx2' | 'generic' | 'sm_90' ...
  runtime       TEXT    NOT NULL,         -- driver/runtime versions ('' on CPUs)
  threads       INTEGER NOT NULL,         -- worker threads (CPU), 0 on GPUs
  first_seen    TEXT    NOT NULL
);

CREATE TABLE builds (
  id            INTEGER PRIMARY KEY,
  git_revision  TEXT NOT NULL,            -- short hash, '-dirty' when the tree had edits
  compiler      TEXT NOT NULL,
  registry_hash TEXT NOT NULL,            -- digest of the compiled instance list
  version       TEXT NOT NULL DEFAULT '',
  build_type    TEXT NOT NULL DEFAULT '',
  first_seen    TEXT NOT NULL,
  UNIQUE (git_revision, compiler, registry_hash)
);

CREATE TABLE instances (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE,           -- canonical instance name (kernels/instance.h)
  backend TEXT NOT NULL,
  family  TEXT NOT NULL,                  -- 'mac' | 'full' | 'match' | 'attend' | 'merge'
  config  TEXT NOT NULL                   -- 'key=value,...'
);

CREATE TABLE workloads (
  id            INTEGER PRIMARY KEY,
  key           TEXT    NOT NULL UNIQUE,  -- Workload::key(): every column below
  batch         INTEGER NOT NULL,
  context       INTEGER NOT NULL,         -- KV tokens per request
  q_heads       INTEGER NOT NULL,
  kv_heads      INTEGER NOT NULL,
  head_dim      INTEGER NOT NULL,
  kv_dtype      TEXT    NOT NULL,
  page_size     INTEGER NOT NULL,
  hit_rate      REAL    NOT NULL,         -- forced fraction of hits per step
  lag           TEXT    NOT NULL,         -- lag distribution, e.g. 'uniform:256:4096'
  coherence     TEXT    NOT NULL,         -- 'head' | 'group' | ...
  ring_capacity INTEGER NOT NULL,         -- K
  band          INTEGER NOT NULL,         -- r
  tau           REAL    NOT NULL,
  pick          TEXT    NOT NULL,
  min_context   INTEGER NOT NULL,
  summary_dtype TEXT    NOT NULL,
  rectify       TEXT    NOT NULL,
  accept_eps    REAL    NOT NULL,
  extra         TEXT    NOT NULL DEFAULT ''  -- anything else that changes the work
);

CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  run_key     TEXT    NOT NULL UNIQUE,    -- unique per invocation (host, pid, start time)
  spec_hash   TEXT    NOT NULL,
  spec_text   TEXT    NOT NULL,
  shard_index INTEGER NOT NULL DEFAULT 0,
  shard_count INTEGER NOT NULL DEFAULT 1,
  status      TEXT    NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
  started_at  TEXT    NOT NULL,
  finished_at TEXT,
  device_id   INTEGER NOT NULL REFERENCES devices(id),
  build_id    INTEGER NOT NULL REFERENCES builds(id),
  host        TEXT    NOT NULL DEFAULT '',
  command     TEXT    NOT NULL DEFAULT '',
  CHECK (shard_count >= 1 AND shard_index >= 0 AND shard_index < shard_count)
);

-- One row per measured point. The point identity (the UNIQUE key) is what resume and merge
-- compare: the same device, build, instance, launch params, workload and policy is the same
-- point no matter which run or shard measured it.
CREATE TABLE measurements (
  id                INTEGER PRIMARY KEY,
  device_id         INTEGER NOT NULL REFERENCES devices(id),
  build_id          INTEGER NOT NULL REFERENCES builds(id),
  instance_id       INTEGER NOT NULL REFERENCES instances(id),
  params            TEXT    NOT NULL,     -- launch params not compiled in: 'chunk=256,threads=2'
  workload_id       INTEGER NOT NULL REFERENCES workloads(id),
  policy            TEXT    NOT NULL,     -- measurement policy key (timer, launch mode, ...)
  cold              INTEGER NOT NULL CHECK (cold IN (0, 1)),
  run_id            INTEGER REFERENCES runs(id),
  status            TEXT    NOT NULL CHECK (status IN ('ok', 'failed')),
  error             TEXT    NOT NULL DEFAULT '',
  median_s          REAL,
  q1_s              REAL,
  q3_s              REAL,
  min_s             REAL,
  max_s             REAL,
  mean_s            REAL,
  samples           INTEGER NOT NULL DEFAULT 0,
  rel_noise         REAL,
  stop_reason       TEXT    NOT NULL DEFAULT '',
  modeled_bytes     REAL,                 -- KV + aux bytes the kernel must read, by the model
  clock_mhz         REAL,                 -- mean SM / core clock over the samples, if known
  throttled_samples INTEGER NOT NULL DEFAULT 0,
  notes             TEXT    NOT NULL DEFAULT '',
  started_at        TEXT    NOT NULL,
  finished_at       TEXT    NOT NULL,
  CHECK (status = 'failed' OR (samples > 0 AND median_s IS NOT NULL AND q1_s IS NOT NULL AND
                               q3_s IS NOT NULL AND min_s IS NOT NULL AND mean_s IS NOT NULL)),
  UNIQUE (device_id, build_id, instance_id, params, workload_id, policy, cold)
);
CREATE INDEX measurements_by_workload ON measurements (device_id, workload_id);
CREATE INDEX measurements_by_instance ON measurements (instance_id);

-- Decisions (derived from measurements; rewritten when the tuner decides again).
CREATE TABLE best_configs (
  id            INTEGER PRIMARY KEY,
  device_id     INTEGER NOT NULL REFERENCES devices(id),
  build_id      INTEGER REFERENCES builds(id),
  bucket        TEXT    NOT NULL,         -- Bucket::key()
  family        TEXT    NOT NULL,
  policy        TEXT    NOT NULL,
  batch         INTEGER NOT NULL,
  context       INTEGER NOT NULL,
  q_heads       INTEGER NOT NULL,
  kv_heads      INTEGER NOT NULL,
  head_dim      INTEGER NOT NULL,
  kv_dtype      TEXT    NOT NULL,
  page_size     INTEGER NOT NULL,
  hit_rate      REAL,                     -- NULL when the bucket spans hit rates
  extra         TEXT    NOT NULL DEFAULT '',
  instance_id   INTEGER NOT NULL REFERENCES instances(id),
  params        TEXT    NOT NULL,
  median_s      REAL    NOT NULL,
  margin        REAL,                     -- runner-up median / best median - 1 (NULL: none)
  tie_tolerance REAL    NOT NULL,
  tie_set       TEXT    NOT NULL DEFAULT '[]',  -- JSON [{"instance","params","median_s"}]
  decided_at    TEXT    NOT NULL,
  UNIQUE (device_id, bucket, family, policy)
);

CREATE TABLE break_even (
  id               INTEGER PRIMARY KEY,
  device_id        INTEGER NOT NULL REFERENCES devices(id),
  build_id         INTEGER REFERENCES builds(id),
  bucket           TEXT    NOT NULL,
  policy           TEXT    NOT NULL,
  batch            INTEGER NOT NULL,
  context          INTEGER NOT NULL,
  q_heads          INTEGER NOT NULL,
  kv_heads         INTEGER NOT NULL,
  head_dim         INTEGER NOT NULL,
  kv_dtype         TEXT    NOT NULL,
  page_size        INTEGER NOT NULL,
  extra            TEXT    NOT NULL DEFAULT '',
  status           TEXT    NOT NULL CHECK (status IN ('found', 'ambiguous', 'never')),
  hit_rate         REAL,                  -- the smallest hit rate where MAC clearly wins
  speedup          REAL,                  -- full median / MAC median at that hit rate
  mac_instance_id  INTEGER REFERENCES instances(id),
  mac_params       TEXT    NOT NULL DEFAULT '',
  full_instance_id INTEGER REFERENCES instances(id),
  full_params      TEXT    NOT NULL DEFAULT '',
  notes            TEXT    NOT NULL DEFAULT '',
  decided_at       TEXT    NOT NULL,
  CHECK ((status = 'found') = (hit_rate IS NOT NULL)),
  UNIQUE (device_id, bucket, policy)
);

-- Replay fidelity (issue 6): one row per trace, layer and settings.
CREATE TABLE fidelity (
  id                  INTEGER PRIMARY KEY,
  trace_hash          TEXT    NOT NULL,
  trace_name          TEXT    NOT NULL DEFAULT '',
  layer               INTEGER NOT NULL,
  settings            TEXT    NOT NULL,   -- FidelitySettings::key(): every settings column
  engine              TEXT    NOT NULL,
  kv_dtype            TEXT    NOT NULL,
  ring_capacity       INTEGER NOT NULL,
  band                INTEGER NOT NULL,
  tau                 REAL    NOT NULL,
  pick                TEXT    NOT NULL,
  min_context         INTEGER NOT NULL,
  summary_dtype       TEXT    NOT NULL,
  rectify             TEXT    NOT NULL,
  accept_eps          REAL    NOT NULL,
  steps               INTEGER NOT NULL,
  hit_rate            REAL    NOT NULL,
  group_all_hit_rate  REAL    NOT NULL,
  skip_ratio          REAL    NOT NULL,
  head_skip_ratio     REAL    NOT NULL,
  err_mean REAL NOT NULL, err_p50 REAL NOT NULL, err_p99 REAL NOT NULL, err_max REAL NOT NULL,
  err_frac_gt_0_1 REAL NOT NULL,
  ref_err_mean REAL, ref_err_p50 REAL, ref_err_p99 REAL, ref_err_max REAL,
  ref_err_frac_gt_0_1 REAL,
  build_id            INTEGER REFERENCES builds(id),
  recorded_at         TEXT    NOT NULL,
  UNIQUE (trace_hash, layer, settings)
);

-- Imported `nsys export --type sqlite` files. A report is identified by its content hash;
-- its rows keep their order in the source (`seq`).
CREATE TABLE nsys_reports (
  id                   INTEGER PRIMARY KEY,
  content_hash         TEXT    NOT NULL UNIQUE,
  path                 TEXT    NOT NULL,
  export_schema        TEXT    NOT NULL DEFAULT '',
  session_start_utc_ns INTEGER,
  kernels              INTEGER NOT NULL,
  ranges               INTEGER NOT NULL,
  imported_at          TEXT    NOT NULL
);

CREATE TABLE nsys_kernels (
  id                   INTEGER PRIMARY KEY,
  report_id            INTEGER NOT NULL REFERENCES nsys_reports(id),
  seq                  INTEGER NOT NULL,
  start_ns             INTEGER NOT NULL,  -- session-relative, as nsys writes them
  end_ns               INTEGER NOT NULL,
  gpu                  INTEGER,
  stream_id            INTEGER,
  correlation_id       INTEGER,
  pid                  INTEGER,
  name                 TEXT    NOT NULL,  -- demangled name (short name when absent)
  short_name           TEXT    NOT NULL DEFAULT '',
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers_per_thread INTEGER,
  static_smem_bytes    INTEGER,
  dynamic_smem_bytes   INTEGER,
  graph_node_id        INTEGER,
  launch_tid           INTEGER,           -- thread of the launching runtime call
  nvtx_range           TEXT,              -- innermost NVTX range around the launch
  instance_id          INTEGER REFERENCES instances(id),
  UNIQUE (report_id, seq)
);

CREATE TABLE nsys_ranges (
  id          INTEGER PRIMARY KEY,
  report_id   INTEGER NOT NULL REFERENCES nsys_reports(id),
  seq         INTEGER NOT NULL,
  kind        TEXT    NOT NULL CHECK (kind IN ('push_pop', 'start_end', 'mark')),
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER,                    -- NULL for marks
  name        TEXT    NOT NULL,
  domain      TEXT    NOT NULL DEFAULT '',
  pid         INTEGER,
  tid         INTEGER,
  instance_id INTEGER REFERENCES instances(id),
  UNIQUE (report_id, seq)
);

-- Measurements with every key spelled out: what `db export` writes by default.
CREATE VIEW measurements_view AS
SELECT m.id, d.digest AS device, d.backend, d.name AS device_name, d.arch, d.threads,
       b.git_revision, b.compiler, i.name AS instance, i.family, m.params,
       w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,
       w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.extra,
       m.policy, m.cold, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,
       m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,
       m.throttled_samples, m.notes, r.run_key, r.shard_index, r.shard_count,
       m.started_at, m.finished_at
FROM measurements m
JOIN devices d ON d.id = m.device_id
JOIN builds b ON b.id = m.build_id
JOIN instances i ON i.id = m.instance_id
JOIN workloads w ON w.id = m.workload_id
LEFT JOIN runs r ON r.id = m.run_id;
)sql";

void begin_schema_version_table(Connection& c) {
  c.exec(
      "CREATE TABLE IF NOT EXISTS schema_version ("
      " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)");
}

}  // namespace

const std::vector<Migration>& builtin_migrations() {
  static const std::vector<Migration> m = {
      {1, "devices, builds, instances, workloads, runs, measurements, decisions, fidelity, nsys",
       [](Connection& c) { c.exec(kSchemaV1); }},
      {2, "nsys: memcpy/memset rows, launch times and range rows of kernels", apply_nsys_schema_v2},
      {3, "key formats; MAC settings in decisions spelt with the field names", apply_v3},
      {4, "measurements.partial: rows of configs a search dropped before their full measurement",
       apply_v4},
      {5, "measurements.samples_s: every kept sample of a row, in the order it was taken",
       apply_v5},
      {6, "measurements_view shows partial", apply_v6},
      {7, "CUDA launch params: min_chunk spelt chunk_tokens, as the CPU engine's", apply_v7},
      {8,
       "measurements.kv_tokens_read, kv_tokens_total: the step's KV tokens, typed (were notes);"
       " break_even.status 'found' spelt 'ok'",
       apply_v8},
      {9,
       "launches: a measurement's launch params typed (launch_id); decisions reference a"
       " measurement of the config they chose",
       apply_v9},
  };
  return m;
}

int latest_version(const std::vector<Migration>& migrations) {
  return migrations.empty() ? 0 : migrations.back().version;
}

int stored_version(const Connection& c, const std::string& path) {
  // One statement, so one snapshot: asked in two, "no schema_version table" could come from
  // before another process's first migration committed and the table count from after it,
  // and a new database that process had just set up would read as foreign.
  const auto tables = c.scalar_int(
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND"
      " name = 'schema_version') THEN -1 ELSE (SELECT COUNT(*) FROM sqlite_master) END");
  if (tables < 0)  // the table is never dropped: a later snapshot has it too
    return static_cast<int>(c.scalar_int("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
  MACTUNE_REQUIRE(tables == 0, "'", path,
                  "' is an SQLite database but not a mactune one (it has no schema_version "
                  "table); refusing to touch it");
  return 0;
}

void migrate(Connection& c, const std::string& path, const std::vector<Migration>& migrations) {
  for (std::size_t i = 1; i < migrations.size(); ++i)
    MACTUNE_CHECK(migrations[i].version > migrations[i - 1].version,
                  "migrations must be listed in increasing version order");
  const int latest = latest_version(migrations);
  int have = stored_version(c, path);
  MACTUNE_REQUIRE(have <= latest, "'", path, "' has schema version ", have,
                  ", newer than this mactune understands (", latest,
                  "); use a newer mactune to read it");
  for (const Migration& m : migrations) {
    if (m.version <= have) continue;
    // One transaction per step: a failure leaves the file at the previous version, intact.
    Transaction t(c);
    // Re-read under the write lock: another process may have migrated meanwhile.
    have = stored_version(c, path);
    if (m.version <= have) continue;
    begin_schema_version_table(c);
    m.apply(c);
    auto s = c.prepare(
        "INSERT INTO schema_version (version, description, applied_at) "
        "VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))");
    s.bind(1, m.version).bind(2, m.description).run();
    t.commit();
    have = m.version;
  }
}

}  // namespace mactune::db
