// What a measurement's samples are timed with: part of every point's identity (the database's
// `policy` column spells it) and a choice of the spec's `measure.timer` ("auto": the backend's
// default, steady_clock on CPUs, cuda_events on GPUs).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/backend.h"
#include "kernels/enum_names.h"

namespace mactune {

enum class Timer : std::uint8_t {
  steady_clock,  // the host steady clock around the call (CPU)
  cuda_events,   // events recorded on the stream around the kernels (GPU)
  cupti,         // kernel durations from CUPTI activity records (GPU)
};
template <>
struct EnumNames<Timer> {
  static constexpr std::string_view what = "timer";
  static constexpr EnumName<Timer> names[] = {{Timer::steady_clock, "steady_clock"},
                                              {Timer::cuda_events, "cuda_events"},
                                              {Timer::cupti, "cupti"}};
};

// The backend whose samples a timer can time.
constexpr Backend backend_of(Timer t) {
  return t == Timer::steady_clock ? Backend::cpu : Backend::cuda;
}

}  // namespace mactune
