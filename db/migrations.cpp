// The schema's steps after v2, in order (db/schema.h says how they run; db/schema.cpp holds
// v1 and the list of steps). Shipped steps are never edited: a change is a new step.
#include "db/migrations.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "db/settings.h"

namespace mactune::db {
namespace {

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

}  // namespace

void apply_v3(Connection& c) {
  c.exec(kSchemaV3);
}

void apply_v4(Connection& c) {
  c.exec(
      "ALTER TABLE measurements ADD COLUMN partial INTEGER NOT NULL DEFAULT 0"
      " CHECK (partial IN (0, 1))");
}

void apply_v5(Connection& c) {
  c.exec("ALTER TABLE measurements ADD COLUMN samples_s TEXT");
}

void apply_v6(Connection& c) {
  c.exec(kSchemaV6);
}

void apply_v7(Connection& c) {
  c.exec(kSchemaV7);
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

}  // namespace mactune::db
