// Which engine a point, an instance, a device or a dispatch table belongs to. Text only at the
// edges (specs, flags, database columns, JSON): name_of / parse_enum.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/enum_names.h"
#include "kernels/error.h"

namespace mactune {

enum class Backend : std::uint8_t { cpu, cuda };
template <>
struct EnumNames<Backend> {
  static constexpr std::string_view what = "backend";
  static constexpr EnumName<Backend> names[] = {{Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}};
};

// A backend as a spec's device.backend or a --backend flag asks for it: none is "auto" (cuda
// when a GPU is usable here, else cpu; tuner/measure/measure.h make_backend resolves it).
using BackendRequest = std::optional<Backend>;

inline std::string_view request_name(BackendRequest request) {
  return request ? name_of(*request) : std::string_view("auto");
}

// "cpu", "cuda" or "auto"; InputError "expected cpu, cuda or auto, got 'TEXT'" otherwise.
inline BackendRequest parse_backend_request(std::string_view text) {
  if (text == "auto") return std::nullopt;
  for (const auto& n : EnumNames<Backend>::names)
    if (n.name == text) return n.value;
  input_error("expected ", enum_choices<Backend>(", "), " or auto, got '", text, "'");
}

}  // namespace mactune
