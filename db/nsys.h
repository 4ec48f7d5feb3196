// Import of Nsight Systems reports (`nsys export --type sqlite`): the kernel and NVTX rows,
// linked to kernel instances by name.
//
// What is read (tables are created lazily by nsys and columns vary between versions, so every
// table and column is probed; see docs/database.md):
//   CUPTI_ACTIVITY_KIND_KERNEL   start, end, demangledName/shortName (ids into StringIds), and
//                                when present deviceId, streamId, correlationId, globalPid,
//                                grid/block dims, registers, shared memory, graphNodeId
//   CUPTI_ACTIVITY_KIND_RUNTIME  correlationId, globalTid, start: the launching call
//   NVTX_EVENTS                  start, end, eventType (59 push/pop, 60 start/end, 34 mark,
//                                75 domain create), text or textId, domainId, globalTid
//   META_DATA_EXPORT, TARGET_INFO_SESSION_START_TIME   export schema version, time anchor
//
// Linking: a row names an instance when one of its tokens (maximal runs of [A-Za-z0-9_]) is
// the canonical name of an instance stored in the database. A kernel whose own name does not
// is attributed through its launch: the runtime call with the same correlation id gives the
// thread and time, and the innermost NVTX range open on that thread at that time (the launch,
// not the kernel's GPU time, which may run later) is the kernel's `nvtx_range`; the nearest
// enclosing range that names an instance links it.
//
// A report is identified by the hash of its bytes: importing it again adds nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/store.h"

namespace mactune::db {

struct NsysImport {
  Id report_id = 0;
  bool already_imported = false;
  std::int64_t kernels = 0;
  std::int64_t ranges = 0;             // NVTX ranges and marks (domain/category events skipped)
  std::int64_t kernels_linked = 0;     // with an instance (by name or through a range)
  std::int64_t kernels_in_ranges = 0;  // with an enclosing NVTX range at launch
  std::int64_t ranges_linked = 0;
  std::string export_schema;         // META_DATA_EXPORT's EXPORT_SCHEMA_VERSION, if any
  std::vector<std::string> notes{};  // what the report lacked, one line each
};

// Imports the report at `report_path` into `dest` in one transaction. Throws InputError when
// the file is missing, not SQLite, not an nsys export, or lacks a required column (named).
NsysImport import_nsys(Store& dest, const std::string& report_path);

// The canonical instance name among the tokens of `text`, or "" (exposed for tests).
std::string find_instance_token(std::string_view text,
                                const std::vector<std::string>& sorted_instance_names);

}  // namespace mactune::db
