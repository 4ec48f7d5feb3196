// The instance grid (kernels/cuda/instances.txt read by grid.h) against what CMake built: the
// generator's list is the registry's, every name is canonical and round-trips, and the full
// grid keeps exactly the configs whose shared memory fits a CTA.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/grid.h"
#include "kernels/cuda/instance_grid.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/registry.h"

namespace mactune::cuda {
namespace {

GridFile project_grid() {
  std::ifstream in(MACTUNE_TEST_GRID_FILE);
  EXPECT_TRUE(in.good()) << MACTUNE_TEST_GRID_FILE;
  std::stringstream text;
  text << in.rdbuf();
  return parse_grid_file(text.str(), "instances.txt");
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string n; std::getline(in, n, ',');)
    if (!n.empty()) out.push_back(n);
  return out;
}

// name -> config -> name, and the config's own checks, for any family.
void expect_canonical(const GridInstance& i) {
  const std::optional<AnyConfig> c = parse_instance_name(i.name);
  ASSERT_TRUE(c.has_value()) << i.name;
  EXPECT_EQ(c->family, i.family) << i.name;
  std::string name, config;
  if (i.family == "attend") {
    name = instance_name(c->attend), config = config_string(c->attend);
    EXPECT_TRUE(config_error(c->attend).empty()) << i.name;
    EXPECT_LE(attend_smem_bytes(c->attend), kMaxSmemPerCta) << i.name;
  } else if (i.family == "full") {
    name = instance_name(c->full), config = config_string(c->full);
    EXPECT_LE(attend_smem_bytes(c->full), kMaxSmemPerCta) << i.name;
  } else if (i.family == "match") {
    name = instance_name(c->match), config = config_string(c->match);
  } else {
    name = instance_name(c->merge), config = config_string(c->merge);
  }
  EXPECT_EQ(name, i.name);
  EXPECT_EQ(config, i.config) << i.name;
}

TEST(CudaGrid, CmakesListIsTheGeneratorsAndTheRegistrys) {
  // What instances_gen.cmake made targets of (after the filter), in order.
  const std::vector<std::string> cmake = split(MACTUNE_TEST_INSTANCE_NAMES);
  std::vector<std::string> registry;
  for (const InstanceDesc& d : instances()) registry.push_back(d.name);
  EXPECT_EQ(cmake, registry);
  std::vector<std::string> catalog;
  for (const InstanceDesc& d : built_instance_descs()) catalog.push_back(d.name);
  EXPECT_EQ(cmake, catalog);
  // The grid of this build's mode, before the filter: the built names are a subsequence of it.
  const std::vector<GridInstance> grid = grid_instances(project_grid(), all_instances_built());
  std::size_t at = 0;
  for (const GridInstance& g : grid) {
    expect_canonical(g);
    if (at < cmake.size() && cmake[at] == g.name) ++at;
  }
  EXPECT_EQ(at, cmake.size()) << "a built instance is not in the grid, or out of its order";
  if (kernel_filter().empty()) {
    EXPECT_EQ(cmake.size(), grid.size());
  }
}

TEST(CudaGrid, BothGridsAreCanonicalAndFit) {
  const GridFile file = project_grid();
  const std::vector<GridInstance> small = grid_instances(file, false);
  const std::vector<GridInstance> full = grid_instances(file, true);
  EXPECT_EQ(small.size(), file.defaults.size());
  std::set<std::string> full_names;
  for (const GridInstance& i : full) {
    expect_canonical(i);
    EXPECT_TRUE(full_names.insert(i.name).second) << "duplicate " << i.name;
  }
  for (const GridInstance& i : small) {
    expect_canonical(i);
    EXPECT_TRUE(full_names.count(i.name)) << i.name << " is in the default grid only";
  }
}

TEST(CudaGrid, TheFullGridDropsExactlyTheConfigsOverTheLimit) {
  const std::vector<GridInstance> full = grid_instances(project_grid(), true);
  std::set<std::string> names;
  for (const GridInstance& i : full) names.insert(i.name);
  // 3 x 2 x 2 x 3 x 2 = 72 tiled configs; over 227 KB: D = 128 with T = 128, S = 4 (4 configs)
  // and D = 256 with T = 64, S = 4 or T = 128 (16 configs).
  int attend = 0;
  for (const GridInstance& i : full) attend += i.family == "attend";
  EXPECT_EQ(attend, 72 - 4 - 16);
  EXPECT_TRUE(names.count("attend_cuda_hd256_g16_t64_s3_f16"));   // 16 KB q + 192 KB ring
  EXPECT_FALSE(names.count("attend_cuda_hd256_g16_t64_s4_f16"));  // 16 KB q + 256 KB ring
  EXPECT_TRUE(names.count("full_cuda_hd128_g16_t128_s3_bf16"));
  EXPECT_FALSE(names.count("full_cuda_hd128_g16_t128_s4_bf16"));
  EXPECT_EQ(attend_smem_bytes(AttendConfig{256, 16, 64, 3, DType::f16}), 16384u + 196608u);
}

TEST(CudaGrid, TheFileIsCheckedLineByLine) {
  const auto refusal = [](const std::string& text, bool all) {
    try {
      grid_instances(parse_grid_file(text, "g.txt"), all);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal("default attend_cuda_hd128_g8_t64\n", false).find("g.txt:1:"),
            std::string::npos);
  EXPECT_NE(refusal("\n# c\nbogus 1\n", false).find("g.txt:3: 'bogus'"), std::string::npos);
  EXPECT_NE(refusal("axis probe 0\naxis probe 1\n", false).find("listed twice"), std::string::npos);
  // A default the kernel cannot compile, or one over the limit, is an error, not dropped.
  EXPECT_NE(refusal("default attend_cuda_hd96_g8_t64_s2_bf16\n", false).find("head_dim"),
            std::string::npos);
  EXPECT_NE(refusal("default attend_cuda_hd256_g8_t128_s2_bf16\n", false).find("shared memory"),
            std::string::npos);
  const std::string axes =
      "axis head_dim 128\naxis group 8\naxis tile_tokens 64\naxis stages 2\naxis kv_dtype bf16\n";
  EXPECT_NE(refusal(axes, true).find("no axis 'probe'"), std::string::npos);
  EXPECT_NE(refusal(axes + "axis probe 0\naxis colour red\n", true).find("'colour'"),
            std::string::npos);
  EXPECT_NE(refusal(axes + "axis probe 2\n", true).find("not 0 or 1"), std::string::npos);
  EXPECT_EQ(refusal(axes + "axis probe 0 1\n", true), "");
  EXPECT_EQ(grid_instances(parse_grid_file(axes + "axis probe 0 1\n", "g"), true).size(), 5u);
}

}  // namespace
}  // namespace mactune::cuda
