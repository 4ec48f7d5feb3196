#include "tuner/spec/expr.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/one_line.h"

namespace mactune::tuner {

enum class Op {
  num,
  name,
  neg,
  lnot,
  add,
  sub,
  mul,
  div,
  mod,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  land,
  lor,
  fmin,
  fmax,
  flog2,
  fpow2
};

struct Expr::Node {
  Op op = Op::num;
  double value = 0;
  std::string name;
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;

std::optional<double> eval_node(const Expr::Node& n, const Expr::Lookup& lookup);

NodeP make(Op op, std::vector<NodeP> args = {}) {
  auto n = std::make_shared<Expr::Node>();
  n->op = op;
  n->args = std::move(args);
  return n;
}

class Parser {
 public:
  Parser(std::string_view text, const std::set<std::string>& known) : s_(text), known_(known) {}

  // Parentheses, '!'/'not' and unary '-' nest by recursion: deeper than this is refused (a
  // constraint is a line of a spec; fuzz_expr overflowed the stack with 900 '(').
  static constexpr int kMaxNesting = 64;

  NodeP parse_all() {
    NodeP n = parse_or();
    skip_space();
    if (pos_ != s_.size()) fail("unexpected '", detail::char_at(s_, pos_), "'");
    return n;
  }
  std::set<std::string> used;

 private:
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    input_error(detail::one_line(detail::concat(parts...)), " at column ", pos_ + 1, " of '",
                detail::one_line(s_), "'");
  }
  // One level of nesting while alive.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail("expression nests deeper than ", kMaxNesting, " levels");
    }
    ~Nest() { --p.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(std::string_view tok) {
    skip_space();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    // Word operators must not be a prefix of a longer name.
    if (std::isalpha(static_cast<unsigned char>(tok[0])) && pos_ + tok.size() < s_.size()) {
      const char next = s_[pos_ + tok.size()];
      if (std::isalnum(static_cast<unsigned char>(next)) || next == '_') return false;
    }
    pos_ += tok.size();
    return true;
  }

  NodeP parse_or() {
    NodeP l = parse_and();
    while (eat("||") || eat("or")) l = make(Op::lor, {l, parse_and()});
    return l;
  }
  NodeP parse_and() {
    NodeP l = parse_not();
    while (eat("&&") || eat("and")) l = make(Op::land, {l, parse_not()});
    return l;
  }
  NodeP parse_not() {
    skip_space();
    if ((s_.substr(pos_, 2) != "!=" && eat("!")) || eat("not")) {
      const Nest nest(*this);
      return make(Op::lnot, {parse_not()});
    }
    return parse_cmp();
  }
  NodeP parse_cmp() {
    NodeP l = parse_sum();
    static constexpr std::pair<std::string_view, Op> ops[] = {{"<=", Op::le}, {">=", Op::ge},
                                                              {"==", Op::eq}, {"!=", Op::ne},
                                                              {"<", Op::lt},  {">", Op::gt}};
    for (const auto& [tok, op] : ops)
      if (eat(tok)) return make(op, {l, parse_sum()});
    return l;
  }
  NodeP parse_sum() {
    NodeP l = parse_prod();
    for (;;) {
      if (eat("+"))
        l = make(Op::add, {l, parse_prod()});
      else if (eat("-"))
        l = make(Op::sub, {l, parse_prod()});
      else
        return l;
    }
  }
  NodeP parse_prod() {
    NodeP l = parse_unary();
    for (;;) {
      if (eat("*"))
        l = make(Op::mul, {l, parse_unary()});
      else if (eat("/"))
        l = make(Op::div, {l, divisor("/")});
      else if (eat("%"))
        l = make(Op::mod, {l, divisor("%")});
      else
        return l;
    }
  }
  // The right operand of '/' or '%': one that is zero whatever the axes are ("K / 0",
  // "K % (2 - 2)") is refused here, at the operator's column, the same way for both.
  NodeP divisor(std::string_view op) {
    const std::size_t op_pos = pos_ - 1;
    NodeP r = parse_unary();
    const auto v = eval_node(*r, [](const std::string&) { return std::nullopt; });
    if (v && *v == 0) {
      pos_ = op_pos;
      fail("'", op, "' by zero");
    }
    return r;
  }
  NodeP parse_unary() {
    if (eat("-")) {
      const Nest nest(*this);
      return make(Op::neg, {parse_unary()});
    }
    return parse_atom();
  }
  NodeP parse_atom() {
    skip_space();
    if (pos_ >= s_.size()) fail("expression ends early");
    if (eat("(")) {
      const Nest nest(*this);
      NodeP n = parse_or();
      if (!eat(")")) fail("expected ')'");
      return n;
    }
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::size_t end = pos_;
      while (end < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '.'))
        ++end;
      const auto v = parse_real(s_.substr(pos_, end - pos_));
      if (!v) fail("bad number '", s_.substr(pos_, end - pos_), "'");
      pos_ = end;
      auto n = std::make_shared<Expr::Node>();
      n->value = *v;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      std::size_t end = pos_;
      while (end < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
        ++end;
      const std::string word(s_.substr(pos_, end - pos_));
      pos_ = end;
      if (eat("(")) return parse_call(word);
      if (!known_.count(word)) {
        std::ostringstream k;
        for (const auto& n : known_) k << (k.tellp() ? ", " : "") << n;
        pos_ = start;
        fail("unknown name '", word, "' (known: ", k.str(), ")");
      }
      used.insert(word);
      auto n = std::make_shared<Expr::Node>();
      n->op = Op::name;
      n->name = word;
      return n;
    }
    fail("unexpected '", detail::char_at(s_, pos_), "'");
  }
  NodeP parse_call(const std::string& fn) {
    std::vector<NodeP> args{parse_or()};
    while (eat(",")) args.push_back(parse_or());
    if (!eat(")")) fail("expected ')' after the arguments of ", fn);
    const std::size_t n = args.size();
    if ((fn == "min" || fn == "max") && n == 2)
      return make(fn == "min" ? Op::fmin : Op::fmax, args);
    if ((fn == "log2" || fn == "pow2") && n == 1)
      return make(fn == "log2" ? Op::flog2 : Op::fpow2, args);
    fail("unknown function ", fn, "/", n, " (known: min/2, max/2, log2/1, pow2/1)");
  }

  std::string_view s_;
  const std::set<std::string>& known_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // nesting now (Nest)
};

std::optional<double> eval_node(const Expr::Node& n, const Expr::Lookup& lookup) {
  if (n.op == Op::num) return n.value;
  if (n.op == Op::name) return lookup(n.name);
  std::vector<double> a;
  for (const auto& arg : n.args) {
    const auto v = eval_node(*arg, lookup);
    if (!v) return std::nullopt;
    a.push_back(*v);
  }
  switch (n.op) {
    case Op::neg:
      return -a[0];
    case Op::lnot:
      return a[0] == 0 ? 1.0 : 0.0;
    case Op::add:
      return a[0] + a[1];
    case Op::sub:
      return a[0] - a[1];
    case Op::mul:
      return a[0] * a[1];
    // A divisor that is zero for some point (K % (r - 64)) makes the expression false for it,
    // for '/' as for '%' (x / 0 would be inf and pass every comparison with a number).
    case Op::div:
      return a[1] == 0 ? std::nan("") : a[0] / a[1];
    case Op::mod:
      return a[1] == 0 ? std::nan("") : std::fmod(a[0], a[1]);
    case Op::lt:
      return a[0] < a[1] ? 1.0 : 0.0;
    case Op::le:
      return a[0] <= a[1] ? 1.0 : 0.0;
    case Op::gt:
      return a[0] > a[1] ? 1.0 : 0.0;
    case Op::ge:
      return a[0] >= a[1] ? 1.0 : 0.0;
    case Op::eq:
      return a[0] == a[1] ? 1.0 : 0.0;
    case Op::ne:
      return a[0] != a[1] ? 1.0 : 0.0;
    case Op::land:
      return (a[0] != 0 && a[1] != 0) ? 1.0 : 0.0;
    case Op::lor:
      return (a[0] != 0 || a[1] != 0) ? 1.0 : 0.0;
    case Op::fmin:
      return std::min(a[0], a[1]);
    case Op::fmax:
      return std::max(a[0], a[1]);
    case Op::flog2:
      return std::log2(a[0]);
    case Op::fpow2:
      return std::exp2(a[0]);
    case Op::num:
    case Op::name:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::string format_number(double v) {
  std::ostringstream t;
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    t << static_cast<long long>(v);
  else
    t << std::setprecision(10) << v;
  return t.str();
}

Expr Expr::parse(std::string_view text, const std::set<std::string>& known) {
  Parser p(text, known);
  Expr e;
  e.text_ = std::string(text);
  e.root_ = p.parse_all();
  e.names_.assign(p.used.begin(), p.used.end());
  return e;
}

std::optional<double> Expr::eval(const Lookup& lookup) const {
  return eval_node(*root_, lookup);
}

bool Expr::holds(const Lookup& lookup) const {
  const auto v = eval(lookup);
  return !v || (!std::isnan(*v) && *v != 0.0);
}

}  // namespace mactune::tuner
