// How an exception that leaves a command reaches the user: one line on stderr and the exit code
// docs/errors.md documents. A broken invariant (InternalError) and any exception mactune does
// not throw as an Error of its own are bugs: "internal error", exit 1. Every other
// mactune::Error (bad input, a failed operation, a device or database that is not usable)
// exits 2, and so does an allocation no check foresaw (std::bad_alloc, std::length_error: the
// sizes a request implies are checked where they enter, kernels/host_memory.h), as a resource
// error naming the command.
#pragma once

#include <exception>
#include <new>
#include <ostream>
#include <stdexcept>
#include <string_view>

#include "kernels/error.h"
#include "kernels/one_line.h"

namespace mactune::cli {

inline constexpr int kExitError = 2;
inline constexpr int kExitInternal = 1;

// `command`: the command's words ("mactune predict"), for the out-of-memory line.
inline int report_exception(const std::exception_ptr& thrown, std::string_view command,
                            std::ostream& err) {
  try {
    std::rethrow_exception(thrown);
  } catch (const InternalError& e) {
    err << "mactune: internal error: " << detail::one_line(e.what()) << '\n';
    return kExitInternal;
  } catch (const Error& e) {
    err << "mactune: error: " << detail::one_line(e.what()) << '\n';
    return kExitError;
  } catch (const std::bad_alloc&) {
    err << "mactune: error: out of memory while running '" << command
        << "' (the request needs more memory than this machine, or its ulimit -v, allows: ask "
           "for less)\n";
    return kExitError;
  } catch (const std::length_error&) {
    err << "mactune: error: out of memory while running '" << command
        << "' (the request asks for a buffer larger than any this machine can hold: ask for "
           "less)\n";
    return kExitError;
  } catch (const std::exception& e) {
    err << "mactune: internal error: " << detail::one_line(e.what()) << '\n';
    return kExitInternal;
  } catch (...) {
    err << "mactune: internal error: an exception that is not a std::exception\n";
    return kExitInternal;
  }
}

}  // namespace mactune::cli
