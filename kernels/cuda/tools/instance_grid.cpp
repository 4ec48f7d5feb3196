// The grid generator: reads kernels/cuda/instances.txt (grid.h) and prints the instances a
// build compiles, one a line, "FAMILY NAME CONFIG" (CONFIG: config_string()). instances_gen.cmake
// compiles and runs it at configure time, so CMake learns the names, the grid's shared-memory
// filter and its limit from config.h and launch.h instead of restating them.
//
//   instance_grid FILE default|all
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "kernels/cuda/grid.h"

int main(int argc, char** argv) {
  using namespace mactune;
  if (argc != 3 || (std::string_view(argv[2]) != "default" && std::string_view(argv[2]) != "all")) {
    std::cerr << "usage: instance_grid FILE default|all\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "instance_grid: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const cuda::GridFile grid = cuda::parse_grid_file(text.str(), argv[1]);
    for (const cuda::GridInstance& i :
         cuda::grid_instances(grid, std::string_view(argv[2]) == "all"))
      std::cout << i.family << ' ' << i.name << ' ' << i.config << '\n';
  } catch (const Error& e) {
    std::cerr << "instance_grid: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
