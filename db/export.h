// CSV export of any table or view of a store: RFC 4180 fields (a comma, quote or newline puts
// the field in double quotes), records ending in "\n", NULL as an empty field.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "db/store.h"

namespace mactune::db {

// What `db export --table` accepts: every table plus the flat views.
const std::vector<std::string>& exportable_tables();

// The table a bare `db export` writes: every measurement with its keys spelled out.
inline constexpr const char* kDefaultExportTable = "measurements_view";

// Writes a header line and one line per row, ordered by the first column. Reals use the
// shortest text that reads back to the same double. Throws InputError for an unknown table.
// Returns the number of data rows.
std::int64_t export_csv(const Store& s, const std::string& table, std::ostream& out);

// One CSV field, quoted when needed.
std::string csv_field(std::string_view v);

}  // namespace mactune::db
