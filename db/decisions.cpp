// Store: decisions (best configs, break-even points), replay fidelity, table counts.
#include <cstdio>

#include "db/settings.h"
#include "db/store.h"

namespace mactune::db {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string tie_set_json(const std::vector<TieEntry>& ties) {
  std::string out = "[";
  for (std::size_t i = 0; i < ties.size(); ++i) {
    if (i) out += ",";
    out += "{\"instance\":" + json_string(ties[i].instance) +
           ",\"params\":" + json_string(ties[i].params) +
           ",\"median_s\":" + format_double(ties[i].median_s);
    if (ties[i].measurement_id != 0)
      out += ",\"measurement_id\":" + std::to_string(ties[i].measurement_id);
    out += "}";
  }
  return out + "]";
}

Id require_instance(const Store& s, const std::string& name, const char* what) {
  const auto id = s.find_instance(name);
  MACTUNE_CHECK(id.has_value(), what, " instance '", name, "' is not stored in '", s.path(),
                "'; upsert_instance() it first");
  return *id;
}

// Binds the key and shape columns of a decision at ?first .. ?first+7 (key, batch, context,
// q_heads, kv_heads, head_dim, kv_dtype, page_size).
void bind_bucket(Statement& s, int first, const Bucket& b, const std::string& key) {
  const ShapeKey& p = b.shape;
  s.bind(first, key).bind(first + 1, b.batch).bind(first + 2, b.context);
  s.bind(first + 3, p.q_heads).bind(first + 4, p.kv_heads).bind(first + 5, p.head_dim);
  s.bind(first + 6, dtype_name(p.kv_dtype)).bind(first + 7, p.page_size);
}

Bucket read_bucket(const Statement& s, int first) {
  Bucket b;
  b.batch = s.int32(first);
  b.context = s.int64(first + 1);
  b.shape.q_heads = s.int32(first + 2);
  b.shape.kv_heads = s.int32(first + 3);
  b.shape.head_dim = s.int32(first + 4);
  b.shape.kv_dtype = parse_dtype(s.text(first + 5));
  b.shape.page_size = s.int32(first + 6);
  return b;
}

}  // namespace

const std::vector<std::string>& table_names() {
  static const std::vector<std::string> names = {
      "devices",      "builds",       "instances",    "workloads",  "launches",
      "runs",         "measurements", "best_configs", "break_even", "fidelity",
      "nsys_reports", "nsys_kernels", "nsys_memops",  "nsys_ranges"};
  return names;
}

std::vector<std::pair<std::string, std::int64_t>> Store::table_counts() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& t : table_names())
    out.emplace_back(t, c_.scalar_int("SELECT COUNT(*) FROM " + sql_ident(t)));
  return out;
}

// ---- Best configs.

void Store::write_best_config(const BestConfig& b) {
  MACTUNE_CHECK(b.device_id > 0, "a best config needs a device id");
  const Id instance_id = require_instance(*this, b.instance, "best");
  auto s = c_.prepare(
      "INSERT INTO best_configs (device_id, build_id, family, policy, bucket, batch, context,"
      " q_heads, kv_heads, head_dim, kv_dtype, page_size, hit_rate, extra, instance_id, params,"
      " median_s, margin, tie_tolerance, tie_set, decided_at, measurement_id) VALUES (?1, ?2,"
      " ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,"
      " ?22) ON CONFLICT (device_id, bucket, family, policy) DO UPDATE SET"
      " build_id = excluded.build_id, instance_id = excluded.instance_id,"
      " params = excluded.params, measurement_id = excluded.measurement_id,"
      " median_s = excluded.median_s, margin = excluded.margin,"
      " tie_tolerance = excluded.tie_tolerance, tie_set = excluded.tie_set,"
      " decided_at = excluded.decided_at");
  s.bind(1, b.device_id).bind_id(2, b.build_id).bind(3, name_of(b.family)).bind(4, b.policy);
  bind_bucket(s, 5, b.bucket, decision_key(b.bucket, b.hit_rate, b.extra));
  s.bind(13, b.hit_rate).bind(14, b.extra).bind(15, instance_id).bind(16, b.params);
  s.bind(17, b.median_s).bind(18, b.margin).bind(19, b.tie_tolerance);
  s.bind(20, tie_set_json(b.tie_set)).bind(21, b.decided_at.empty() ? now_utc() : b.decided_at);
  s.bind_id(22, b.measurement_id);
  s.run();
}

std::vector<BestConfig> Store::best_configs(Id device_id) const {
  auto s = c_.prepare(
      "SELECT b.build_id, b.family, b.policy, b.batch, b.context, b.q_heads, b.kv_heads,"
      " b.head_dim, b.kv_dtype, b.page_size, b.hit_rate, b.extra, i.name, b.params, b.median_s,"
      " b.margin, b.tie_tolerance, b.tie_set, b.decided_at, b.measurement_id"
      " FROM best_configs b JOIN instances i ON i.id = b.instance_id WHERE b.device_id = ?1"
      " ORDER BY b.bucket, b.family, b.policy");
  s.bind(1, device_id);
  auto ties = c_.prepare(
      "SELECT json_extract(value, '$.instance'), json_extract(value, '$.params'),"
      " json_extract(value, '$.median_s'), json_extract(value, '$.measurement_id')"
      " FROM json_each(?1) ORDER BY key");
  std::vector<BestConfig> out;
  while (s.step()) {
    BestConfig b;
    b.device_id = device_id;
    b.build_id = s.is_null(0) ? 0 : s.int64(0);
    b.family = parse_enum<Family>(s.text(1));
    b.policy = s.text(2);
    b.bucket = read_bucket(s, 3);
    b.hit_rate = s.opt_real(10);
    b.extra = s.text(11);
    b.instance = s.text(12);
    b.params = s.text(13);
    b.median_s = s.real(14);
    b.margin = s.opt_real(15);
    b.tie_tolerance = s.real(16);
    ties.reset();
    ties.bind(1, s.text(17));
    while (ties.step())
      b.tie_set.push_back(
          {ties.text(0), ties.text(1), ties.real(2), ties.is_null(3) ? 0 : ties.int64(3)});
    b.decided_at = s.text(18);
    b.measurement_id = s.is_null(19) ? 0 : s.int64(19);
    out.push_back(std::move(b));
  }
  return out;
}

// ---- Break-even points.

void Store::write_break_even(const BreakEvenRow& b) {
  MACTUNE_CHECK(b.device_id > 0, "a break-even row needs a device id");
  MACTUNE_CHECK((b.status == BreakEvenStatus::ok) == b.hit_rate.has_value(),
                "a break-even hit rate is given iff the status is 'ok'");
  std::optional<Id> mac_id, full_id;
  if (!b.mac_instance.empty()) mac_id = require_instance(*this, b.mac_instance, "MAC");
  if (!b.full_instance.empty()) full_id = require_instance(*this, b.full_instance, "full");
  auto s = c_.prepare(
      "INSERT INTO break_even (device_id, build_id, policy, status, bucket, batch, context,"
      " q_heads, kv_heads, head_dim, kv_dtype, page_size, extra, hit_rate, speedup,"
      " mac_instance_id, mac_params, full_instance_id, full_params, notes, decided_at,"
      " mac_measurement_id, full_measurement_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
      " ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)"
      " ON CONFLICT (device_id, bucket, policy) DO UPDATE SET"
      " build_id = excluded.build_id, status = excluded.status, hit_rate = excluded.hit_rate,"
      " speedup = excluded.speedup, mac_instance_id = excluded.mac_instance_id,"
      " mac_params = excluded.mac_params, full_instance_id = excluded.full_instance_id,"
      " full_params = excluded.full_params, notes = excluded.notes,"
      " mac_measurement_id = excluded.mac_measurement_id,"
      " full_measurement_id = excluded.full_measurement_id,"
      " decided_at = excluded.decided_at");
  s.bind(1, b.device_id).bind_id(2, b.build_id).bind(3, b.policy);
  s.bind(4, name_of(b.status));
  // A break-even runs over hit rates: never part of its key.
  bind_bucket(s, 5, b.bucket, decision_key(b.bucket, std::nullopt, b.extra));
  s.bind(13, b.extra).bind(14, b.hit_rate).bind(15, b.speedup);
  s.bind(16, mac_id).bind(17, b.mac_params).bind(18, full_id).bind(19, b.full_params);
  s.bind(20, b.notes).bind(21, b.decided_at.empty() ? now_utc() : b.decided_at);
  s.bind_id(22, b.mac_measurement_id).bind_id(23, b.full_measurement_id);
  s.run();
}

std::vector<BreakEvenRow> Store::break_evens(Id device_id) const {
  auto s = c_.prepare(
      "SELECT b.build_id, b.policy, b.status, b.batch, b.context, b.q_heads, b.kv_heads,"
      " b.head_dim, b.kv_dtype, b.page_size, b.extra, b.hit_rate, b.speedup,"
      " COALESCE(mi.name, ''), b.mac_params, COALESCE(fi.name, ''), b.full_params, b.notes,"
      " b.decided_at, b.mac_measurement_id, b.full_measurement_id"
      " FROM break_even b LEFT JOIN instances mi ON mi.id = b.mac_instance_id"
      " LEFT JOIN instances fi ON fi.id = b.full_instance_id WHERE b.device_id = ?1"
      " ORDER BY b.bucket, b.policy");
  s.bind(1, device_id);
  std::vector<BreakEvenRow> out;
  while (s.step()) {
    BreakEvenRow b;
    b.device_id = device_id;
    b.build_id = s.is_null(0) ? 0 : s.int64(0);
    b.policy = s.text(1);
    b.status = parse_enum<BreakEvenStatus>(s.text(2));
    b.bucket = read_bucket(s, 3);
    b.extra = s.text(10);
    b.hit_rate = s.opt_real(11);
    b.speedup = s.opt_real(12);
    b.mac_instance = s.text(13);
    b.mac_params = s.text(14);
    b.full_instance = s.text(15);
    b.full_params = s.text(16);
    b.notes = s.text(17);
    b.decided_at = s.text(18);
    b.mac_measurement_id = s.is_null(19) ? 0 : s.int64(19);
    b.full_measurement_id = s.is_null(20) ? 0 : s.int64(20);
    out.push_back(std::move(b));
  }
  return out;
}

// ---- Fidelity.

void Store::record_fidelity(const FidelityResult& r) {
  MACTUNE_REQUIRE(!r.trace_hash.empty(), "a fidelity row needs the trace hash");
  // ?1..?6: keys and fixed settings; then the MAC settings (one column per field); then results.
  const std::string mac_cols = detail::field_columns<MacParams>();
  const int mac_first = 7;
  const int next = mac_first + static_cast<int>(fields_of<MacParams>().size());
  std::string marks;
  for (int i = 1; i < next + 17; ++i) marks += (i > 1 ? ", ?" : "?") + std::to_string(i);
  auto s = c_.prepare(
      "INSERT INTO fidelity (trace_hash, trace_name, layer, settings, engine, kv_dtype, " +
      mac_cols +
      ", steps, hit_rate, group_all_hit_rate, skip_ratio, head_skip_ratio, err_mean, err_p50,"
      " err_p99, err_max, err_frac_gt_0_1, ref_err_mean, ref_err_p50, ref_err_p99, ref_err_max,"
      " ref_err_frac_gt_0_1, build_id, recorded_at) VALUES (" +
      marks +
      ") ON CONFLICT (trace_hash, layer, settings) DO UPDATE SET"
      " trace_name = excluded.trace_name, steps = excluded.steps,"
      " hit_rate = excluded.hit_rate, group_all_hit_rate = excluded.group_all_hit_rate,"
      " skip_ratio = excluded.skip_ratio, head_skip_ratio = excluded.head_skip_ratio,"
      " err_mean = excluded.err_mean, err_p50 = excluded.err_p50, err_p99 = excluded.err_p99,"
      " err_max = excluded.err_max, err_frac_gt_0_1 = excluded.err_frac_gt_0_1,"
      " ref_err_mean = excluded.ref_err_mean, ref_err_p50 = excluded.ref_err_p50,"
      " ref_err_p99 = excluded.ref_err_p99, ref_err_max = excluded.ref_err_max,"
      " ref_err_frac_gt_0_1 = excluded.ref_err_frac_gt_0_1, build_id = excluded.build_id,"
      " recorded_at = excluded.recorded_at");
  s.bind(1, r.trace_hash).bind(2, r.trace_name).bind(3, r.layer).bind(4, r.settings.key());
  s.bind(5, r.settings.engine).bind(6, dtype_name(r.settings.kv_dtype));
  detail::bind_fields(s, mac_first, r.settings.mac);
  const int i = next;  // the results
  s.bind(i, r.steps).bind(i + 1, r.hit_rate).bind(i + 2, r.group_all_hit_rate);
  s.bind(i + 3, r.skip_ratio).bind(i + 4, r.head_skip_ratio);
  const ErrorStats& e = r.rel_err;
  s.bind(i + 5, e.mean).bind(i + 6, e.p50).bind(i + 7, e.p99).bind(i + 8, e.max);
  s.bind(i + 9, e.frac_gt_0_1);
  if (r.rel_err_vs_ref) {
    const ErrorStats& f = *r.rel_err_vs_ref;
    s.bind(i + 10, f.mean).bind(i + 11, f.p50).bind(i + 12, f.p99).bind(i + 13, f.max);
    s.bind(i + 14, f.frac_gt_0_1);
  } else {
    for (int k = 10; k < 15; ++k) s.bind_null(i + k);
  }
  s.bind_id(i + 15, r.build_id).bind(i + 16, r.recorded_at.empty() ? now_utc() : r.recorded_at);
  s.run();
}

std::vector<FidelityResult> Store::fidelity(const std::string& trace_hash) const {
  auto s = c_.prepare(
      "SELECT trace_hash, trace_name, layer, engine, kv_dtype, steps, hit_rate, group_all_hit_rate,"
      " skip_ratio, head_skip_ratio, err_mean, err_p50, err_p99, err_max, err_frac_gt_0_1,"
      " ref_err_mean, ref_err_p50, ref_err_p99, ref_err_max, ref_err_frac_gt_0_1, build_id,"
      " recorded_at, " +
      detail::field_columns<MacParams>() +
      " FROM fidelity WHERE ?1 = '' OR trace_hash = ?1"
      " ORDER BY trace_hash, layer, settings");
  s.bind(1, trace_hash);
  std::vector<FidelityResult> out;
  while (s.step()) {
    FidelityResult r;
    r.trace_hash = s.text(0);
    r.trace_name = s.text(1);
    r.layer = s.int32(2);
    r.settings.engine = s.text(3);
    r.settings.kv_dtype = parse_dtype(s.text(4));
    r.steps = s.int64(5);
    r.hit_rate = s.real(6);
    r.group_all_hit_rate = s.real(7);
    r.skip_ratio = s.real(8);
    r.head_skip_ratio = s.real(9);
    r.rel_err = {s.real(10), s.real(11), s.real(12), s.real(13), s.real(14)};
    if (!s.is_null(15))
      r.rel_err_vs_ref = ErrorStats{s.real(15), s.real(16), s.real(17), s.real(18), s.real(19)};
    r.build_id = s.is_null(20) ? 0 : s.int64(20);
    r.recorded_at = s.text(21);
    detail::read_fields(s, 22, r.settings.mac);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace mactune::db
