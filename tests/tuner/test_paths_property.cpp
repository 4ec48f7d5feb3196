// The output-path rule as a property (issue 30): random commands x random aliasing of their
// paths (the same path, ./ and sub/../ forms, absolute, a symlink, a hard link, a symlink to a
// new path) never change an input file: the command exits 2 with one line. Bounded: a fixed
// number of runs (MACTUNE_PATHS_RUNS, default 48; MACTUNE_PATHS_SEED picks another sequence),
// each refused before any work, so a few seconds in all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli_util.h"
#include "replay/safetensors.h"

namespace mactune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;
using testing::write_trace;

// One command: its argv with the output slots as placeholders "@0", "@1", the inputs named.
struct Command {
  std::vector<std::string> args;
  int outputs;  // placeholders @0 .. @(outputs - 1)
};

std::vector<Command> commands() {
  return {
      {{"emit", "--db", "tiny.db", "-o", "@0"}, 1},
      {{"emit", "--db", "tiny.db", "-o", "@0", "--header", "@1"}, 2},
      {{"compare", "tiny.db", "b.db", "-o", "@0"}, 1},
      {{"db", "export", "--db", "tiny.db", "-o", "@0"}, 1},
      {{"db", "import-nsys", "b.db", "--db", "@0"}, 1},
      {{"replay", "--trace", "t.safetensors", "--json", "@0"}, 1},
      {{"replay", "--trace", "t.safetensors", "--json", "@0", "--db", "@1"}, 2},
      {{"calibrate", "--trace", "t.safetensors", "--max-err", "0.1", "-o", "@0"}, 1},
      {{"calibrate", "--trace", "t.safetensors", "--max-err", "0.1", "-o", "@0", "--json", "@1"},
       2},
      {{"tune", "tiny.yaml", "-q", "--no-report", "-o", "@0"}, 1},
      {{"tune", "tiny.yaml", "-q", "--no-report", "--db", "@0", "-o", "@1"}, 2},
      {{"tune", "tiny.yaml", "-q", "--no-report", "-o", "@0", "--header", "@1"}, 2},
  };
}

const std::vector<std::string> kInputs = {"tiny.db", "b.db", "t.safetensors", "tiny.yaml"};

// `name` spelt another way from the test directory `dir` (all of them name the same file).
std::string alias(const TempDir& dir, const std::string& name, bool exists, std::mt19937& rng,
                  int serial) {
  std::vector<std::function<std::string()>> forms = {
      [&] { return name; },
      [&] { return "./" + name; },
      [&] { return "sub/../" + name; },
      [&] { return "sub/./../" + name; },
      [&] { return dir.file(name); },
      [&] { return dir.path() + "//" + name; },
      [&] {
        const std::string link = "ln" + std::to_string(serial);
        fs::create_symlink(name, dir.file(link));
        return link;
      },
      [&] {
        const std::string link = "sub/ln" + std::to_string(serial);
        fs::create_symlink("../" + name, dir.file(link));
        return link;
      },
  };
  if (exists)
    forms.push_back([&] {
      const std::string link = "hl" + std::to_string(serial);
      fs::create_hard_link(dir.file(name), dir.file(link));
      return link;
    });
  return forms[std::uniform_int_distribution<std::size_t>(0, forms.size() - 1)(rng)]();
}

TEST(OutputPathProperty, NoAliasOfAnInputOrAnotherOutputEverChangesAnInput) {
  // The inputs, made once: a tuned tiny database (and a copy), a trace, the spec.
  TempDir base;
  base.write("tiny.yaml", tiny_spec("tiny", "[1]", "[256]", "[0]", "[64]", 2));
  ASSERT_EQ(run_mactune(base, {"tune", "tiny.yaml", "-q", "--no-report"}).rc, 0);
  fs::copy_file(base.file("tiny.db"), base.file("b.db"));
  write_trace(base, "t.safetensors");

  const char* seed_env = std::getenv("MACTUNE_PATHS_SEED");
  const char* runs_env = std::getenv("MACTUNE_PATHS_RUNS");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::strtoul(seed_env, nullptr, 10)) : 30;
  const int runs = runs_env ? std::atoi(runs_env) : 48;
  std::mt19937 rng(seed);
  const std::vector<Command> all = commands();
  std::map<std::string, int> tried;
  for (int run = 0; run < runs; ++run) {
    TempDir dir;
    fs::create_directory(dir.file("sub"));
    for (const auto& f : kInputs) fs::copy_file(base.file(f), dir.file(f));
    std::map<std::string, std::string> before;
    for (const auto& f : kInputs) before[f] = read_file(dir.file(f));

    const Command& cmd = all[std::uniform_int_distribution<std::size_t>(0, all.size() - 1)(rng)];
    // One output aliases an input of the command, or (with two outputs) the other output.
    std::vector<std::string> inputs_of;
    for (const auto& a : cmd.args)
      for (const auto& f : kInputs)
        if (a == f) inputs_of.push_back(f);
    std::vector<std::string> outs(cmd.outputs);
    for (int i = 0; i < cmd.outputs; ++i) outs[i] = "new" + std::to_string(i) + ".out";
    const int victim_slot = std::uniform_int_distribution<int>(0, cmd.outputs - 1)(rng);
    const bool alias_output = cmd.outputs == 2 && std::bernoulli_distribution(0.4)(rng);
    std::string target;
    if (alias_output) {
      target = outs[1 - victim_slot];
      outs[victim_slot] = alias(dir, target, false, rng, run);
    } else {
      target = inputs_of[std::uniform_int_distribution<std::size_t>(0, inputs_of.size() - 1)(rng)];
      outs[victim_slot] = alias(dir, target, true, rng, run);
    }
    std::vector<std::string> args;
    for (const auto& a : cmd.args)
      args.push_back(a.size() == 2 && a[0] == '@' ? outs[std::size_t(a[1] - '0')] : a);
    std::string line;
    for (const auto& a : args) line += a + " ";
    const auto r = run_mactune(dir, args);
    ++tried[cmd.args[0] + (alias_output ? " (two outputs)" : " (an input)")];
    EXPECT_EQ(r.rc, 2) << line << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << line << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("mactune: error: cannot write ", 0), 0u) << line << "\n" << r.err;
    for (const auto& f : kInputs) EXPECT_EQ(read_file(dir.file(f)), before[f]) << line << ": " << f;
    if (alias_output) {
      EXPECT_FALSE(fs::exists(dir.file(target))) << line << ": created " << target;
    }
    if (::testing::Test::HasFailure()) break;  // one counterexample is enough to read
  }
  for (const auto& [what, n] : tried) std::printf("  %-28s %d runs\n", what.c_str(), n);
}

}  // namespace
}  // namespace mactune::tuner
