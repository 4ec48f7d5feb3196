// Where a bucket's break-even stands, as the decisions find it (tuner/decide/decide.h
// BreakEven), the database stores it (break_even.status) and the emitted table's notes and the
// report spell it. Plain C++ (no SQLite): the tuner's decisions include it.
#pragma once

#include <string_view>

#include "kernels/enum_names.h"

namespace mactune::db {

enum class BreakEvenStatus {
  ok,         // a hit rate from which MAC is clearly faster at every measured rate above it
  ambiguous,  // MAC never clearly faster, but some rate too close to call (or none measured)
  never,      // MAC clearly slower or tied nowhere: it never pays off on the measured rates
};

}  // namespace mactune::db
template <>
struct mactune::EnumNames<mactune::db::BreakEvenStatus> {
  using S = db::BreakEvenStatus;
  static constexpr std::string_view what = "break-even status";
  // "found": the database's spelling of `ok` before schema v8.
  static constexpr EnumName<S> names[] = {
      {S::ok, "ok"}, {S::ambiguous, "ambiguous"}, {S::never, "never"}, {S::ok, "found"}};
};
