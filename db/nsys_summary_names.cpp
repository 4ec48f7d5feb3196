// Short kernel names (db/nsys_summary.h short_kernel_name).
#include <string>
#include <string_view>

#include "db/nsys_summary.h"

namespace mactune::db {
namespace {

bool opens(char c) {
  return c == '(' || c == '<' || c == '[' || c == '{';
}
bool closes(char c) {
  return c == ')' || c == '>' || c == ']' || c == '}';
}

// The index of the bracket that opens the group closing at `end` (s[end] closes), scanning
// backwards over nested groups; npos when unbalanced.
std::size_t group_start(std::string_view s, std::size_t end) {
  int depth = 0;
  for (std::size_t i = end + 1; i-- > 0;) {
    if (closes(s[i])) ++depth;
    if (opens(s[i]) && --depth == 0) return i;
  }
  return std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

// `s` without the qualifiers that may follow a member function's parameter list
// ("... const", "... &&").
std::string_view drop_qualifiers(std::string_view s) {
  for (bool again = true; again;) {
    again = false;
    s = trim(s);
    for (std::string_view q : {"const", "volatile", "noexcept", "&&", "&"}) {
      if (s.size() <= q.size() || !s.ends_with(q)) continue;
      const char before = s[s.size() - q.size() - 1];
      if (q.front() != '&' && before != ' ' && before != ')') continue;  // part of a name
      s.remove_suffix(q.size());
      again = true;
      break;
    }
  }
  return s;
}

// The position after the last "::" or space outside brackets in `s` (0 when none).
std::size_t last_component(std::string_view s) {
  int depth = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (opens(s[i])) ++depth;
    if (closes(s[i])) --depth;
    if (depth != 0) continue;
    if (s[i] == ' ') at = i + 1;
    if (s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') at = i + 2;
  }
  return at;
}

bool balanced(std::string_view s) {
  int depth = 0;
  for (char c : s) {
    depth += opens(c) ? 1 : closes(c) ? -1 : 0;
    if (depth < 0) return false;
  }
  return depth == 0;
}

}  // namespace

std::string short_kernel_name(std::string_view demangled) {
  if (!balanced(demangled)) return std::string(demangled);
  std::string_view s = drop_qualifiers(demangled);
  // The parameter list, then the template arguments, each a bracketed group at the end.
  for (char close : {')', '>'}) {
    if (s.empty() || s.back() != close) continue;
    const std::size_t open = group_start(s, s.size() - 1);
    if (open == std::string_view::npos || open == 0) return std::string(demangled);
    s = trim(s.substr(0, open));
  }
  // The return type and the qualifying scopes: whatever precedes the last component.
  const std::string_view name = s.substr(last_component(s));
  return name.empty() ? std::string(demangled) : std::string(name);
}

}  // namespace mactune::db
