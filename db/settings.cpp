// Settings columns and derived keys (db/settings.h).
#include "db/settings.h"

#include <set>

#include "db/store.h"

namespace mactune::db::detail {
namespace {

std::string sql_type(FieldType t) {
  switch (t) {
    case FieldType::integer:
    case FieldType::boolean:
      return "INTEGER";
    case FieldType::real:
      return "REAL";
    default:
      return "TEXT";
  }
}

// The settings columns of one table: (table, column, type, default as an SQL literal).
struct Column {
  std::string table, name, type, default_sql;
};

template <Described S>
void add_columns(std::vector<Column>& out, const std::string& table) {
  const S defaults{};
  for (const Field<S>& f : fields_of<S>()) {
    const Scalar v = f.get(defaults);
    std::string lit = f.type == FieldType::boolean             ? (std::get<bool>(v) ? "1" : "0")
                      : std::holds_alternative<std::string>(v) ? sql_literal(scalar_text(v))
                                                               : scalar_text(v);
    out.push_back({table, std::string(f.member), sql_type(f.type), lit});
  }
}

const std::vector<Column>& settings_columns() {
  static const std::vector<Column> cols = [] {
    std::vector<Column> c;
    add_columns<Problem>(c, "workloads");
    add_columns<ForcedHits>(c, "workloads");
    add_columns<MacParams>(c, "workloads");
    add_columns<MacParams>(c, "fidelity");
    return c;
  }();
  return cols;
}

template <Described S>
std::string names() {
  std::string out;
  for (const Field<S>& f : fields_of<S>()) out += std::string(f.name) + ",";
  return out;
}

// A digest of every derived key's format: the fields it lists, in order, and the version of
// the code that spells it (bump `keys/N` when a key's spelling changes otherwise).
std::string key_format_digest() {
  return fnv1a_hex("keys/2;workloads:" + names<Problem>() + "context," + names<ForcedHits>() +
                   names<MacParams>() + "extra;fidelity:engine,kv_dtype," + names<MacParams>() +
                   ";decisions:bucket");
}

std::set<std::string> columns_of(const Connection& c, const std::string& table) {
  auto s = c.prepare("SELECT name FROM pragma_table_info(?1)");
  s.bind(1, table);
  std::set<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

std::string stored_digest(const Connection& c) {
  if (!c.table_exists("key_formats")) return "";
  auto s = c.prepare("SELECT digest FROM key_formats WHERE name = 'keys'");
  return s.step() ? s.text(0) : "";
}

// Rewrites `column` of every row of `table` from the row itself: first to a placeholder unique
// per row (the new keys may collide with old ones mid-way), then to the key.
template <class KeyOf>
void rekey(Connection& c, const std::string& table, const std::string& column,
           const std::string& select_columns, KeyOf key_of) {
  std::vector<std::pair<std::int64_t, std::string>> keys;
  {
    auto s = c.prepare("SELECT id, " + select_columns + " FROM " + table);
    while (s.step()) keys.emplace_back(s.int64(0), key_of(s));
  }
  c.exec("UPDATE " + table + " SET " + column + " = '#' || id");
  auto u = c.prepare("UPDATE " + table + " SET " + column + " = ?2 WHERE id = ?1");
  for (const auto& [id, key] : keys) {
    u.reset();
    u.bind(1, id).bind(2, key).run();
  }
}

void rekey_all(Connection& c) {
  rekey(c, "workloads", "key",
        "context, extra, " + field_columns<Problem>() + ", " + field_columns<ForcedHits>() + ", " +
            field_columns<MacParams>(),
        [](const Statement& s) {
          Workload w;
          w.context = s.int64(1);
          w.extra = s.text(2);
          int col = read_fields(s, 3, w.problem);
          col = read_fields(s, col, w.forced);
          read_fields(s, col, w.mac);
          return w.key();
        });
  rekey(c, "fidelity", "settings", "engine, kv_dtype, " + field_columns<MacParams>(),
        [](const Statement& s) {
          FidelitySettings f;
          f.engine = s.text(1);
          f.kv_dtype = parse_dtype(s.text(2));
          read_fields(s, 3, f.mac);
          return f.key();
        });
  for (const bool best : {true, false}) {
    rekey(c, best ? "best_configs" : "break_even", "bucket",
          "context, extra, " + std::string(best ? "hit_rate" : "NULL") + ", " +
              field_columns<Problem>(),
          [](const Statement& s) {
            Problem p;
            read_fields(s, 4, p);
            return decision_key(Bucket::of(p, s.int64(1)), s.opt_real(3), s.text(2));
          });
  }
}

// The launches columns of each backend with a NULL where the backend's row should hold a value.
std::string launch_gaps(const Connection& c) {
  if (!c.table_exists("launches")) return "";
  const auto have = columns_of(c, "launches");
  for (const Backend b : {Backend::cpu, Backend::cuda})
    for (const LaunchField& f : launch_fields(b)) {
      if (!have.count(f.name)) return "launches has no column '" + f.name + "' yet";
      auto q = c.prepare("SELECT EXISTS (SELECT 1 FROM launches WHERE backend = ?1 AND " +
                         sql_ident(f.name) + " IS NULL)");
      q.bind(1, name_of(b));
      if (q.step() && q.int64(0) != 0)
        return "launches rows of " + std::string(name_of(b)) + " have no " + f.name + " yet";
    }
  return "";
}

}  // namespace

const std::vector<LaunchColumn>& launch_columns() {
  static const std::vector<LaunchColumn> cols = [] {
    std::vector<LaunchColumn> out;
    for (const Backend b : {Backend::cpu, Backend::cuda})
      for (const LaunchField& f : launch_fields(b)) {
        bool seen = false;
        for (const LaunchColumn& c : out)
          if (c.name == f.name) {
            MACTUNE_CHECK(sql_type(c.type) == sql_type(f.type), "launch field '", f.name,
                          "' has another type in the ", name_of(b),
                          " engine table than in the other: one column cannot hold both");
            seen = true;
          }
        if (!seen) out.push_back({f.name, f.type});
      }
    return out;
  }();
  return cols;
}

std::string launch_column_list(std::string_view table) {
  std::string out;
  for (const LaunchColumn& c : launch_columns()) {
    if (!out.empty()) out += ", ";
    if (!table.empty()) out += std::string(table) + ".";
    out += sql_ident(c.name);
  }
  return out;
}

LaunchParams read_launch(const Statement& s, int first, Backend backend) {
  const auto& cols = launch_columns();
  return with_engine(backend, [&](auto e) {
    using Engine = decltype(e);
    for (const Field<Engine>& f : fields_of<Engine>()) {
      if (f.role != FieldRole::param) continue;
      int col = first;
      while (cols[static_cast<std::size_t>(col - first)].name != f.name) ++col;
      try {
        const Scalar v = read_scalar(s, col, f.type);
        // An instance field travels as "auto" when left to the engine, as launch_params_of().
        f.set(e, f.check(f.type == FieldType::instance && v == Scalar(std::string("auto"))
                             ? Scalar(std::string())
                             : v));
      } catch (const InputError& err) {
        input_error("stored launch ", f.name, ": ", err.what());
      }
    }
    return launch_params_of(e);
  });
}

void sync_launch_columns(Connection& c) {
  if (!c.table_exists("launches")) return;
  const auto have = columns_of(c, "launches");
  for (const LaunchColumn& col : launch_columns())
    if (!have.count(col.name))
      c.exec("ALTER TABLE launches ADD COLUMN " + sql_ident(col.name) + " " + sql_type(col.type));
  for (const Backend b : {Backend::cpu, Backend::cuda})
    for (const LaunchField& f : launch_fields(b)) {
      auto u = c.prepare("UPDATE launches SET " + sql_ident(f.name) +
                         " = ?2 WHERE backend = ?1 AND " + sql_ident(f.name) + " IS NULL");
      u.bind(1, name_of(b));
      bind_scalar(u, 2, f.default_value);
      u.run();
    }
}

std::int64_t upsert_launch(Connection& c, Backend backend, std::string_view params) {
  const LaunchParams launch = parse_launch_params(backend, params);
  const std::string key = launch_params_text(launch);
  std::string cols = "backend, key", marks = "?1, ?2";
  int at = 3;
  for (const auto& [name, value] : launch) {
    cols += ", " + sql_ident(name);
    marks += ", ?" + std::to_string(at++);
  }
  auto ins = c.prepare("INSERT INTO launches (" + cols + ") VALUES (" + marks +
                       ") ON CONFLICT (backend, key) DO NOTHING");
  ins.bind(1, name_of(backend)).bind(2, key);
  at = 3;
  for (const auto& [name, value] : launch) bind_scalar(ins, at++, value);
  ins.run();
  auto sel = c.prepare("SELECT id FROM launches WHERE backend = ?1 AND key = ?2");
  sel.bind(1, name_of(backend)).bind(2, key);
  MACTUNE_CHECK(sel.step(), "launch '", key, "' was not stored");
  return sel.int64(0);
}

void bind_scalar(Statement& s, int index, const Scalar& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v))
    s.bind(index, *i);
  else if (const auto* d = std::get_if<double>(&v))
    s.bind(index, *d);
  else if (const auto* b = std::get_if<bool>(&v))
    s.bind(index, *b ? 1 : 0);
  else
    s.bind(index, std::get<std::string>(v));
}

Scalar read_scalar(const Statement& s, int col, FieldType type) {
  switch (type) {
    case FieldType::integer:
      return s.int64(col);
    case FieldType::real:
      return s.real(col);
    case FieldType::boolean:
      return s.int64(col) != 0;
    default:
      return s.text(col);
  }
}

bool add_settings_columns(Connection& c) {
  bool added = false;
  for (const Column& col : settings_columns()) {
    if (columns_of(c, col.table).count(col.name)) continue;
    c.exec("ALTER TABLE " + col.table + " ADD COLUMN " + col.name + " " + col.type +
           " NOT NULL DEFAULT " + col.default_sql);
    added = true;
  }
  return added;
}

void sync_settings(Connection& c) {
  if (settings_mismatch(c).empty()) return;  // the common case: no write lock taken
  Transaction t(c);
  const bool added = add_settings_columns(c);
  if (!launch_gaps(c).empty()) sync_launch_columns(c);
  const std::string digest = key_format_digest();
  if (added || stored_digest(c) != digest) {
    rekey_all(c);
    auto s = c.prepare("INSERT OR REPLACE INTO key_formats (name, digest) VALUES ('keys', ?1)");
    s.bind(1, digest).run();
  }
  t.commit();
}

std::string settings_mismatch(const Connection& c) {
  for (const Column& col : settings_columns())
    if (!columns_of(c, col.table).count(col.name))
      return col.table + " has no column '" + col.name + "' yet";
  if (stored_digest(c) != key_format_digest()) return "its keys are spelt by an older mactune";
  return launch_gaps(c);
}

}  // namespace mactune::db::detail
