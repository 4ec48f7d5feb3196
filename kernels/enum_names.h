// Names of enum values, written once next to each enum, and the two functions every text form
// of an enum goes through:
//
//   template <> struct EnumNames<PickRule> {
//     static constexpr std::string_view what = "pick rule";
//     static constexpr EnumName<PickRule> names[] = {
//         {PickRule::nearest, "nearest"}, {PickRule::newest, "newest"}, ...};
//   };
//   name_of(PickRule::newest)          -> "newest"
//   parse_enum<PickRule>("newest")     -> PickRule::newest
//   parse_enum<PickRule>("x")          -> InputError "unknown pick rule 'x' (expected nearest,
//                                         newest or normalized)"
//
// The first name listed for a value is its canonical spelling; later entries with the same
// value are accepted aliases (dtype "fp32", coherence "head").
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "kernels/error.h"

namespace mactune {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// Specialized next to each enum with `what` (for messages) and `names` (canonical first).
template <class E>
struct EnumNames;

template <class E>
concept NamedEnum = requires {
  EnumNames<E>::what;
  EnumNames<E>::names;
};

// The canonical name of a value ("?" for a value the table does not list).
template <NamedEnum E>
constexpr std::string_view name_of(E value) {
  for (const EnumName<E>& n : EnumNames<E>::names)
    if (n.value == value) return n.name;
  return "?";
}

// "a, b or c": the canonical names, for messages and help texts.
template <NamedEnum E>
std::string enum_choices(std::string_view last_joint = " or ") {
  std::string out;
  const auto& names = EnumNames<E>::names;
  std::size_t count = 0, seen = 0;
  for (const EnumName<E>& n : names) count += name_of(n.value) == n.name;
  for (const EnumName<E>& n : names) {
    if (name_of(n.value) != n.name) continue;  // an alias
    if (seen > 0) out += seen + 1 == count ? last_joint : std::string_view(", ");
    out += n.name;
    ++seen;
  }
  return out;
}

// Streams a value as its canonical name (messages, keys built with <<).
template <NamedEnum E>
std::ostream& operator<<(std::ostream& o, E value) {
  return o << name_of(value);
}

// The value named `text` (canonical name or alias); InputError naming what was expected.
template <NamedEnum E>
E parse_enum(std::string_view text) {
  for (const EnumName<E>& n : EnumNames<E>::names)
    if (n.name == text) return n.value;
  input_error("unknown ", EnumNames<E>::what, " '", text, "' (expected ", enum_choices<E>(), ")");
}

}  // namespace mactune
