// The ptxas reports of every built instance (captured at build time by
// kernels/cuda/tools/ptxas-log.sh): each instance's kernel is compiled for every target
// architecture with no register spills and no stack frame (local memory).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/registry.h"

namespace mactune::cuda {
namespace {

struct EntryReport {
  std::string function, arch;
  long stack = -1, spill_stores = -1, spill_loads = -1, registers = -1;
};

// Parses `-Xptxas -v` output: "Compiling entry function 'F' for 'sm_XX'", then the
// "N bytes stack frame, N bytes spill stores, N bytes spill loads" and "Used N registers" lines.
std::vector<EntryReport> parse(const std::string& text) {
  std::vector<EntryReport> out;
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::istringstream in(text);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1], m[2]});
    } else if (!out.empty() && out.back().stack < 0 && std::regex_search(line, m, frame)) {
      out.back().stack = std::stol(m[1]);
      out.back().spill_stores = std::stol(m[2]);
      out.back().spill_loads = std::stol(m[3]);
    } else if (!out.empty() && out.back().registers < 0 && std::regex_search(line, m, regs)) {
      out.back().registers = std::stol(m[1]);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, sep);)
    if (!p.empty()) parts.push_back(p);
  return parts;
}

TEST(CudaResources, ParserReadsPtxasReports) {
  const auto r = parse(
      "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kv\n"
      "    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].arch, "sm_90a");
  EXPECT_EQ(r[0].stack, 8);
  EXPECT_EQ(r[0].spill_stores, 4);
  EXPECT_EQ(r[0].spill_loads, 8);
  EXPECT_EQ(r[0].registers, 40);
}

TEST(CudaResources, EveryInstanceHasNoSpillsAndNoStack) {
  const std::filesystem::path dir = MACTUNE_TEST_PTXAS_LOG_DIR;
  const std::vector<std::string> archs = split(MACTUNE_TEST_CUDA_ARCHS, ',');
  ASSERT_FALSE(archs.empty());
  const std::vector<InstanceDesc> all = instances();
  ASSERT_FALSE(all.empty());
  for (const InstanceDesc& inst : all) {
    const std::filesystem::path log = dir / (inst.name + ".cu.o.ptxas.log");
    std::ifstream in(log);
    ASSERT_TRUE(in) << "no ptxas report for " << inst.name << " at " << log
                    << " (built without kernels/cuda/tools/ptxas-log.sh?)";
    std::stringstream text;
    text << in.rdbuf();
    const std::vector<EntryReport> entries = parse(text.str());
    std::set<std::string> seen;
    for (const EntryReport& e : entries) {
      seen.insert(e.arch);
      EXPECT_EQ(e.stack, 0) << inst.name << " " << e.arch << ": stack frame (local memory)";
      EXPECT_EQ(e.spill_stores, 0) << inst.name << " " << e.arch << ": spill stores";
      EXPECT_EQ(e.spill_loads, 0) << inst.name << " " << e.arch << ": spill loads";
      EXPECT_GT(e.registers, 0) << inst.name << " " << e.arch;
      RecordProperty(inst.name + "." + e.arch + ".registers", static_cast<int>(e.registers));
    }
    for (const std::string& a : archs) {
      // CMake spells architectures "90a", ptxas "sm_90a".
      const std::string want = "sm_" + std::regex_replace(a, std::regex("-real|-virtual"), "");
      EXPECT_TRUE(seen.count(want)) << inst.name << " was not compiled for " << want;
    }
  }
}

}  // namespace
}  // namespace mactune::cuda
