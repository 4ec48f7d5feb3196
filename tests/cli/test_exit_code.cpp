// The exit codes docs/errors.md documents: bad input and failed operations exit 2, a broken
// invariant (MACTUNE_CHECK) and an exception mactune does not throw as its own exit 1, each with
// one line on stderr.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "cli/exit_code.h"
#include "kernels/error.h"

namespace mactune::cli {
namespace {

template <class Throw>
std::pair<int, std::string> exit_of(Throw&& thrower) {
  std::ostringstream err;
  try {
    thrower();
  } catch (...) {
    return {report_exception(std::current_exception(), "mactune predict", err), err.str()};
  }
  ADD_FAILURE() << "nothing was thrown";
  return {0, ""};
}

TEST(ExitCode, BadInputExits2) {
  auto [code, line] = exit_of([] { MACTUNE_REQUIRE(1 + 1 == 3, "K = 3 must be a power of two"); });
  EXPECT_EQ(code, 2);
  EXPECT_EQ(line, "mactune: error: K = 3 must be a power of two\n");
}

TEST(ExitCode, FailedOperationExits2) {
  auto [code, line] = exit_of([] { throw Error("--backend cuda: no usable GPU"); });
  EXPECT_EQ(code, 2);
  EXPECT_EQ(line, "mactune: error: --backend cuda: no usable GPU\n");
}

TEST(ExitCode, BrokenInvariantExits1WithItsSite) {
  auto [code, line] = exit_of([] { MACTUNE_CHECK(2 < 1, "plan of ", 3, " items"); });
  EXPECT_EQ(code, 1);
  EXPECT_EQ(line.rfind("mactune: internal error: ", 0), 0u) << line;
  EXPECT_NE(line.find("test_exit_code.cpp:"), std::string::npos) << line;
  EXPECT_NE(line.find("`2 < 1`"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
}

TEST(ExitCode, AnAllocationNoCheckForesawIsAResourceError) {
  auto [code, line] = exit_of([] { throw std::bad_alloc(); });
  EXPECT_EQ(code, 2);
  EXPECT_EQ(line.rfind("mactune: error: out of memory while running 'mactune predict'", 0), 0u)
      << line;
  EXPECT_EQ(exit_of([] { throw std::length_error("vector::reserve"); }).first, 2);
}

TEST(ExitCode, ForeignExceptionsAreInternal) {
  EXPECT_EQ(exit_of([] { throw std::logic_error("vector::at"); }).first, 1);
  EXPECT_EQ(exit_of([] { throw 42; }).first, 1);
}

TEST(ExitCode, AnInvariantIsNotInputError) {
  // Python maps InputError to ValueError: a bug must not read as the caller's mistake.
  try {
    MACTUNE_CHECK(false);
  } catch (const InputError&) {
    FAIL() << "MACTUNE_CHECK threw InputError";
  } catch (const InternalError&) {
    SUCCEED();
  }
}

}  // namespace
}  // namespace mactune::cli
