// A property every fuzz target checks: when it fails, the target's source line and the
// condition are printed and the process aborts, so libFuzzer keeps the input as a crash.
#pragma once

#include <cstdlib>

#define FUZZ_ASSERT(cond)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      __builtin_printf("%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)
