// Store: reads for the decision step and the tools (measurements with their keys resolved,
// devices, instances).
#include "db/settings.h"
#include "db/store.h"

namespace mactune::db {
namespace {

// An instance row (name, backend, family, config from column `first` on), described as stored.
InstanceDesc instance_of(const Statement& s, int first) {
  return InstanceDesc::named(s.text(first), parse_enum<Backend>(s.text(first + 1)),
                             parse_enum<Family>(s.text(first + 2)), s.text(first + 3));
}

}  // namespace

std::vector<MeasurementRow> Store::measurements(const MeasurementFilter& f) const {
  std::string sql =
      "SELECT m.id, m.device_id, m.build_id, m.instance_id, m.params, m.workload_id, m.policy,"
      " m.cold, m.run_id, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,"
      " m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,"
      " m.throttled_samples, m.notes, m.started_at, m.finished_at,"
      " i.name, i.backend, i.family, i.config, w.context, w.extra, " +
      detail::field_columns<Problem>("w") + ", " + detail::field_columns<ForcedHits>("w") + ", " +
      detail::field_columns<MacParams>("w") +
      ", m.partial, m.samples_s, m.kv_tokens_read, m.kv_tokens_total, l.id, " +
      detail::launch_column_list("l") +
      " FROM measurements m JOIN instances i ON i.id = m.instance_id"
      " JOIN workloads w ON w.id = m.workload_id LEFT JOIN launches l ON l.id = m.launch_id"
      " WHERE m.device_id = ?1";
  if (f.id) sql += " AND m.id = ?8";
  if (f.build_id) sql += " AND m.build_id = ?2";
  if (f.workload_id) sql += " AND m.workload_id = ?3";
  if (f.instance) sql += " AND i.name = ?4";
  if (f.family) sql += " AND i.family = ?5";
  if (f.policy) sql += " AND m.policy = ?6";
  if (f.cold) sql += " AND m.cold = ?7";
  if (f.ok_only) sql += " AND m.status = 'ok'";
  sql += " ORDER BY m.workload_id, i.name, m.params, m.id";
  auto s = c_.prepare(sql);
  s.bind(1, f.device_id);
  if (f.build_id) s.bind(2, *f.build_id);
  if (f.workload_id) s.bind(3, *f.workload_id);
  if (f.instance) s.bind(4, *f.instance);
  if (f.family) s.bind(5, name_of(*f.family));
  if (f.policy) s.bind(6, *f.policy);
  if (f.cold) s.bind(7, *f.cold ? 1 : 0);
  if (f.id) s.bind(8, *f.id);

  std::vector<MeasurementRow> rows;
  while (s.step()) {
    MeasurementRow r;
    r.id = s.int64(0);
    Measurement& m = r.m;
    m.point = {s.int64(1), s.int64(2), s.int64(3),     s.text(4),
               s.int64(5), s.text(6),  s.int64(7) != 0};
    m.run_id = s.is_null(8) ? 0 : s.int64(8);
    m.status = parse_enum<PointStatus>(s.text(9));
    m.error = s.text(10);
    m.stats.samples = s.int32(17);
    m.stats.median_s = s.real(11);
    m.stats.q1_s = s.real(12);
    m.stats.q3_s = s.real(13);
    m.stats.min_s = s.real(14);
    m.stats.max_s = s.real(15);
    m.stats.mean_s = s.real(16);
    m.stats.rel_noise = s.real(18);
    if (const std::string why = s.text(19); !why.empty())
      m.stop_reason = parse_enum<StopReason>(why);
    m.modeled_bytes = s.opt_real(20);
    m.clock_mhz = s.opt_real(21);
    m.throttled_samples = s.int32(22);
    m.notes = s.text(23);
    m.started_at = s.text(24);
    m.finished_at = s.text(25);
    r.instance = instance_of(s, 26);
    Workload& w = r.workload;
    w.context = s.int64(30);
    w.extra = s.text(31);
    int col = detail::read_fields(s, 32, w.problem);
    col = detail::read_fields(s, col, w.forced);
    col = detail::read_fields(s, col, w.mac);
    m.partial = s.int64(col) != 0;
    if (!s.is_null(col + 1)) m.samples = parse_samples_text(s.text(col + 1));
    m.kv_tokens_read = s.opt_int64(col + 2);
    m.kv_tokens_total = s.opt_int64(col + 3);
    if (!s.is_null(col + 4)) {
      try {
        r.launch = detail::read_launch(s, col + 5, r.instance.backend);
      } catch (const InputError& e) {
        input_error(path_, ": measurement ", r.id, ": ", e.what());
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<DeviceRow> Store::devices() const {
  auto s = c_.prepare(
      "SELECT id, backend, name, compute_units, memory_mib, arch, runtime, threads, digest,"
      " first_seen FROM devices ORDER BY id");
  std::vector<DeviceRow> out;
  while (s.step()) {
    DeviceRow d;
    d.id = s.int64(0);
    d.fingerprint = {parse_enum<Backend>(s.text(1)),
                     s.text(2),
                     s.int32(3),
                     s.int64(4),
                     s.text(5),
                     s.text(6),
                     s.int32(7)};
    d.digest = s.text(8);
    d.first_seen = s.text(9);
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<Id> Store::find_device(const DeviceFingerprint& d) const {
  auto s = c_.prepare("SELECT id FROM devices WHERE fingerprint = ?1");
  s.bind(1, d.key());
  return s.step() ? std::optional<Id>(s.int64(0)) : std::nullopt;
}

std::optional<InstanceDesc> Store::instance(Id id) const {
  auto s = c_.prepare("SELECT name, backend, family, config FROM instances WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return instance_of(s, 0);
}

std::optional<Id> Store::find_instance(const std::string& name) const {
  auto s = c_.prepare("SELECT id FROM instances WHERE name = ?1");
  s.bind(1, name);
  return s.step() ? std::optional<Id>(s.int64(0)) : std::nullopt;
}

}  // namespace mactune::db
