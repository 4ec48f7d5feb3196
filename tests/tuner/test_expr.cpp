#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/fields.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {
namespace {

const std::set<std::string> kNames = {"K", "r", "context", "batch", "q_heads", "kv_heads"};

double eval(const std::string& text, const std::map<std::string, double>& vars) {
  const Expr e = Expr::parse(text, kNames);
  const auto v = e.eval([&](const std::string& n) -> std::optional<double> {
    const auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<double>(it->second);
  });
  EXPECT_TRUE(v.has_value()) << text;
  return v.value_or(-12345);
}

TEST(TunerExpr, ArithmeticAndPrecedence) {
  EXPECT_EQ(eval("1 + 2 * 3", {}), 7);
  EXPECT_EQ(eval("(1 + 2) * 3", {}), 9);
  EXPECT_EQ(eval("-2 * -3", {}), 6);
  EXPECT_EQ(eval("7 % 4 + 10 / 4", {}), 5.5);
  EXPECT_EQ(eval("32K", {}), 32768);
  EXPECT_EQ(eval("1M / 2", {}), 524288);
  EXPECT_EQ(eval("max(3, 5) - min(3, 5) + log2(8) + pow2(2)", {}), 9);
}

TEST(TunerExpr, ComparisonsAndLogic) {
  const std::map<std::string, double> v = {{"K", 512}, {"r", 256}, {"context", 4096}};
  EXPECT_EQ(eval("K >= 2*r", v), 1);
  EXPECT_EQ(eval("K > 2*r", v), 0);
  EXPECT_EQ(eval("r < context && K <= context", v), 1);
  EXPECT_EQ(eval("r > context || K == 512", v), 1);
  EXPECT_EQ(eval("not (K != 512) and !(r == 1)", v), 1);
  EXPECT_EQ(eval("K/r == 2", v), 1);
}

TEST(TunerExpr, UnknownNameIsAnErrorNamingIt) {
  try {
    Expr::parse("k >= 2*r", kNames);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown name 'k'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("column 1"), std::string::npos) << e.what();
  }
}

TEST(TunerExpr, SyntaxErrorsNameTheColumn) {
  EXPECT_THROW(Expr::parse("K >= (2*r", kNames), InputError);
  EXPECT_THROW(Expr::parse("K >= ", kNames), InputError);
  EXPECT_THROW(Expr::parse("K >= 2r", kNames), InputError);
  EXPECT_THROW(Expr::parse("K # r", kNames), InputError);
  EXPECT_THROW(Expr::parse("foo(K)", kNames), InputError);
}

// Nesting is refused past 64 levels with one line, not a stack overflow (fuzz_expr found one
// with 900 '('); 64 levels of each kind still parse.
TEST(TunerExpr, DeepNestingIsAnErrorNotAStackOverflow) {
  auto nested = [](const std::string& open, const std::string& close, int n) {
    std::string t;
    for (int i = 0; i < n; ++i) t += open;
    t += "K";
    for (int i = 0; i < n; ++i) t += close;
    return t + " > 0";
  };
  EXPECT_DOUBLE_EQ(eval(nested("(", ")", 64), {{"K", 2}}), 1);
  EXPECT_DOUBLE_EQ(eval(nested("-", "", 64), {{"K", 2}}), 1);
  EXPECT_DOUBLE_EQ(eval("!" + nested("!", "", 63), {{"K", 2}}), 1);
  for (const auto& [open, close] :
       std::vector<std::pair<std::string, std::string>>{{"(", ")"}, {"-", ""}, {"!", ""}}) {
    try {
      Expr::parse(nested(open, close, 100000), kNames);
      ADD_FAILURE() << "no error for 100000 levels of '" << open << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("nests deeper than 64 levels"), std::string::npos)
          << e.what();
    }
  }
}

TEST(TunerExpr, ConstantZeroDivisorIsRefusedTheSameWayForDivisionAndModulo) {
  for (const std::string op : {"/", "%"})
    for (const std::string divisor : {"0", "(2 - 2)", "0 * K", "-0"}) {
      const std::string text = "K " + op + " " + divisor + " > 1";
      try {
        Expr::parse(text, kNames);
        ADD_FAILURE() << "accepted " << text;
      } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()), "'" + op + "' by zero at column 3 of '" + text + "'");
      }
    }
}

TEST(TunerExpr, ZeroDivisorOfSomePointMakesTheConstraintFalseForBoth) {
  const std::map<std::string, double> v = {{"K", 512}, {"r", 64}};
  for (const std::string text : {"K / (r - 64) > 1", "K % (r - 64) < 1", "K / (r - 64)"}) {
    const Expr e = Expr::parse(text, kNames);
    EXPECT_FALSE(e.holds([&](const std::string& n) -> std::optional<double> {
      const auto it = v.find(n);
      return it == v.end() ? std::nullopt : std::optional<double>(it->second);
    })) << text;
  }
}

TEST(TunerExpr, NamesThatDoNotApplyLeaveTheConstraintSatisfied) {
  const Expr e = Expr::parse("K > context", kNames);
  EXPECT_TRUE(e.holds([](const std::string&) { return std::nullopt; }));
  EXPECT_EQ(e.names(), (std::vector<std::string>{"K", "context"}));
}

TEST(TunerExpr, NumbersAndTheirCanonicalText) {
  EXPECT_EQ(parse_real("4096"), 4096);
  EXPECT_EQ(parse_real("0.95"), 0.95);
  EXPECT_EQ(parse_real("256K"), 262144);
  EXPECT_FALSE(parse_real("four"));
  EXPECT_FALSE(parse_real("4 096"));
  EXPECT_FALSE(parse_real(""));
  EXPECT_EQ(format_number(262144), "262144");
  EXPECT_EQ(format_number(1048576), "1048576");
  EXPECT_EQ(format_number(0.95), "0.95");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.3");
}

}  // namespace
}  // namespace mactune::tuner
