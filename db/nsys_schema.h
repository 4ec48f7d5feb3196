// Schema steps of the nsys tables (see db/schema.h for the mechanism). v1 created
// nsys_reports, nsys_kernels and nsys_ranges with the rest of the schema.
#pragma once

#include "db/sqlite.h"

namespace mactune::db {

// v2: memcpy and memset rows (nsys_memops); per kernel the launch time and the row of its
// innermost NVTX range, so a range's kernels are exact even when range names repeat; the end
// thread of start/end ranges; per report the nsys version, its GPUs and its memop count.
void apply_nsys_schema_v2(Connection& c);

}  // namespace mactune::db
