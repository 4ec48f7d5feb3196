// Writes a synthetic nsys export in the tables of the shipped real one (nsys 2022.2, export
// schema 2.9.1), at any size: for timing `mactune db import-nsys` and `mactune nsys summary`.
//   make_nsys_export OUT.sqlite STEPS KERNELS_PER_STEP
// Each step is a push/pop range "step" holding match/attend/merge ranges, KERNELS_PER_STEP
// kernels (every other launch recorded twice, as nsys 2022 does) and one memcpy.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/error.h"
#include "tests/db/nsys_fixtures.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s OUT.sqlite STEPS KERNELS_PER_STEP\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::remove(argv[1]);
    const int steps = std::atoi(argv[2]), per_step = std::atoi(argv[3]);
    mactune::db::testing::write_export(argv[1], mactune::db::testing::ExportSchema::real_2_9_1,
                                       mactune::db::testing::decode_profile(steps, per_step));
    std::printf("%s: %d steps, %d kernels, %d memcpy\n", argv[1], steps, steps * per_step, steps);
  } catch (const mactune::Error& e) {
    std::fprintf(stderr, "make_nsys_export: %s\n", e.what());
    return 2;
  }
  return 0;
}
