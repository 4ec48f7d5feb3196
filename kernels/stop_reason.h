// Why sampling a measured side stopped: what the tuner's stopping rule answers
// (tuner/spec/stats.h Convergence) and the database keeps with each row (db/store.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/enum_names.h"

namespace mactune {

enum class StopReason : std::uint8_t { noise, stable, max_samples, time_cap, interrupted };
template <>
struct EnumNames<StopReason> {
  using S = StopReason;
  static constexpr std::string_view what = "stop reason";
  static constexpr EnumName<S> names[] = {{S::noise, "noise"},
                                          {S::stable, "stable"},
                                          {S::max_samples, "max_samples"},
                                          {S::time_cap, "time_cap"},
                                          {S::interrupted, "interrupted"}};
};

}  // namespace mactune
