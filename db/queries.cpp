// Store: reads for the decision step and the tools (measurements with their keys resolved,
// devices, instances).
#include "db/store.h"

namespace mactune::db {

std::vector<MeasurementRow> Store::measurements(const MeasurementFilter& f) const {
  std::string sql =
      "SELECT m.id, m.device_id, m.build_id, m.instance_id, m.params, m.workload_id, m.policy,"
      " m.cold, m.run_id, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,"
      " m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,"
      " m.throttled_samples, m.notes, m.started_at, m.finished_at,"
      " i.name, i.backend, i.family, i.config,"
      " w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,"
      " w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.min_context,"
      " w.summary_dtype, w.rectify, w.accept_eps, w.extra"
      " FROM measurements m JOIN instances i ON i.id = m.instance_id"
      " JOIN workloads w ON w.id = m.workload_id WHERE m.device_id = ?1";
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
  if (f.family) s.bind(5, *f.family);
  if (f.policy) s.bind(6, *f.policy);
  if (f.cold) s.bind(7, *f.cold ? 1 : 0);

  std::vector<MeasurementRow> rows;
  while (s.step()) {
    MeasurementRow r;
    r.id = s.int64(0);
    Measurement& m = r.m;
    m.point = {s.int64(1), s.int64(2), s.int64(3),     s.text(4),
               s.int64(5), s.text(6),  s.int64(7) != 0};
    m.run_id = s.is_null(8) ? 0 : s.int64(8);
    m.status = s.text(9) == "ok" ? PointStatus::ok : PointStatus::failed;
    m.error = s.text(10);
    m.stats = {s.int32(17), s.real(11), s.real(12), s.real(13), s.real(14),
               s.real(15),  s.real(16), s.real(18), s.text(19)};
    m.modeled_bytes = s.opt_real(20);
    m.clock_mhz = s.opt_real(21);
    m.throttled_samples = s.int32(22);
    m.notes = s.text(23);
    m.started_at = s.text(24);
    m.finished_at = s.text(25);
    r.instance = {s.text(26), s.text(27), s.text(28), s.text(29)};
    Workload& w = r.workload;
    w.problem.batch = s.int32(30);
    w.context = s.int64(31);
    w.problem.q_heads = s.int32(32);
    w.problem.kv_heads = s.int32(33);
    w.problem.head_dim = s.int32(34);
    w.problem.kv_dtype = parse_dtype(s.text(35));
    w.problem.page_size = s.int32(36);
    w.hit_rate = s.real(37);
    w.lag = s.text(38);
    w.coherence = s.text(39);
    w.mac.ring_capacity = s.int32(40);
    w.mac.band = s.int32(41);
    w.mac.tau = s.real(42);
    w.mac.pick = parse_pick_rule(s.text(43));
    w.mac.min_context = s.int32(44);
    w.mac.summary_dtype = parse_dtype(s.text(45));
    w.mac.rectify = parse_rectify(s.text(46));
    w.mac.accept_eps = s.real(47);
    w.extra = s.text(48);
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
    d.fingerprint = {s.text(1), s.text(2), s.int32(3), s.int64(4),
                     s.text(5), s.text(6), s.int32(7)};
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

std::optional<InstanceInfo> Store::instance(Id id) const {
  auto s = c_.prepare("SELECT name, backend, family, config FROM instances WHERE id = ?1");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return InstanceInfo{s.text(0), s.text(1), s.text(2), s.text(3)};
}

std::optional<Id> Store::find_instance(const std::string& name) const {
  auto s = c_.prepare("SELECT id FROM instances WHERE name = ?1");
  s.bind(1, name);
  return s.step() ? std::optional<Id>(s.int64(0)) : std::nullopt;
}

}  // namespace mactune::db
