// A property test of the spec reader's strictness (kernels/yaml_strict.h,
// tuner/spec/spec_yaml.cpp): random valid specs with, inserted at random places, a key given twice
// at a random depth, a second YAML document, a quoted value left open, or a NUL escape, are always
// refused with one line naming the line of the fault; the same specs with neutral changes
// (comments, blank lines, values quoted properly, a leading '---') read back to the same grid.
// Seeded and bounded (a few hundred specs, well under a second), so CI runs it as a unit test.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "replay/schedule.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {
namespace {

// A valid spec in block style, three levels deep, with some values drawn at random.
std::vector<std::string> random_spec(std::mt19937& rng) {
  auto pick = [&](std::vector<std::string> v) {
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };
  return {
      "name: strict-" + pick({"a", "b", "c"}),
      "description: " + pick({"a quick sweep", "it's short", "K and r"}),
      "device:",
      "  backend: cpu",
      "kernels:",
      "  cpu:",
      "    chunk_tokens: " + pick({"[64, 128]", "64", "[32, 256]"}),
      "    threads: 1",
      "mac:",
      "  K: " + pick({"64", "[64, 128]"}),
      "  r: 32",
      "workload:",
      "  batch: " + pick({"[1, 2]", "1", "[1, 4]"}),
      "  context: " + pick({"[256, 512]", "1K"}),
      "  q_heads: 8",
      "  kv_heads: 2",
      "  head_dim: 64",
      "  hit_rate: " + pick({"[0, 1]", "[0, 0.5, 1]", "1"}),
      "  lag: uniform(1,16)",
      "constraints:",
      "  - r < context",
      "measure:",
      "  warmup: 1",
      "  time_cap: 1",
      "decide:",
      "  break_even: grid",
      "output:",
      "  db: strict.db",
  };
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

std::string error_of(const std::string& text) {
  try {
    parse_spec(text, "t.yaml", Backend::cpu);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The grid a spec reads to, as text: every axis with its values.
std::string grid_text(const std::string& text) {
  const Spec s = parse_spec(text, "t.yaml", Backend::cpu);
  std::ostringstream o;
  o << s.name << '|' << s.output.db << '|' << s.constraints.size() << '|';
  for (const Axis& a : s.axes) {
    o << a.name << '=';
    for (const Value& v : a.values) o << v.text << ',';
    o << ';';
  }
  return o.str();
}

// Lines "key: value" (a scalar after the colon), by index.
std::vector<std::size_t> value_lines(const std::vector<std::string>& lines) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto colon = lines[i].find(": ");
    if (colon != std::string::npos && lines[i].find("- ") == std::string::npos) out.push_back(i);
  }
  return out;
}

std::size_t any_of(std::mt19937& rng, std::size_t n) {
  return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
}

void expect_refused_at(const std::string& text, std::size_t line, const std::string& what) {
  const std::string e = error_of(text);
  ASSERT_FALSE(e.empty()) << "accepted:\n" << text;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(e.rfind("t.yaml:" + std::to_string(line) + ":", 0), 0u)
      << "expected line " << line << ": " << e << "\n"
      << text;
  EXPECT_NE(e.find(what), std::string::npos) << e;
}

constexpr int kRounds = 150;

TEST(SpecStrict, KeyGivenTwiceAtAnyDepthIsRefusedAtItsLine) {
  std::mt19937 rng(30);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> lines = random_spec(rng);
    ASSERT_EQ(error_of(join(lines)), "");
    // Any key line (a mapping key with a value or with children below): its copy right after
    // it, or after its block, is the same key twice in one mapping.
    std::vector<std::size_t> keys;
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (lines[i].find(':') != std::string::npos && lines[i].find("- ") == std::string::npos)
        keys.push_back(i);
    const std::size_t k = keys[any_of(rng, keys.size())];
    const std::string copy = lines[k];
    const std::size_t indent = copy.find_first_not_of(' ');
    std::size_t at = k + 1;  // after the key's block: the lines indented deeper
    while (at < lines.size() && lines[at].find_first_not_of(' ') > indent) ++at;
    const std::string dup = copy.back() == ':' ? copy + " {}" : copy;
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), dup);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + dup);
    expect_refused_at(join(lines), at + 1, "given twice");
  }
}

TEST(SpecStrict, SecondDocumentIsRefused) {
  std::mt19937 rng(31);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> lines = random_spec(rng);
    // At a top-level boundary: between two top-level keys, or at the end.
    std::vector<std::size_t> tops;
    for (std::size_t i = 1; i <= lines.size(); ++i)
      if (i == lines.size() || lines[i][0] != ' ') tops.push_back(i);
    const std::size_t at = tops[any_of(rng, tops.size())];
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), "---");
    SCOPED_TRACE("round " + std::to_string(round) + ": '---' at line " + std::to_string(at + 1));
    const std::string e = error_of(join(lines));
    ASSERT_FALSE(e.empty()) << join(lines);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find("second YAML document"), std::string::npos) << e;
    // The document starts at '---' (line at + 1); its first node may be on the next line.
    const bool named = e.rfind("t.yaml:" + std::to_string(at + 1) + ":", 0) == 0 ||
                       e.rfind("t.yaml:" + std::to_string(at + 2) + ":", 0) == 0;
    EXPECT_TRUE(named) << e;
  }
}

TEST(SpecStrict, QuoteLeftOpenIsRefusedAtItsLine) {
  std::mt19937 rng(32);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> lines = random_spec(rng);
    const std::vector<std::size_t> values = value_lines(lines);
    const std::size_t k = values[any_of(rng, values.size())];
    const auto colon = lines[k].find(": ");
    const char quote = rng() % 2 ? '"' : '\'';
    lines[k].insert(colon + 2, 1, quote);  // opened, never closed on the line
    SCOPED_TRACE("round " + std::to_string(round) + ": " + lines[k]);
    const std::string e = error_of(join(lines));
    const bool open_or_followed = e.find("does not close on its line") != std::string::npos ||
                                  e.find("is followed by text") != std::string::npos;
    EXPECT_TRUE(open_or_followed) << e;
    expect_refused_at(join(lines), k + 1, "the quoted value opened at column");
  }
}

TEST(SpecStrict, NulInAQuotedValueIsRefusedAtItsLine) {
  std::mt19937 rng(33);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> lines = random_spec(rng);
    const std::vector<std::size_t> values = value_lines(lines);
    const std::size_t k = values[any_of(rng, values.size())];
    const auto colon = lines[k].find(": ");
    lines[k] = lines[k].substr(0, colon + 2) + "\"a\\0b\"";
    expect_refused_at(join(lines), k + 1, "NUL");
  }
  std::string raw = "name: x\ndescription: a";
  raw += '\0';
  raw += "b\n";
  expect_refused_at(raw, 2, "NUL byte");
}

TEST(SpecStrict, NeutralChangesReadBackToTheSameGrid) {
  std::mt19937 rng(34);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> lines = random_spec(rng);
    const std::string want = grid_text(join(lines));
    std::vector<std::string> changed = lines;
    // Quote a few scalar values properly, add comments and blank lines, maybe a leading '---'.
    for (std::size_t k : value_lines(changed)) {
      std::string& l = changed[k];
      const auto colon = l.find(": ");
      const std::string value = l.substr(colon + 2);
      const bool plain = value.find_first_of("[]{}'\"#,") == std::string::npos;
      if (plain && rng() % 3 == 0 && l.rfind("  lag", 0) != 0)
        l = l.substr(0, colon + 2) + (rng() % 2 ? "\"" + value + "\"" : "'" + value + "'");
      else if (rng() % 4 == 0)
        l += "  # a comment with 'quotes' and \"more\"";
    }
    for (int extra = 0; extra < 3; ++extra) {
      const std::size_t at = any_of(rng, changed.size() + 1);
      changed.insert(changed.begin() + static_cast<std::ptrdiff_t>(at),
                     rng() % 2 ? "" : "# a comment line: 'x' \"y\"");
    }
    if (rng() % 2) changed.insert(changed.begin(), "---");
    SCOPED_TRACE("round " + std::to_string(round) + "\n" + join(changed));
    std::string got;
    ASSERT_NO_THROW(got = grid_text(join(changed)));
    EXPECT_EQ(got, want);
  }
}

// The layer schedule reader is as strict (replay/schedule.cpp).
TEST(SpecStrict, LayerScheduleIsAsStrict) {
  const std::string ok =
      "format: mactune-layer-schedule\nversion: 1\nlayers:\n  - layer: 0\n    tau: 0.5\n";
  EXPECT_NO_THROW(replay::parse_layer_schedule(ok, "s.yaml"));
  auto error = [](const std::string& text) {
    try {
      replay::parse_layer_schedule(text, "s.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(ok + "---\nlayers: []\n").find("second YAML document"), std::string::npos);
  EXPECT_NE(error("format: mactune-layer-schedule\nversion: 1\nversion: 1\nlayers: []\n")
                .find("s.yaml:3: version: given twice"),
            std::string::npos)
      << error("format: mactune-layer-schedule\nversion: 1\nversion: 1\nlayers: []\n");
  EXPECT_NE(error(ok + "  - layer: 1\n    tau: 0.5\n    tau: 0.6\n").find("given twice"),
            std::string::npos);
  EXPECT_NE(error("format: \"mactune-layer-schedule\nversion: 1\nlayers: []\n")
                .find("s.yaml:1: not valid YAML: the quoted value"),
            std::string::npos);
}

}  // namespace
}  // namespace mactune::tuner
