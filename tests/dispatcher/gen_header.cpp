// Writes the C++ header form of a dispatch table: gen_header TABLE.json OUT.h NAMESPACE FUNCTION
// (tests/dispatcher generates one at build time and compiles a test against it).
#include <cstdio>
#include <exception>

#include "dispatcher/table.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TABLE.json OUT.h NAMESPACE FUNCTION\n", argv[0]);
    return 2;
  }
  try {
    mactune::dispatch::write_header(mactune::dispatch::read_table(argv[1]), argv[2], argv[3],
                                    argv[4]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gen_header: %s\n", e.what());
    return 2;
  }
  return 0;
}
