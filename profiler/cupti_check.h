// MACTUNE_CUPTI_CHECK(call): throws mactune::Error naming file:line, the call and CUPTI's text
// for the result, like the other MACTUNE_*_CHECK macros (kernels/error.h).
#pragma once

#include <cupti_result.h>

#include <string>

#include "kernels/error.h"
#include "profiler/cupti_api.h"

namespace mactune::prof::cupti {

[[noreturn, gnu::noinline, gnu::cold]] inline void throw_cupti_error(const char* file, int line,
                                                                     const char* call,
                                                                     CUptiResult result) {
  ::mactune::detail::throw_check_failed(
      file, line, call,
      result_text(result) + " (" + std::to_string(static_cast<int>(result)) + ")");
}

}  // namespace mactune::prof::cupti

#define MACTUNE_CUPTI_CHECK(call)                                                                  \
  do {                                                                                             \
    const CUptiResult mactune_cupti_result_ = (call);                                              \
    if (mactune_cupti_result_ != CUPTI_SUCCESS) [[unlikely]]                                       \
      ::mactune::prof::cupti::throw_cupti_error(__FILE__, __LINE__, #call, mactune_cupti_result_); \
  } while (0)
