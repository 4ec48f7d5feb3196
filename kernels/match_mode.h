// How an engine's match reads the ring (DESIGN.md section 1; docs/design.md section 7): the
// same decisions either way, a launch parameter of both engines (their `match_mode` rows).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/enum_names.h"

namespace mactune {

enum class MatchMode : std::uint8_t {
  scan,    // every live ring row's d2
  pruned,  // each row bounded from its 4-bit sketch first; read in full where the bound cannot
           // rule it out (pick `normalized` always scans)
};
template <>
struct EnumNames<MatchMode> {
  static constexpr std::string_view what = "match mode";
  static constexpr EnumName<MatchMode> names[] = {{MatchMode::scan, "scan"},
                                                  {MatchMode::pruned, "pruned"}};
};

}  // namespace mactune
