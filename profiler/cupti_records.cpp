#include "profiler/cupti_records.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "profiler/cupti_api.h"

namespace mactune::prof::cupti {

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

const char* memcpy_kind_name(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "unknown";
  }
}

const char* sync_type_name(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "event synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "stream synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "context synchronize";
    default:
      return "synchronize";
  }
}

const std::string& RecordDecoder::kernel_name(const char* mangled) {
  auto it = kernel_names_.find(mangled);
  if (it == kernel_names_.end()) it = kernel_names_.emplace(mangled, demangle(mangled)).first;
  return it->second;
}

const std::string& RecordDecoder::api_name(bool driver, CUpti_CallbackId cbid) {
  const std::uint64_t key = (static_cast<std::uint64_t>(driver) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* raw = nullptr;
  std::string name;
  const Api* lib = api();  // without libcupti the name stays numeric
  if (lib &&
      lib->GetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                           &raw) == CUPTI_SUCCESS &&
      raw) {
    name = raw;
    // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the version suffix is noise in a trace.
    const auto v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        name.find_first_not_of("0123456789", v + 2) == std::string::npos)
      name.resize(v);
  } else {
    name = std::string(driver ? "driver" : "runtime") + " API " + std::to_string(cbid);
  }
  return api_names_.emplace(key, std::move(name)).first->second;
}

bool RecordDecoder::times(std::uint64_t start, std::uint64_t end, ActivityLog& log, std::int64_t* s,
                          std::int64_t* e) const {
  // 0 is CUPTI_TIMESTAMP_UNKNOWN (e.g. concurrent-kernel records when CUPTI ran out of device
  // buffer): such records cannot be placed on a timeline.
  if (start == 0 || end == 0 || end < start) {
    ++log.records_without_time;
    return false;
  }
  *s = static_cast<std::int64_t>(start) + offset_;
  *e = static_cast<std::int64_t>(end) + offset_;
  return true;
}

namespace {

// The fields every device record (kernel, memcpy, memset) carries the same way.
template <class Record>
void fill_common(const Record& r, DeviceActivity& d) {
  d.device = r.deviceId;
  d.context = r.contextId;
  d.stream = r.streamId;
  d.correlation = r.correlationId;
  d.graph_id = r.graphId;
  d.graph_node_id = r.graphNodeId;
}

}  // namespace

bool RecordDecoder::decode(const CUpti_Activity* record, ActivityLog& log) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelRecord*>(record);
      DeviceActivity d;
      if (!times(k->start, k->end, log, &d.start_ns, &d.end_ns)) return true;
      d.op = DeviceOp::kernel;
      d.name = kernel_name(k->name);
      fill_common(*k, d);
      d.grid[0] = k->gridX, d.grid[1] = k->gridY, d.grid[2] = k->gridZ;
      d.block[0] = k->blockX, d.block[1] = k->blockY, d.block[2] = k->blockZ;
      d.registers_per_thread = k->registersPerThread;
      d.static_shared_bytes = k->staticSharedMemory;
      d.dynamic_shared_bytes = k->dynamicSharedMemory;
      log.device.push_back(std::move(d));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
      DeviceActivity d;
      if (!times(m->start, m->end, log, &d.start_ns, &d.end_ns)) return true;
      d.op = DeviceOp::memcpy;
      d.name = std::string("Memcpy ") + memcpy_kind_name(m->copyKind);
      fill_common(*m, d);
      d.bytes = m->bytes;
      log.device.push_back(std::move(d));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const MemsetRecord*>(record);
      DeviceActivity d;
      if (!times(m->start, m->end, log, &d.start_ns, &d.end_ns)) return true;
      d.op = DeviceOp::memset;
      d.name = "Memset";
      fill_common(*m, d);
      d.bytes = m->bytes;
      log.device.push_back(std::move(d));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const ApiRecord*>(record);
      ApiCall c;
      if (!times(a->start, a->end, log, &c.start_ns, &c.end_ns)) return true;
      c.driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      c.name = api_name(c.driver, a->cbid);
      c.process = a->processId;
      c.thread = a->threadId;
      c.correlation = a->correlationId;
      c.return_value = a->returnValue;
      log.api.push_back(std::move(c));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* y = reinterpret_cast<const SyncRecord*>(record);
      SyncActivity s;
      if (!times(y->start, y->end, log, &s.start_ns, &s.end_ns)) return true;
      s.type = sync_type_name(y->type);
      s.context = y->contextId;
      s.stream = y->streamId;
      s.correlation = y->correlationId;
      log.sync.push_back(std::move(s));
      return true;
    }
    default:
      ++log.other_records;
      return false;
  }
}

}  // namespace mactune::prof::cupti
