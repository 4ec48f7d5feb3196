// Import of Nsight Systems reports (`nsys export --type sqlite`): kernels, memcpy/memset
// operations and NVTX ranges, linked to kernel instances by name.
//
// Every export version is read by learning the file (db/nsys_export.h): its tables, their
// columns, its NVTX event-type ids. What is read (docs/database.md lists it in full):
//   CUPTI_ACTIVITY_KIND_KERNEL   start, end, demangledName/shortName (ids into StringIds, or
//                                text in the oldest exports), and when present deviceId,
//                                streamId, correlationId, globalPid, grid/block, registers,
//                                shared memory, graphNodeId
//   CUPTI_ACTIVITY_KIND_MEMCPY / _MEMSET   start, end, bytes, copy and memory kinds, value
//   CUPTI_ACTIVITY_KIND_RUNTIME  correlationId, globalTid, start: the launching call
//   NVTX_EVENTS                  start, end, eventType, text or textId, domainId, globalTid
//   META_DATA_EXPORT or EXPORT_META_DATA, TARGET_INFO_SESSION_START_TIME, TARGET_INFO_GPU
//
// Linking: a row names an instance when one of its tokens (maximal runs of [A-Za-z0-9_]) is
// the canonical name of an instance stored in the database. A kernel whose own name does not
// is linked through its launch (db/nsys_timeline.h): the nearest enclosing NVTX range that
// names an instance.
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
  std::int64_t memops = 0;             // memcpy and memset operations
  std::int64_t ranges = 0;             // NVTX ranges and marks (domain/category events skipped)
  std::int64_t kernels_linked = 0;     // with an instance (by name or through a range)
  std::int64_t kernels_in_ranges = 0;  // with an enclosing NVTX range at launch
  std::int64_t ranges_linked = 0;
  std::string export_schema;         // EXPORT_SCHEMA_VERSION, if the file has it
  std::string nsys_version;          // EXPORT_PRODUCT_VERSION, if the file has it
  std::vector<std::string> notes{};  // what the report lacked, one line each
};

// Imports the report at `report_path` into `dest` in one transaction. Throws InputError when
// the file is missing, not SQLite, not an nsys export, or lacks a required column (named).
NsysImport import_nsys(Store& dest, const std::string& report_path);

// The canonical instance name among the tokens of `text`, or "" (exposed for tests).
std::string find_instance_token(std::string_view text,
                                const std::vector<std::string>& sorted_instance_names);

}  // namespace mactune::db
