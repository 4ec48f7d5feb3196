#include "db/schema.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "db/nsys_schema.h"
#include "db/settings.h"

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

// Version 3. One name per setting: the MAC settings in decision rows are spelt as everywhere
// else (the field names of kernels/fields.h: summary -> summary_dtype, eps -> accept_eps), and
// the format of the keys derived from the settings columns is recorded, so that a build whose
// field tables differ rebuilds them (db/settings.h). The keys themselves are rebuilt then.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE key_formats (
  name   TEXT PRIMARY KEY,                -- 'keys': every derived key
  digest TEXT NOT NULL                    -- of the field lists the keys are spelt from
);
UPDATE best_configs SET
  params = replace(replace(params, ',summary=', ',summary_dtype='), ',eps=', ',accept_eps='),
  tie_set = replace(replace(tie_set, ',summary=', ',summary_dtype='), ',eps=', ',accept_eps=');
UPDATE break_even SET
  mac_params = replace(replace(mac_params, ',summary=', ',summary_dtype='), ',eps=', ',accept_eps=');
)sql";

// Version 6. measurements_view with `partial` (v4), so that `db export` tells a dropped
// config's row from a complete one. A view cannot be altered: it is created again, as v1's
// with the column added after notes (and created if a file has lost it).
constexpr const char* kSchemaV6 = R"sql(
DROP VIEW IF EXISTS measurements_view;
CREATE VIEW measurements_view AS
SELECT m.id, d.digest AS device, d.backend, d.name AS device_name, d.arch, d.threads,
       b.git_revision, b.compiler, i.name AS instance, i.family, m.params,
       w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,
       w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.extra,
       m.policy, m.cold, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,
       m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,
       m.throttled_samples, m.notes, m.partial, r.run_key, r.shard_index, r.shard_count,
       m.started_at, m.finished_at
FROM measurements m
JOIN devices d ON d.id = m.device_id
JOIN builds b ON b.id = m.build_id
JOIN instances i ON i.id = m.instance_id
JOIN workloads w ON w.id = m.workload_id
LEFT JOIN runs r ON r.id = m.run_id;
)sql";

// Version 7. One name for the chunk knob of both engines: the CUDA engine's launch parameter
// `min_chunk` is spelt `chunk_tokens` as the CPU engine's (kernels/cuda/engine_config.h; the
// old name stays an alias on input). Launch params lead the stored texts ("k=v,...", then
// ";MAC settings" in decisions) and sit in tie_set's JSON strings.
constexpr const char* kSchemaV7 = R"sql(
UPDATE measurements SET params = substr(replace(',' || params, ',min_chunk=', ',chunk_tokens='), 2)
  WHERE instr(params, 'min_chunk=') > 0;
UPDATE best_configs SET
  params = substr(replace(',' || params, ',min_chunk=', ',chunk_tokens='), 2),
  tie_set = replace(replace(tie_set, '"min_chunk=', '"chunk_tokens='), ',min_chunk=',
                    ',chunk_tokens=')
  WHERE instr(params, 'min_chunk=') > 0 OR instr(tie_set, 'min_chunk=') > 0;
UPDATE break_even SET
  mac_params = substr(replace(',' || mac_params, ',min_chunk=', ',chunk_tokens='), 2),
  full_params = substr(replace(',' || full_params, ',min_chunk=', ',chunk_tokens='), 2)
  WHERE instr(mac_params, 'min_chunk=') > 0 OR instr(full_params, 'min_chunk=') > 0;
)sql";

// Version 8. The KV tokens a measured step read and its total, typed: before, the sweep wrote
// them at the end of the row's notes ("...; kv_tokens=READ/TOTAL") and the decisions parsed
// them back. The step reads them out of the notes once, into the columns, and drops them from
// the notes (the sweep no longer writes them there); a note without them leaves both NULL.
// measurements_view shows them after `partial`.
constexpr const char* kSchemaV8View = R"sql(
DROP VIEW IF EXISTS measurements_view;
CREATE VIEW measurements_view AS
SELECT m.id, d.digest AS device, d.backend, d.name AS device_name, d.arch, d.threads,
       b.git_revision, b.compiler, i.name AS instance, i.family, m.params,
       w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,
       w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.extra,
       m.policy, m.cold, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,
       m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,
       m.throttled_samples, m.notes, m.partial, m.kv_tokens_read, m.kv_tokens_total,
       r.run_key, r.shard_index, r.shard_count, m.started_at, m.finished_at
FROM measurements m
JOIN devices d ON d.id = m.device_id
JOIN builds b ON b.id = m.build_id
JOIN instances i ON i.id = m.instance_id
JOIN workloads w ON w.id = m.workload_id
LEFT JOIN runs r ON r.id = m.run_id;
)sql";

// Also version 8. One spelling of a break-even's status (db/break_even_status.h): 'found' is
// 'ok', as the decisions, the emitted tables and the report spell it. A CHECK constraint cannot
// be altered: the table is made again with v1's columns in v1's order, its rows copied.
constexpr const char* kSchemaV8BreakEven = R"sql(
CREATE TABLE break_even_v8 (
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
  status           TEXT    NOT NULL CHECK (status IN ('ok', 'ambiguous', 'never')),
  hit_rate         REAL,                  -- the smallest hit rate where MAC clearly wins
  speedup          REAL,                  -- full median / MAC median at that hit rate
  mac_instance_id  INTEGER REFERENCES instances(id),
  mac_params       TEXT    NOT NULL DEFAULT '',
  full_instance_id INTEGER REFERENCES instances(id),
  full_params      TEXT    NOT NULL DEFAULT '',
  notes            TEXT    NOT NULL DEFAULT '',
  decided_at       TEXT    NOT NULL,
  CHECK ((status = 'ok') = (hit_rate IS NOT NULL)),
  UNIQUE (device_id, bucket, policy)
);
INSERT INTO break_even_v8 (id, device_id, build_id, bucket, policy, batch, context, q_heads,
  kv_heads, head_dim, kv_dtype, page_size, extra, status, hit_rate, speedup, mac_instance_id,
  mac_params, full_instance_id, full_params, notes, decided_at)
SELECT id, device_id, build_id, bucket, policy, batch, context, q_heads, kv_heads, head_dim,
  kv_dtype, page_size, extra, CASE status WHEN 'found' THEN 'ok' ELSE status END, hit_rate,
  speedup, mac_instance_id, mac_params, full_instance_id, full_params, notes, decided_at
FROM break_even;
DROP TABLE break_even;
ALTER TABLE break_even_v8 RENAME TO break_even;
)sql";

// The "kv_tokens=READ/TOTAL" of a v7 row's notes: (read, total, the notes without it), or none
// when the notes do not hold a well-formed one.
struct OldKvNote {
  long long read = 0, total = 0;
  std::string rest;
};
std::optional<OldKvNote> old_kv_note(const std::string& notes) {
  constexpr std::string_view key = "kv_tokens=";
  const auto at = notes.find(key);
  if (at == std::string::npos) return std::nullopt;
  const char* first = notes.data() + at + key.size();
  const char* last = notes.data() + notes.size();
  OldKvNote n;
  auto r = std::from_chars(first, last, n.read);
  if (r.ec != std::errc() || r.ptr == last || *r.ptr != '/') return std::nullopt;
  r = std::from_chars(r.ptr + 1, last, n.total);
  if (r.ec != std::errc() || n.read < 0 || n.total <= 0) return std::nullopt;
  // The note and the "; " that joined it to the one before.
  const std::size_t from = at >= 2 && notes.compare(at - 2, 2, "; ") == 0 ? at - 2 : at;
  std::size_t to = static_cast<std::size_t>(r.ptr - notes.data());
  if (from == at && notes.compare(to, 2, "; ") == 0) to += 2;
  n.rest = notes.substr(0, from) + notes.substr(to);
  return n;
}

void apply_v8(Connection& c) {
  c.exec(
      "ALTER TABLE measurements ADD COLUMN kv_tokens_read INTEGER;"
      "ALTER TABLE measurements ADD COLUMN kv_tokens_total INTEGER;");
  std::vector<std::pair<std::int64_t, OldKvNote>> found;
  {
    auto s = c.prepare("SELECT id, notes FROM measurements WHERE instr(notes, 'kv_tokens=') > 0");
    while (s.step())
      if (auto n = old_kv_note(s.text(1))) found.emplace_back(s.int64(0), std::move(*n));
  }
  auto u = c.prepare(
      "UPDATE measurements SET kv_tokens_read = ?2, kv_tokens_total = ?3, notes = ?4"
      " WHERE id = ?1");
  for (const auto& [id, n] : found) {
    u.reset();
    u.bind(1, id).bind(2, n.read).bind(3, n.total).bind(4, n.rest).run();
  }
  c.exec(kSchemaV8View);
  c.exec(kSchemaV8BreakEven);
}

// Version 9. Launches and the configs of decisions, typed. A measurement's launch params were
// only its `params` text ("threads=1,chunk_tokens=256,..."), parsed back by every reader; a
// decision re-serialised its config (the launch text, ';', the MAC settings text) and was parsed
// back for incumbents. Now `launches` holds each (backend, launch) once, one column per param
// field of the backend's engine table (db/settings.h), and a measurement references its row
// (`params` stays: the point's natural key, and the text to read by hand). A decision references
// a measurement of the config it chose (best_configs.measurement_id, break_even's
// mac_measurement_id / full_measurement_id): its instance, typed launch and, for MAC, its
// workload's typed MAC settings are the config. The step fills both from the texts: a params
// text this build's tables do not read, or a decision whose config matches no ok measurement
// of its device and policy, keeps NULL (no typed launch; no incumbent). Deleting a referenced
// measurement (by hand: the store never deletes an ok row) sets the reference NULL.
constexpr const char* kSchemaV9 = R"sql(
CREATE TABLE launches (
  id      INTEGER PRIMARY KEY,
  backend TEXT NOT NULL CHECK (backend IN ('cpu', 'cuda')),
  key     TEXT NOT NULL,                  -- every param field, canonical: 'threads=1,...'
  UNIQUE (backend, key)
);
ALTER TABLE measurements ADD COLUMN launch_id INTEGER REFERENCES launches(id);
ALTER TABLE best_configs ADD COLUMN measurement_id INTEGER REFERENCES measurements(id) ON DELETE SET NULL;
ALTER TABLE break_even ADD COLUMN mac_measurement_id INTEGER REFERENCES measurements(id)
  ON DELETE SET NULL;
ALTER TABLE break_even ADD COLUMN full_measurement_id INTEGER REFERENCES measurements(id)
  ON DELETE SET NULL;
)sql";

// The measurement a v8 decision's config names: an ok row of the decision's device, policy,
// bucket (and build and hit rate, when it has them) with the instance, the launch text and,
// when the text has them, the MAC settings; the earliest such row. 0 when there is none.
std::int64_t measurement_of_config(Connection& c, const std::string& table, std::int64_t row,
                                   std::int64_t instance, const std::string& params) {
  const auto semi = params.find(';');
  const std::string launch = params.substr(0, semi);
  std::optional<std::string> mac;
  if (semi != std::string::npos) {
    try {
      MacParams m;
      parse_fields_text(m, std::string_view(params).substr(semi + 1));
      mac = fields_text(m);
    } catch (const InputError&) {
      return 0;  // settings this build does not read
    }
  }
  const bool at_hit_rate = table == "best_configs";  // break_even.hit_rate is its result
  auto q = c.prepare(
      "SELECT m.id, " + detail::field_columns<MacParams>("w") + " FROM " + table +
      " d JOIN measurements m ON m.device_id = d.device_id AND m.policy = d.policy AND"
      " (d.build_id IS NULL OR m.build_id = d.build_id)"
      " JOIN workloads w ON w.id = m.workload_id AND w.batch = d.batch AND"
      " w.context = d.context AND w.q_heads = d.q_heads AND w.kv_heads = d.kv_heads AND"
      " w.head_dim = d.head_dim AND w.kv_dtype = d.kv_dtype AND w.page_size = d.page_size" +
      std::string(at_hit_rate ? " AND (d.hit_rate IS NULL OR w.hit_rate = d.hit_rate)" : "") +
      " WHERE d.id = ?1 AND m.instance_id = ?2 AND m.params = ?3 AND m.status = 'ok'"
      " ORDER BY m.id");
  q.bind(1, row).bind(2, instance).bind(3, launch);
  while (q.step()) {
    if (!mac) return q.int64(0);
    MacParams m;
    try {
      detail::read_fields(q, 1, m);
    } catch (const InputError&) {
      continue;
    }
    if (fields_text(m) == *mac) return q.int64(0);
  }
  return 0;
}

void apply_v9(Connection& c) {
  c.exec(kSchemaV9);
  detail::sync_launch_columns(c);
  detail::add_settings_columns(c);  // the MAC settings columns the decisions are matched by
  std::vector<std::pair<std::string, std::string>> launches;  // (backend, params)
  {
    auto s = c.prepare(
        "SELECT DISTINCT i.backend, m.params FROM measurements m"
        " JOIN instances i ON i.id = m.instance_id");
    while (s.step()) launches.emplace_back(s.text(0), s.text(1));
  }
  auto u = c.prepare(
      "UPDATE measurements SET launch_id = ?3 WHERE params = ?2 AND instance_id IN"
      " (SELECT id FROM instances WHERE backend = ?1)");
  for (const auto& [backend, params] : launches) {
    std::int64_t id = 0;
    try {
      id = detail::upsert_launch(c, parse_enum<Backend>(backend), params);
    } catch (const InputError&) {
      continue;  // a text this build's engine tables do not read: no typed launch
    }
    u.reset();
    u.bind(1, backend).bind(2, params).bind(3, id).run();
  }
  struct Ref {
    std::string table, column;
    std::int64_t row, instance;
    std::string params;
  };
  std::vector<Ref> refs;
  {
    auto s = c.prepare("SELECT id, instance_id, params FROM best_configs");
    while (s.step())
      refs.push_back({"best_configs", "measurement_id", s.int64(0), s.int64(1), s.text(2)});
    auto b = c.prepare(
        "SELECT id, mac_instance_id, mac_params, full_instance_id, full_params FROM break_even");
    while (b.step()) {
      if (!b.is_null(1))
        refs.push_back({"break_even", "mac_measurement_id", b.int64(0), b.int64(1), b.text(2)});
      if (!b.is_null(3))
        refs.push_back({"break_even", "full_measurement_id", b.int64(0), b.int64(3), b.text(4)});
    }
  }
  for (const Ref& r : refs) {
    const std::int64_t m = measurement_of_config(c, r.table, r.row, r.instance, r.params);
    if (m == 0) continue;
    auto set = c.prepare("UPDATE " + r.table + " SET " + r.column + " = ?2 WHERE id = ?1");
    set.bind(1, r.row).bind(2, m).run();
  }
}

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
      {3, "key formats; MAC settings in decisions spelt with the field names",
       [](Connection& c) { c.exec(kSchemaV3); }},
      {4, "measurements.partial: rows of configs a search dropped before their full measurement",
       [](Connection& c) {
         c.exec(
             "ALTER TABLE measurements ADD COLUMN partial INTEGER NOT NULL DEFAULT 0"
             " CHECK (partial IN (0, 1))");
       }},
      {5, "measurements.samples_s: every kept sample of a row, in the order it was taken",
       [](Connection& c) { c.exec("ALTER TABLE measurements ADD COLUMN samples_s TEXT"); }},
      {6, "measurements_view shows partial", [](Connection& c) { c.exec(kSchemaV6); }},
      {7, "CUDA launch params: min_chunk spelt chunk_tokens, as the CPU engine's",
       [](Connection& c) { c.exec(kSchemaV7); }},
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
