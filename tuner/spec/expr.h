// Constraint expressions between sweep axes, e.g. `r < context`, `K >= 2*r`,
// `kv_heads <= q_heads && q_heads % kv_heads == 0`.
//
// Grammar (C-like precedence, all arithmetic in double, comparisons give 0 or 1):
//   expr   := or
//   or     := and  (('||' | 'or') and)*
//   and    := not  (('&&' | 'and') not)*
//   not    := ('!' | 'not') not | cmp
//   cmp    := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
//   sum    := prod (('+' | '-') prod)*
//   prod   := unary (('*' | '/' | '%') unary)*
//   unary  := '-' unary | atom
//   atom   := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
// Functions: min, max, log2, pow2 (2^x). Numbers take binary suffixes K and M (32K = 32768).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mactune::tuner {

class Expr {
 public:
  // Parses `text`; names must be in `known`. Throws InputError with a one-line message
  // ("unknown name 'k' (known: ...)" / "expected ')' at column 7").
  static Expr parse(std::string_view text, const std::set<std::string>& known);

  // Evaluates with `lookup(name)` giving each name's value (nullopt: the name does not apply
  // to this point, and the whole expression then counts as satisfied).
  using Lookup = std::function<std::optional<double>(const std::string&)>;
  std::optional<double> eval(const Lookup& lookup) const;
  // eval() != 0, or true when a name does not apply.
  bool holds(const Lookup& lookup) const;

  const std::string& text() const { return text_; }
  const std::vector<std::string>& names() const { return names_; }  // referenced, sorted, unique

  struct Node;

 private:
  std::string text_;
  std::vector<std::string> names_;
  std::shared_ptr<const Node> root_;
};

// The canonical text of a number: integers without a point or exponent ("262144"), others with
// up to 10 significant digits ("0.95").
std::string format_number(double v);

}  // namespace mactune::tuner
