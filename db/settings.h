// Settings columns, derived from the field tables (kernels/fields.h): a row's shape, forced-hit
// workload and MAC settings are stored one column per field, named by its member and typed by
// its field type, so a field added to a table is a column without a schema step of its own.
// Store::open adds the columns of fields this build knows and a file lacks (holding the field's
// default: what every older row was measured with) and rebuilds the keys derived from those
// columns (workload keys, fidelity settings, decision buckets) when their format changed.
// Internal to mactune::db.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "db/sqlite.h"
#include "kernels/fields.h"

namespace mactune::db::detail {

void bind_scalar(Statement& s, int index, const Scalar& v);
// Column `col` of the current row as a value of `type` (for Field::check()).
Scalar read_scalar(const Statement& s, int col, FieldType type);

// "batch, q_heads, ..." (each member, prefixed with `table` + "." when given).
template <Described S>
std::string field_columns(std::string_view table = {}) {
  std::string out;
  for (const Field<S>& f : fields_of<S>()) {
    if (!out.empty()) out += ", ";
    if (!table.empty()) out += std::string(table) + ".";
    out += std::string(f.member);
  }
  return out;
}

// Binds every field of `v` from ?first on; returns the next free index.
template <Described S>
int bind_fields(Statement& s, int first, const S& v) {
  for (const Field<S>& f : fields_of<S>()) bind_scalar(s, first++, f.get(v));
  return first;
}

// Reads every field of `v` from column `first` on (as field_columns<S>() lists them); returns
// the next column. A stored value this build does not accept throws InputError naming it.
template <Described S>
int read_fields(const Statement& s, int first, S& v) {
  for (const Field<S>& f : fields_of<S>()) {
    try {
      f.set(v, f.check(read_scalar(s, first, f.type)));
    } catch (const InputError& e) {
      input_error("stored ", f.member, ": ", e.what());
    }
    ++first;
  }
  return first;
}

// Brings the settings columns and the derived keys of a writable database up to this build's
// field tables (inside one transaction).
void sync_settings(Connection& c);
// "" when a database is up to date with this build's field tables, else what is not.
std::string settings_mismatch(const Connection& c);

}  // namespace mactune::db::detail
