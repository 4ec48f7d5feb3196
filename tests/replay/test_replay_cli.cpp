// `mactune replay` / `mactune calibrate` end to end: malformed trace files give one error line
// and exit code 2; a replay writes its table, JSON and database rows; calibrate writes a
// schedule that loads.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "kernels/fields.h"
#include "replay/safetensors.h"
#include "replay/schedule.h"
#include "replay/trace.h"

namespace mactune::replay {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int rc = -1;
  std::string out, err;
};

class ReplayCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mactune_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  CliRun mactune(const std::string& args) const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd =
        std::string("'") + MACTUNE_CLI + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // The same under shell limits (`ulimit -s ... && ulimit -v ...`), in a subshell.
  CliRun mactune_limited(const std::string& limits, const std::string& args) const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd = "(" + limits + " && exec '" + MACTUNE_CLI + "' " + args + ") >'" + out +
                            "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  void write(const std::string& name, const std::vector<std::byte>& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }

  // A small, valid trace: T steps of random q/k/v (never zeros), 4 query / 2 KV heads, D 16.
  std::vector<std::byte> small_trace(int T = 48) const {
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 1.0f);
    auto values = [&](std::size_t n) {
      std::vector<float> v(n);
      for (float& x : v) x = d(rng);
      return v;
    };
    return write_safetensors({{"layer3.q_pre", {T, 4, 16}, values(std::size_t(T) * 64)},
                              {"layer3.k_pre", {T, 2, 16}, values(std::size_t(T) * 32)},
                              {"layer3.v", {T, 2, 16}, values(std::size_t(T) * 32)}},
                             {{"rope_theta", "10000"}});
  }

  // Runs replay on a broken file: exit 2 and exactly one line on stderr with all `parts`.
  void expect_refused(const std::vector<std::byte>& bytes,
                      std::initializer_list<const char*> parts) {
    write("bad.safetensors", bytes);
    const CliRun r = mactune("replay --engine ref --trace '" + path("bad.safetensors") + "'");
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const char* p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << r.err;
  }

  fs::path dir_;
};

TEST_F(ReplayCli, TruncatedFile) {
  auto b = small_trace();
  b.resize(b.size() - 100);
  expect_refused(b, {"bad.safetensors", "tensor 'layer3.v'", "run past the end"});
}

TEST_F(ReplayCli, HeaderLengthPastTheEnd) {
  auto b = small_trace();
  const std::uint64_t n = b.size();
  std::memcpy(b.data(), &n, 8);
  expect_refused(b, {"header length", "runs past the end of the file"});
}

TEST_F(ReplayCli, BadDtype) {
  auto b = small_trace();
  const std::string needle = "\"F32\"", bad = "\"I32\"";
  std::string all(reinterpret_cast<const char*>(b.data()), b.size());
  all.replace(all.find(needle), needle.size(), bad);  // the first tensor's dtype
  std::memcpy(b.data(), all.data(), all.size());
  expect_refused(b, {"dtype I32 is not supported"});
}

TEST_F(ReplayCli, ShapeBytesMismatch) {
  auto b = small_trace();
  std::string all(reinterpret_cast<const char*>(b.data()), b.size());
  const std::string needle = "[48,2,16]";
  const auto at = all.find(needle);
  ASSERT_NE(at, std::string::npos);
  all.replace(at, needle.size(), "[48,2,15]");  // same length: only the shape changes
  std::memcpy(b.data(), all.data(), all.size());
  expect_refused(b, {"shape [48, 2, 15] x F32 needs 1440 x 4 bytes"});
}

TEST_F(ReplayCli, MissingTensor) {
  std::vector<float> q(8 * 4 * 16, 0.5f), k(8 * 2 * 16, 0.25f);
  expect_refused(
      write_safetensors({{"layer3.q_pre", {8, 4, 16}, q}, {"layer3.k_pre", {8, 2, 16}, k}},
                        {{"rope_theta", "10000"}}),
      {"layer 3 has no tensor 'layer3.v'"});
}

TEST_F(ReplayCli, MissingFileAndBadFlag) {
  CliRun r = mactune("replay --trace '" + path("nope.safetensors") + "'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
  write("t.safetensors", small_trace());
  r = mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --pick closest");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown pick rule 'closest'"), std::string::npos) << r.err;
  r = mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --layers 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("has no layer 1 (it holds layer(s) 3)"), std::string::npos) << r.err;
}

TEST_F(ReplayCli, ReplayWritesTableJsonAndDatabase) {
  write("t.safetensors", small_trace());
  const CliRun r = mactune("replay --engine ref --trace '" + path("t.safetensors") +
                           "' --K 16 --r 4 --tau 0.2,1 --json '" + path("out.json") + "' --db '" +
                           path("f.db") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("err_p99"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(slurp(path("out.json")));
  ASSERT_EQ(doc["layers"].size(), 2u);
  for (const auto& e : doc["layers"]) {
    for (const char* k : {"layer", "steps", "hit_rate", "group_all_hit_rate", "skip_ratio",
                          "head_skip_ratio", "rel_err", "rel_err_vs_ref"})
      EXPECT_TRUE(e.contains(k)) << k;
    for (const char* k : {"mean", "p50", "p99", "max", "frac_gt_0.1"})
      EXPECT_TRUE(e["rel_err"].contains(k)) << k;
    EXPECT_EQ(e["layer"], 3);
    EXPECT_EQ(e["steps"], 48);
    EXPECT_TRUE(e["rel_err_vs_ref"].is_null());  // the trace has no o_ref
  }
  EXPECT_EQ(doc["layers"][1]["hit_rate"], 0.0);  // tau = 1
  EXPECT_EQ(doc["sha256"], Safetensors::open(path("t.safetensors")).sha256());

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path("f.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*), min(layer), max(tau) FROM fidelity", -1, &st,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 2);
  EXPECT_EQ(sqlite3_column_int(st, 1), 3);
  EXPECT_EQ(sqlite3_column_double(st, 2), 1.0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// The MAC flags of replay and calibrate are the rows of MacParams' field table: each row is a
// flag of both (named as the row, '_' as '-'), and a value given to replay's reaches the point
// it runs (its --json entry holds every row under its name).
TEST_F(ReplayCli, EveryMacSettingIsAFlagOfReplayAndCalibrate) {
  write("t.safetensors", small_trace());
  const CliRun replay_help = mactune("replay --help"), calibrate_help = mactune("calibrate --help");
  for (const Field<MacParams>& f : fields_of<MacParams>()) {
    std::string flag = "--" + std::string(f.name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    EXPECT_NE(replay_help.out.find("  " + flag + " "), std::string::npos) << flag;
    EXPECT_NE(calibrate_help.out.find(flag + " "), std::string::npos) << flag;
    // A value other than the default, inside the row's range; a boolean row is a switch
    // (given: true, its default being false).
    Scalar v;
    if (f.type == FieldType::boolean) {
      ASSERT_EQ(f.text_of(MacParams{}), "false") << flag;
      v = true;
    } else if (f.type == FieldType::integer) {
      v = static_cast<std::int64_t>(f.bounds.lo) + 1;
    } else if (f.type == FieldType::real) {
      v = f.bounds.lo + (std::min(f.bounds.hi, f.bounds.lo + 1) - f.bounds.lo) * 0.3125;
    } else {
      for (const std::string& c : f.choices)
        if (c != f.text_of(MacParams{})) v = c;
    }
    const std::string text = f.text(v);
    const std::string given = f.type == FieldType::boolean ? flag : flag + " " + text;
    const CliRun r = mactune("replay --engine ref --trace '" + path("t.safetensors") + "' " +
                             given + " --json '" + path("one.json") + "'");
    ASSERT_EQ(r.rc, 0) << given << ": " << r.err;
    const auto doc = nlohmann::json::parse(slurp(path("one.json")));
    const auto& got = doc["layers"][0][std::string(f.name)];
    if (f.type == FieldType::boolean)
      EXPECT_EQ(got.get<bool>(), std::get<bool>(v)) << flag;
    else if (f.type == FieldType::integer)
      EXPECT_EQ(got.get<std::int64_t>(), std::get<std::int64_t>(v)) << flag;
    else if (f.type == FieldType::real)
      EXPECT_EQ(got.get<double>(), std::get<double>(v)) << flag;
    else
      EXPECT_EQ(got.get<std::string>(), text) << flag;
  }
}

TEST_F(ReplayCli, CalibrateWritesALoadableSchedule) {
  write("t.safetensors", small_trace(64));
  const CliRun r =
      mactune("calibrate --engine ref --trace '" + path("t.safetensors") +
              "' --K 16 --r 4,8 --taus 0.1,0.5,1 --max-err 0.05 -o '" + path("s.yaml") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Pareto front of layer 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pick for layer 3"), std::string::npos) << r.out;
  const LayerSchedule s = load_layer_schedule(path("s.yaml"));
  ASSERT_EQ(s.layers.count(3), 1u);
  EXPECT_EQ(s.for_layer(3).ring_capacity, 16);
  const CliRun missing = mactune("calibrate --trace '" + path("t.safetensors") + "' -o x.yaml");
  EXPECT_EQ(missing.rc, 2);  // --max-err is required
}

// ---- Values (issue 30): thread counts, trace values, eligibility, lists.

// The trace's first query value set to `x` (a float the file holds exactly).
std::vector<std::byte> trace_with_value(float x, const char* tensor = "layer3.q_pre") {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& y : v) y = d(rng);
    return v;
  };
  std::vector<TensorToWrite> t = {{"layer3.q_pre", {48, 4, 16}, values(48 * 64)},
                                  {"layer3.k_pre", {48, 2, 16}, values(48 * 32)},
                                  {"layer3.v", {48, 2, 16}, values(48 * 32)}};
  for (auto& one : t)
    if (one.name == tensor) one.values[5] = x;
  return write_safetensors(t, {{"rope_theta", "10000"}});
}

void expect_one_line(const CliRun& r, std::initializer_list<const char*> parts) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << p << " in " << r.err;
}

TEST_F(ReplayCli, ThreadsAboveTheMachineBoundAreRefused) {
  write("t.safetensors", small_trace());
  expect_one_line(
      mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --threads 600"),
      {"threads = 600: at most"});
  expect_one_line(mactune("calibrate --engine ref --trace '" + path("t.safetensors") +
                          "' --max-err 0.1 -o '" + path("s.yaml") + "' --threads 600"),
                  {"threads = 600: at most"});
  EXPECT_FALSE(fs::exists(path("s.yaml")));
}

// Threads that cannot start (stacks of 256 MiB in 3 GB of address space: a dozen fit): one
// line, exit 2, no hang (std::system waits: a hang would time the whole test out) and no abort.
TEST_F(ReplayCli, ThreadsThatCannotStartAreOneLine) {
  write("t.safetensors", small_trace());
  const CliRun r =
      mactune_limited("ulimit -s 262144 && ulimit -v 3000000",
                      "replay --engine ref --trace '" + path("t.safetensors") + "' --threads 60");
  expect_one_line(r, {"threads = 60: could start only", "worker threads"});
}

TEST_F(ReplayCli, HugeFiniteTraceValueIsRefusedWithItsIndex) {
  write("t.safetensors", trace_with_value(3e38f));
  expect_one_line(mactune("replay --engine ref --trace '" + path("t.safetensors") + "'"),
                  {"tensor 'layer3.q_pre' holds 3e+38 at [0, 0, 5]", "2^56"});
}

TEST_F(ReplayCli, ValueBeyondF16IsRefusedForAnF16Cache) {
  write("t.safetensors", trace_with_value(1e5f, "layer3.k_pre"));
  expect_one_line(
      mactune("replay --engine ref --kv-dtype f16 --trace '" + path("t.safetensors") + "'"),
      {"k_pre holds", "beyond f16's range"});
  EXPECT_EQ(
      mactune("replay --engine ref --kv-dtype f32 --trace '" + path("t.safetensors") + "'").rc, 0);
}

TEST_F(ReplayCli, MinContextPastTheTraceIsRefused) {
  write("t.safetensors", small_trace());
  expect_one_line(
      mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --min-context 100"),
      {"layer 3 has 48 steps, none at or past --min-context 100"});
  expect_one_line(mactune("calibrate --engine ref --trace '" + path("t.safetensors") +
                          "' --max-err 0.1 --min-context 48 -o '" + path("s.yaml") + "'"),
                  {"none at or past --min-context 48"});
  EXPECT_FALSE(fs::exists(path("s.yaml"))) << "a schedule from no data";
}

TEST_F(ReplayCli, LayerOrSettingListedTwiceIsRefused) {
  write("t.safetensors", small_trace());
  expect_one_line(
      mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --layers 3,3"),
      {"--layers", "given twice"});
  expect_one_line(mactune("calibrate --engine ref --trace '" + path("t.safetensors") +
                          "' --max-err 0.1 --taus 0.5,0.5 -o '" + path("s.yaml") + "'"),
                  {"--taus", "given twice"});
  expect_one_line(mactune("replay --engine ref --trace '" + path("t.safetensors") + "' --K ''"),
                  {"--K", "an empty value"});
}

}  // namespace
}  // namespace mactune::replay
