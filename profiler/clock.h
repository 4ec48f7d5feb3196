// One clock for every timestamp the profiler writes: host phase spans, CUDA API calls and GPU
// activity (the CUPTI collector registers now_ns() as CUPTI's timestamp source), so spans from
// all sources line up without any post-hoc alignment.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <ctime>

namespace mactune::prof {

// Nanoseconds on CLOCK_MONOTONIC: never jumps (CUPTI's default, CLOCK_REALTIME, can step
// under NTP), about 20 ns per call through the vDSO.
inline std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The kernel's id of the calling thread (what `top -H` and perf show).
inline std::int64_t os_thread_id() {
  return static_cast<std::int64_t>(::syscall(SYS_gettid));
}

// What CUPTI stores in CUpti_ActivityAPI::threadId on Linux: the low 32 bits of pthread_self().
inline std::uint32_t cupti_thread_id() {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(pthread_self()));
}

}  // namespace mactune::prof
