// CUPTI activity records -> the profiler's own records (profiler/activity.h). Kept apart from the
// collector so tests can feed hand-filled CUPTI structs through exactly the code the collector
// runs on real buffers. Only built with CUPTI (MACTUNE_HAVE_CUPTI).
#pragma once

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_version.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "profiler/activity.h"

// The record layouts below are those of CUPTI 13.0. CUPTI writes the newest layout its own
// library knows and only ever appends fields, so an older struct is a readable prefix of a newer
// one; never alias a struct newer than these headers (the collector also refuses a libcupti
// older than the headers).
static_assert(CUPTI_API_VERSION >= 130000, "mactune's CUPTI code targets CUDA 13 (CUPTI 13.0+)");

namespace mactune::prof::cupti {

using KernelRecord = CUpti_ActivityKernel10;  // CONCURRENT_KERNEL and KERNEL
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;
using ApiRecord = CUpti_ActivityAPI;  // RUNTIME and DRIVER
using SyncRecord = CUpti_ActivitySynchronization2;

// Decodes records one at a time into an ActivityLog. Kernel names arrive mangled, as pointers
// CUPTI owns and shares between records of one kernel: they are demangled once and copied.
class RecordDecoder {
 public:
  // `clock_offset_ns` is added to every CUPTI timestamp: 0 when CUPTI uses the profiler clock
  // (the collector registers it), else the measured offset between the two clocks.
  explicit RecordDecoder(std::int64_t clock_offset_ns = 0) : offset_(clock_offset_ns) {}
  void set_clock_offset(std::int64_t ns) { offset_ = ns; }

  // Appends what `record` holds to `log`; returns false for kinds it does not convert.
  bool decode(const CUpti_Activity* record, ActivityLog& log);

 private:
  const std::string& kernel_name(const char* mangled);
  const std::string& api_name(bool driver, CUpti_CallbackId cbid);
  bool times(std::uint64_t start, std::uint64_t end, ActivityLog& log, std::int64_t* s,
             std::int64_t* e) const;

  std::int64_t offset_;
  std::unordered_map<const char*, std::string> kernel_names_;
  std::unordered_map<std::uint64_t, std::string> api_names_;  // (driver << 32) | cbid
};

// The demangled name ("void attend<128, 4>(Params)"), or the input when it is not mangled.
std::string demangle(const char* name);

// "HtoD", "DtoH", "DtoD", ... for a CUpti_ActivityMemcpyKind value.
const char* memcpy_kind_name(std::uint8_t copy_kind);
// "stream synchronize", ... for a CUpti_ActivitySynchronizationType value.
const char* sync_type_name(CUpti_ActivitySynchronizationType type);

}  // namespace mactune::prof::cupti
