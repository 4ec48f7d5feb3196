// The schema's steps after v2 (db/migrations.cpp), each run inside its migration's transaction;
// builtin_migrations() (db/schema.cpp) lists them with their descriptions. Internal to
// mactune::db.
#pragma once

#include "db/sqlite.h"

namespace mactune::db {

void apply_v3(Connection& c);  // key formats; MAC settings in decisions spelt with field names
void apply_v4(Connection& c);  // measurements.partial
void apply_v5(Connection& c);  // measurements.samples_s
void apply_v6(Connection& c);  // measurements_view shows partial
void apply_v7(Connection& c);  // CUDA's min_chunk spelt chunk_tokens in stored launch texts
void apply_v8(Connection& c);  // typed KV token counts (were notes); break-even 'found' is 'ok'
void apply_v9(Connection& c);  // launches typed; decisions reference a measurement

}  // namespace mactune::db
