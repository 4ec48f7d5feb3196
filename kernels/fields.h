// Config structs described once: a table of fields (name, member, type, range, help) next to
// each struct, from which every other form of a setting is derived - spec axes, CLI flags, the
// database's text and columns, dispatch-table params - so a value keeps its type on the way
// and a new field is one line.
//
//   template <> struct FieldTable<MacParams> {
//     static const std::vector<Field<MacParams>>& fields() {
//       static const std::vector<Field<MacParams>> t = {
//           field<&MacParams::ring_capacity>("K", "ring_capacity", "ring entries per head")
//               .range(1, 1 << 20),
//           ...};
//       return t;
//     }
//   };
//
// The default of a field is the struct's own member initializer (written nowhere else).
// Names: `name` is the one spelling users see (spec key, `--name` flag with '_' as '-',
// "name=value" text, dispatch-table param); `member` is the C++ member and the database column.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "kernels/enum_names.h"
#include "kernels/error.h"

namespace mactune {

// One typed setting value: a launch parameter, a MAC setting, a spec value.
using Scalar = std::variant<std::int64_t, double, bool, std::string>;
// Named values (dispatch-table params; a struct's fields by name).
using Params = std::map<std::string, Scalar, std::less<>>;

enum class FieldType : std::uint8_t {
  integer,
  real,
  boolean,
  choice,    // one of a list of names (an enum, or a string member with fixed spellings)
  text,      // free text with a codec of its own (a lag distribution)
  instance,  // a canonical instance name; "auto" (empty in the struct) lets the engine pick
};
template <>
struct EnumNames<FieldType> {
  static constexpr std::string_view what = "field type";
  static constexpr EnumName<FieldType> names[] = {
      {FieldType::integer, "integer"}, {FieldType::real, "real"},
      {FieldType::boolean, "boolean"}, {FieldType::choice, "choice"},
      {FieldType::text, "text"},       {FieldType::instance, "instance"}};
};

// What a field is to whoever runs a session with it.
enum class FieldRole : std::uint8_t {
  param,    // travels by name: a launch parameter or a MAC setting
  selects,  // picks the compiled instance, so it is spelt in the canonical instance name
};

// Text forms of member types that are not numbers, booleans, enums or strings. Specialize
// with `static std::string text(const T&)` and `static T parse(std::string_view)`.
template <class T>
struct FieldCodec;

// Shortest text that reads back as the same double ("0.45", "1e-06", "1").
inline std::string format_real(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A number as written in specs and on command lines: decimal or exponent, optionally with a
// binary suffix K (x 1024) or M (x 1024^2). nullopt when it is not one.
inline std::optional<double> parse_real(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double mult = 1;
  if (s.back() == 'K' || s.back() == 'k') {
    mult = 1024;
    s.remove_suffix(1);
  } else if (s.back() == 'M' || s.back() == 'm') {
    mult = 1024.0 * 1024.0;
    s.remove_suffix(1);
  }
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  if (v == 0) return 0.0;  // -0 is 0: one value, one text ("0"), never two points
  if (!std::isfinite(v * mult)) return std::nullopt;  // 1e308K
  return v * mult;
}

// The number a value holds (an integer or a real), or nullopt.
inline std::optional<double> number_of(const Scalar& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

// The text of a value: integers in decimal, reals as format_real, true/false, strings as
// they are.
inline std::string scalar_text(const Scalar& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return format_real(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

// Which check of a field a value failed: its type (not a number, not an integer, not a
// string, not a boolean, a malformed text), its range (a number outside the bounds), or its
// choices (a name not among them).
enum class FieldCheck : std::uint8_t { type, range, choice };

// A value a field refuses (Field::parse, Field::check): an InputError that also says which
// check failed, so that a caller can word a range failure its own way (the spec reader says
// the range, as an axis's bounds do) without parsing the text again.
class FieldError : public InputError {
 public:
  FieldError(FieldCheck failed_check, const std::string& message)
      : InputError(message), failed(failed_check) {}
  FieldCheck failed;
};

template <class... Parts>
[[noreturn]] void field_error(FieldCheck failed, const Parts&... parts) {
  throw FieldError(failed, detail::concat(parts...));
}

// An inclusive or open range of a numeric field.
struct FieldRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;

  bool holds(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
  // "must be in [1, 128]", "must be at least 1", "must be in (0, 1]". `integer`: the bounds of
  // an integer field, written out in decimal ("1000000", where format_real would say "1e+06").
  std::string requirement(bool integer = false) const {
    auto bound = [integer](double x) {
      return integer && std::fabs(x) < 9e15 ? std::to_string(static_cast<std::int64_t>(x))
                                            : format_real(x);
    };
    if (hi == std::numeric_limits<double>::infinity())
      return std::string(lo_open ? "must be above " : "must be at least ") + bound(lo);
    return std::string("must be in ") + (lo_open ? "(" : "[") + bound(lo) + ", " + bound(hi) +
           (hi_open ? ")" : "]");
  }
};

template <class S>
struct Field {
  std::string_view name;    // the one spelling users see
  std::string_view member;  // the C++ member: the database column of the setting
  FieldType type = FieldType::integer;
  FieldRange bounds;                 // integer and real
  std::vector<std::string> choices;  // choice: the allowed canonical names
  std::string_view help;             // one line
  FieldRole role = FieldRole::param;
  // Earlier spellings of `name`, still read everywhere a name is looked up (find_field: specs,
  // "name=value" text, dispatch-table params, flags, Python) and never written.
  std::vector<std::string_view> aliases;
  std::function<Scalar(const S&)> get;
  std::function<void(S&, const Scalar&)> set;              // of a value check() accepted
  std::function<std::string(std::string_view)> canonical;  // text fields: their codec

  // ---- Building a table row.
  Field range(double lo, double hi = std::numeric_limits<double>::infinity()) const {
    Field f = *this;
    f.bounds.lo = lo;
    f.bounds.hi = hi;
    return f;
  }
  Field open_below() const {  // (lo, ...
    Field f = *this;
    f.bounds.lo_open = true;
    return f;
  }
  Field open_above() const {  // ..., hi)
    Field f = *this;
    f.bounds.hi_open = true;
    return f;
  }
  Field only(std::vector<std::string> names) const {  // a choice among fewer names
    Field f = *this;
    f.choices = std::move(names);
    return f;
  }
  Field instance() const {  // a string member naming an instance ("" = auto)
    Field f = *this;
    f.type = FieldType::instance;
    return f;
  }
  Field selects() const {
    Field f = *this;
    f.role = FieldRole::selects;
    return f;
  }
  Field alias(std::string_view old_name) const {  // an earlier spelling, read but not written
    Field f = *this;
    f.aliases.push_back(old_name);
    return f;
  }
  // Whether `n` is this field's name or one of its aliases.
  bool named(std::string_view n) const {
    if (n == name) return true;
    for (std::string_view a : aliases)
      if (n == a) return true;
    return false;
  }

  // ---- Values.
  // The canonical text of a value of this field ("256", "0.45", "true", "bf16", "auto").
  std::string text(const Scalar& v) const {
    if (type == FieldType::instance && std::get<std::string>(v).empty()) return "auto";
    return scalar_text(v);
  }
  std::string text_of(const S& s) const { return text(get(s)); }
  Scalar default_value() const { return get(S{}); }

  // Text (a spec scalar, a flag, a database cell) -> a checked value of the field's type.
  // FieldError says what is wrong with the value and which check failed; callers say where it
  // came from.
  Scalar parse(std::string_view s) const {
    switch (type) {
      case FieldType::integer: {
        const auto x = parse_real(s);
        if (!x) field_error(FieldCheck::type, "expected a number, got '", s, "'");
        if (*x != std::floor(*x))
          field_error(FieldCheck::type, "expected an integer, got '", s, "'");
        // Past 9e15 a double no longer holds every integer: refused in the same words, as a
        // range failure where the bounds refuse it too (1e16 of a field up to 1000000).
        if (std::fabs(*x) > 9e15)
          field_error(bounds.holds(*x) ? FieldCheck::type : FieldCheck::range,
                      "expected an integer, got '", s, "'");
        return check(static_cast<std::int64_t>(*x));
      }
      case FieldType::real: {
        const auto x = parse_real(s);
        if (!x) field_error(FieldCheck::type, "expected a number, got '", s, "'");
        return check(*x);
      }
      case FieldType::boolean:
        if (s == "true" || s == "yes" || s == "on") return true;
        if (s == "false" || s == "no" || s == "off") return false;
        field_error(FieldCheck::type, "expected true or false, got '", s, "'");
      case FieldType::choice:
      case FieldType::text:
        return check(canonical_text(s));
      case FieldType::instance:
        return check(std::string(s == "auto" ? std::string_view() : s));
    }
    return Scalar{};
  }

  // A value from elsewhere (a JSON param, a database column) as this field's type: integers
  // where reals are expected, range and choices checked. FieldError on a mismatch.
  Scalar check(const Scalar& v) const {
    switch (type) {
      case FieldType::integer: {
        const auto* i = std::get_if<std::int64_t>(&v);
        if (!i) field_error(FieldCheck::type, "expected an integer, got ", quoted(v));
        if (!bounds.holds(static_cast<double>(*i)))
          field_error(FieldCheck::range, "value ", *i, " is out of range (", name, " ",
                      bounds.requirement(true), ")");
        return *i;
      }
      case FieldType::real: {
        const std::optional<double> n = number_of(v);
        if (!n) field_error(FieldCheck::type, "expected a number, got ", quoted(v));
        const double x = *n == 0 ? 0.0 : *n;  // -0 (a JSON param, a column) is 0
        if (!std::isfinite(x) || !bounds.holds(x))
          field_error(FieldCheck::range, "value ", format_real(x), " is out of range (", name, " ",
                      bounds.requirement(), ")");
        return x;
      }
      case FieldType::boolean:
        if (!std::holds_alternative<bool>(v))
          field_error(FieldCheck::type, "expected true or false, got ", quoted(v));
        return v;
      case FieldType::choice: {
        const auto* t = std::get_if<std::string>(&v);
        if (!t)
          field_error(FieldCheck::type, "expected one of ", choice_list(), ", got ", quoted(v));
        const std::string c = canonical_text(*t);
        for (const std::string& n : choices)
          if (n == c) return c;
        field_error(FieldCheck::choice, "'", *t, "' is not one of ", choice_list());
      }
      case FieldType::text: {
        const auto* t = std::get_if<std::string>(&v);
        if (!t) field_error(FieldCheck::type, "expected a string, got ", quoted(v));
        return canonical_text(*t);
      }
      case FieldType::instance: {
        const auto* t = std::get_if<std::string>(&v);
        if (!t) field_error(FieldCheck::type, "expected an instance name, got ", quoted(v));
        const std::string n = *t == "auto" ? "" : *t;
        if (n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
          field_error(FieldCheck::type, "'", *t,
                      "' is not an instance name (lower case, digits, '_') or auto");
        return n;
      }
    }
    return v;
  }

  // Parses and stores (InputError "NAME: why" naming the field).
  void assign(S& s, std::string_view text) const {
    try {
      set(s, parse(text));
    } catch (const InputError& e) {
      input_error(name, ": ", e.what());
    }
  }

  // "a, b or c" of a choice field.
  std::string choice_list() const {
    std::string out;
    for (std::size_t i = 0; i < choices.size(); ++i)
      out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    return out;
  }

 private:
  // The codec's spelling of `t` (t itself where there is no codec). A text the codec refuses
  // (an enum's unknown name, a malformed lag distribution) is a FieldError too: of the
  // choices for a choice field, of the type for a text field.
  std::string canonical_text(std::string_view t) const {
    if (!canonical) return std::string(t);
    try {
      return canonical(t);
    } catch (const FieldError&) {
      throw;
    } catch (const InputError& e) {
      field_error(type == FieldType::choice ? FieldCheck::choice : FieldCheck::type, e.what());
    }
  }
  static std::string quoted(const Scalar& v) {
    return std::holds_alternative<std::string>(v) ? "'" + std::get<std::string>(v) + "'"
                                                  : scalar_text(v);
  }
};

namespace detail {

template <class M>
struct member_of;
template <class S, class T>
struct member_of<T S::*> {
  using owner = S;
  using type = T;
};

// std::optional of a named enum: a choice field whose "auto" is none (the caller picks).
template <class T>
struct optional_enum : std::false_type {};
template <NamedEnum E>
struct optional_enum<std::optional<E>> : std::true_type {
  using type = E;
};

template <class T>
concept HasCodec = requires(const T& t, std::string_view s) {
  { FieldCodec<T>::text(t) } -> std::convertible_to<std::string>;
  { FieldCodec<T>::parse(s) } -> std::same_as<T>;
};

template <class T>
Scalar to_scalar(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<std::int64_t>(v);
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<double>(v);
  else if constexpr (NamedEnum<T>)
    return std::string(name_of(v));
  else if constexpr (optional_enum<T>::value)
    return v ? std::string(name_of(*v)) : std::string("auto");
  else if constexpr (std::is_same_v<T, std::string>)
    return v;
  else
    return FieldCodec<T>::text(v);
}

template <class T>
T from_scalar(const Scalar& v) {
  if constexpr (std::is_same_v<T, bool>)
    return std::get<bool>(v);
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::get<std::int64_t>(v));
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(std::get<double>(v));
  else if constexpr (NamedEnum<T>)
    return parse_enum<T>(std::get<std::string>(v));
  else if constexpr (optional_enum<T>::value) {
    const std::string& s = std::get<std::string>(v);
    return s == "auto" ? T() : T(parse_enum<typename optional_enum<T>::type>(s));
  } else if constexpr (std::is_same_v<T, std::string>)
    return std::get<std::string>(v);
  else
    return FieldCodec<T>::parse(std::get<std::string>(v));
}

}  // namespace detail

// A table row for member `Member` (&Struct::member): its type follows the member's type
// (integer, real, boolean, an enum with EnumNames -> choice, std::optional of such an enum ->
// a choice with "auto" for none, std::string -> free text or, with .only() / .instance(), a
// choice or an instance, a type with a FieldCodec -> text).
template <auto Member>
auto field(std::string_view name, std::string_view member, std::string_view help) {
  using S = typename detail::member_of<decltype(Member)>::owner;
  using T = typename detail::member_of<decltype(Member)>::type;
  Field<S> f;
  f.name = name;
  f.member = member;
  f.help = help;
  if constexpr (std::is_same_v<T, bool>) {
    f.type = FieldType::boolean;
  } else if constexpr (std::is_integral_v<T>) {
    f.type = FieldType::integer;
    f.bounds = {double(std::numeric_limits<T>::min()), double(std::numeric_limits<T>::max())};
  } else if constexpr (std::is_floating_point_v<T>) {
    f.type = FieldType::real;
  } else if constexpr (NamedEnum<T>) {
    f.type = FieldType::choice;
    for (const EnumName<T>& n : EnumNames<T>::names)
      if (name_of(n.value) == n.name) f.choices.emplace_back(n.name);
    f.canonical = [](std::string_view s) { return std::string(name_of(parse_enum<T>(s))); };
  } else if constexpr (detail::optional_enum<T>::value) {
    using E = typename detail::optional_enum<T>::type;
    f.type = FieldType::choice;
    f.choices.emplace_back("auto");
    for (const EnumName<E>& n : EnumNames<E>::names)
      if (name_of(n.value) == n.name) f.choices.emplace_back(n.name);
    f.canonical = [](std::string_view s) {
      if (s == "auto") return std::string(s);
      try {
        return std::string(name_of(parse_enum<E>(s)));
      } catch (const InputError&) {
        input_error("expected auto, ", enum_choices<E>(), ", got '", s, "'");
      }
    };
  } else if constexpr (std::is_same_v<T, std::string>) {
    f.type = FieldType::choice;  // .only({...}) lists the names; .instance() makes it a name
  } else {
    static_assert(detail::HasCodec<T>, "a field's member type needs a FieldCodec");
    f.type = FieldType::text;
    f.canonical = [](std::string_view s) { return FieldCodec<T>::text(FieldCodec<T>::parse(s)); };
  }
  f.get = [](const S& s) { return detail::to_scalar(s.*Member); };
  f.set = [](S& s, const Scalar& v) { s.*Member = detail::from_scalar<T>(v); };
  return f;
}

// Specialized next to each described struct: static const std::vector<Field<S>>& fields().
template <class S>
struct FieldTable;

template <class S>
concept Described = requires {
  { FieldTable<S>::fields() } -> std::same_as<const std::vector<Field<S>>&>;
};

template <Described S>
const std::vector<Field<S>>& fields_of() {
  return FieldTable<S>::fields();
}

// The field named `name`, or one of whose aliases it is (nullptr if none).
template <Described S>
const Field<S>* find_field(std::string_view name) {
  for (const Field<S>& f : fields_of<S>())
    if (f.name == name) return &f;
  for (const Field<S>& f : fields_of<S>())
    if (f.named(name)) return &f;
  return nullptr;
}

// The fields of an inner struct as fields of the struct that holds it (a tuner point's MAC
// settings, say): the same names, reached through `Inner Outer::*`.
template <class Outer, class Inner>
std::vector<Field<Outer>> lift(const std::vector<Field<Inner>>& inner, Inner Outer::*part) {
  std::vector<Field<Outer>> out;
  for (const Field<Inner>& f : inner)
    out.push_back({.name = f.name,
                   .member = f.member,
                   .type = f.type,
                   .bounds = f.bounds,
                   .choices = f.choices,
                   .help = f.help,
                   .role = f.role,
                   .aliases = f.aliases,
                   .get = [get = f.get, part](const Outer& o) { return get(o.*part); },
                   .set = [set = f.set, part](Outer& o, const Scalar& v) { set(o.*part, v); },
                   .canonical = f.canonical});
  return out;
}

// ---- Whole structs.

// Every field by name (roles as listed; all of them by default).
template <Described S>
Params to_params(const S& s, std::optional<FieldRole> role = std::nullopt) {
  Params p;
  for (const Field<S>& f : fields_of<S>())
    if (!role || f.role == *role) p.emplace(std::string(f.name), f.get(s));
  return p;
}

// Sets the fields `params` names (checked against each field); returns the names it does not
// know, in order, for the caller to hand on or refuse.
template <Described S>
std::vector<std::string> assign_params(S& s, const Params& params) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : params) {
    const Field<S>* f = find_field<S>(key);
    if (!f) {
      unknown.push_back(key);
      continue;
    }
    try {
      f->set(s, f->check(value));
    } catch (const InputError& e) {
      input_error(key, ": ", e.what());
    }
  }
  return unknown;
}

// "name=value,name=value" over the fields of `role`, in table order: the canonical text the
// database stores (launch params of a point, MAC settings).
template <Described S>
std::string fields_text(const S& s, std::optional<FieldRole> role = std::nullopt) {
  std::string out;
  for (const Field<S>& f : fields_of<S>()) {
    if (role && f.role != *role) continue;
    if (!out.empty()) out += ',';
    out.append(f.name).append("=").append(f.text_of(s));
  }
  return out;
}

// Reads fields_text() back: every "name=value" must name a field of S (fields it omits keep
// their values in `s`). InputError naming the key otherwise.
template <Described S>
void parse_fields_text(S& s, std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    // The next comma outside parentheses: a value may hold some ("uniform(1,64)").
    std::size_t end = at;
    for (int depth = 0; end < text.size() && (depth > 0 || text[end] != ','); ++end)
      depth += text[end] == '(' ? 1 : text[end] == ')' ? -1 : 0;
    const std::string_view kv = text.substr(at, end - at);
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) input_error("'", kv, "' is not name=value");
    const Field<S>* f = find_field<S>(kv.substr(0, eq));
    if (!f) input_error("unknown setting '", kv.substr(0, eq), "'");
    f->assign(s, kv.substr(eq + 1));
    at = end + 1;
  }
}

// A setting that is not valid: the field's table name, and the sentence that says why
// ("NAME = VALUE must be ..."), for an error that points at where the field was set.
struct FieldProblem {
  std::string field;
  std::string why;
};

// The first numeric field of `s` out of its range or choice not allowed, if any.
template <Described S>
std::optional<FieldProblem> range_problem(const S& s) {
  for (const Field<S>& f : fields_of<S>()) {
    const Scalar v = f.get(s);
    try {
      f.check(v);
    } catch (const InputError& e) {
      const std::string at = std::string(f.name) + " = ";
      if (f.type == FieldType::integer || f.type == FieldType::real)
        return FieldProblem{
            std::string(f.name),
            at + f.text(v) + " " + f.bounds.requirement(f.type == FieldType::integer)};
      if (f.type == FieldType::choice)
        return FieldProblem{std::string(f.name),
                            at + "'" + f.text(v) + "' is not one of " + f.choice_list()};
      return FieldProblem{std::string(f.name), at + "'" + f.text(v) + "': " + e.what()};
    }
  }
  return std::nullopt;
}

// "" when every field of `s` is in its range, else range_problem()'s sentence.
template <Described S>
std::string range_error(const S& s) {
  const std::optional<FieldProblem> p = range_problem(s);
  return p ? p->why : std::string();
}

}  // namespace mactune
