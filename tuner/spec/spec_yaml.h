// Reading a spec's YAML text (tuner/spec/spec.cpp parses the tree into a Spec).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "kernels/error.h"
#include "kernels/one_line.h"

namespace mactune::tuner {

// InputError with the pieces as one line (a value the message quotes may hold a newline).
template <class... Parts>
[[noreturn]] void spec_error(const Parts&... parts) {
  throw InputError(detail::one_line(detail::concat(parts...)));
}

// YAML::Load of a spec's text. Refuses nesting deeper than a spec needs (64 levels) before
// yaml-cpp recurses into it, and names a key over yaml-cpp's 1024 characters; every error is
// an InputError of one line, "FILE:LINE: syntax: ...".
YAML::Node load_spec_yaml(std::string_view text, const std::string& file);

}  // namespace mactune::tuner
