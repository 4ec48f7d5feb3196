// Errors: one exception type for the libraries, one for bad user input, one for a broken
// invariant (a bug), and one macro family over one out-of-line (noinline) function that names
// file:line, the failed check and the text. Libraries throw; kernel launchers return a status;
// the CLI turns an InternalError into exit 1 and every other Error into exit 2 (docs/errors.md).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mactune {

// A failure inside mactune (a broken invariant, a failed system call, a CUDA error).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: a shape, a file, a spec key. Its message names what and where.
class InputError : public Error {
 public:
  using Error::Error;
};

// A broken invariant inside mactune: a bug, never the user's input (MACTUNE_CHECK throws it).
// Its message keeps file:line and the condition, for the bug report.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {

[[noreturn, gnu::noinline, gnu::cold]] inline void throw_check_failed(const char* file, int line,
                                                                      const char* check,
                                                                      const std::string& message) {
  std::ostringstream out;
  out << file << ':' << line << ": " << check;
  if (!message.empty()) out << ": " << message;
  throw InternalError(out.str());
}

// Builds a message from any streamable pieces: concat("K = ", k, " is not a power of two").
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  if constexpr (sizeof...(Parts) > 0) (out << ... << parts);
  return out.str();
}

}  // namespace detail

// Throws InputError with the pieces streamed together.
template <class... Parts>
[[noreturn]] void input_error(const Parts&... parts) {
  throw InputError(detail::concat(parts...));
}

}  // namespace mactune

// Internal invariant: throws mactune::InternalError naming file:line and the condition.
#define MACTUNE_CHECK(cond, ...)                                                            \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::mactune::detail::throw_check_failed(__FILE__, __LINE__, "check `" #cond "` failed", \
                                            ::mactune::detail::concat(__VA_ARGS__));        \
  } while (0)

// User-facing precondition: throws mactune::InputError with the message only.
#define MACTUNE_REQUIRE(cond, ...)                                         \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      throw ::mactune::InputError(::mactune::detail::concat(__VA_ARGS__)); \
  } while (0)
