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
#include "kernels/launch_params.h"

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

// The columns of the `launches` table after (id, backend, key): one per param field of either
// engine (kernels/launch_params.h), named by the field's name (the name specs, params texts and
// dispatch tables spell), in the CPU table's order, then the CUDA fields the CPU table lacks.
// A name both tables use (chunk_tokens, match_mode) is one column, of one type; a row holds
// NULL in the columns of fields its backend does not have.
struct LaunchColumn {
  std::string name;
  FieldType type = FieldType::integer;
};
const std::vector<LaunchColumn>& launch_columns();
// "l.\"threads\", l.\"chunk_tokens\", ...": launch_columns(), quoted, prefixed with `table.`.
std::string launch_column_list(std::string_view table = {});
// Reads a launch row's values from column `first` on (as launch_column_list() lists them): the
// backend's param fields, in its table's order. A stored value this build does not accept
// throws InputError naming it.
LaunchParams read_launch(const Statement& s, int first, Backend backend);
// Adds the launch columns a file lacks and gives the rows of each backend the defaults of
// fields they have no value for (what they were measured with). No-op without the table.
void sync_launch_columns(Connection& c);
// The row id of a launch in `launches` (inserted when new), keyed by its canonical text (every
// param field, in table order): `params` may omit fields or use aliases. InputError when it
// does not read through the backend's engine table.
std::int64_t upsert_launch(Connection& c, Backend backend, std::string_view params);

// Adds the settings columns of fields a file lacks, holding the fields' defaults (a migration
// step that reads settings columns calls it first; the keys are rebuilt by sync_settings).
// Whether it added any.
bool add_settings_columns(Connection& c);

// Brings the settings columns and the derived keys of a writable database up to this build's
// field tables (inside one transaction).
void sync_settings(Connection& c);
// "" when a database is up to date with this build's field tables, else what is not.
std::string settings_mismatch(const Connection& c);

}  // namespace mactune::db::detail
