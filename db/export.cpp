#include "db/export.h"

#include <algorithm>

namespace mactune::db {

const std::vector<std::string>& exportable_tables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = table_names();
    n.insert(n.begin(), kDefaultExportTable);
    n.push_back("schema_version");
    return n;
  }();
  return names;
}

std::string csv_field(std::string_view v) {
  if (v.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(v);
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::int64_t export_csv(const Store& s, const std::string& table, std::ostream& out) {
  const auto& names = exportable_tables();
  if (std::find(names.begin(), names.end(), table) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    input_error("unknown table '", table, "' (expected one of: ", list, ")");
  }
  // The name is one of ours, never user text, by the check above.
  auto q = s.connection().prepare("SELECT * FROM " + sql_ident(table) + " ORDER BY 1");
  const int n = q.column_count();
  for (int c = 0; c < n; ++c) out << (c ? "," : "") << csv_field(q.column_name(c));
  out << '\n';
  std::int64_t rows = 0;
  while (q.step()) {
    for (int c = 0; c < n; ++c) {
      if (c) out << ',';
      switch (q.column_type(c)) {
        case SQLITE_NULL:
          break;
        case SQLITE_INTEGER:
          out << q.int64(c);
          break;
        case SQLITE_FLOAT:
          out << format_double(q.real(c));
          break;
        default:
          out << csv_field(q.text(c));
      }
    }
    out << '\n';
    ++rows;
  }
  return rows;
}

}  // namespace mactune::db
