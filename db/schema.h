// The database schema as an ordered list of migrations. A database records its version in
// `schema_version`; opening it applies every later migration in one transaction each, so a
// file is always at exactly one version and a failed migration leaves it as it was.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "db/sqlite.h"

namespace mactune::db {

struct Migration {
  int version = 0;          // the version this step produces (1, 2, ...), strictly increasing
  std::string description;  // one line, stored in schema_version
  std::function<void(Connection&)> apply;  // runs inside the migration's transaction
};

// This build's migrations: v1 creates every table (db/schema.cpp), v2 extends the nsys tables
// (db/nsys_schema.cpp), v3 records the key formats and renames the MAC settings in decisions,
// and so on (v3 on: db/migrations.cpp). Append new steps; never edit shipped ones. (Settings
// columns follow the field tables without a step of their own: db/settings.h.)
const std::vector<Migration>& builtin_migrations();

// The version the last migration produces.
int latest_version(const std::vector<Migration>& migrations);

// The version stored in the file (0 for an empty database with no tables at all). Throws
// InputError for an SQLite file that holds tables but no schema_version (not a mactune DB).
int stored_version(const Connection& c, const std::string& path);

// Brings the database to the latest version of `migrations`. Throws InputError when the file
// is newer than `migrations` knows (written by a later mactune).
void migrate(Connection& c, const std::string& path, const std::vector<Migration>& migrations);

}  // namespace mactune::db
