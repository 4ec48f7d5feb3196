// `mactune tune SPEC --search halving --replay EXHAUSTIVE.db` through the real binary, over
// synthetic exhaustive databases whose samples the test chooses: a clearly best config is
// found for less sampling time; the halving trap (a config whose first samples are slow) is
// fallen into exactly as the live search would fall into it; bad input is one line, exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <regex>

#include "cli_util.h"
#include "db/store.h"
#include "tuner/decide/store_io.h"
#include "tuner/search/dry_run.h"
#include "tuner/search/sweep.h"

namespace mactune::tuner {
namespace {

using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

// One bucket (b=1, ctx 512), hit rates 0 and 1, 4 configs (chunk_tokens); 10 samples, so the
// brief rounds take 2 and 4 and 8 samples; bucket interleaving, as cpu-wide.
std::string replay_spec(const std::string& name, const std::string& chunks = "[32, 64, 128, 256]",
                        const std::string& search = "halving") {
  return tiny_spec(name, "[1]", "[512]", "[0, 1]", chunks, 10, "bucket") +
         "search: {strategy: " + search + ", first_samples: 2}\n";
}

// Sample k of a side of a point, seconds.
using SampleFn = std::function<double(const TunePoint&, bool mac, int k)>;

// An "exhaustive" database of the spec's points: every point's two rows, `count` samples each
// (0: rows without samples, as before schema v5), drawn from `fn`.
void write_exhaustive(const std::string& spec_path, const std::string& db_path, const SampleFn& fn,
                      int count = 10) {
  const SweepPlan plan = plan_sweep(spec_path);
  db::Store s = db::Store::open(db_path);
  DeviceFingerprint dev;
  dev.backend = Backend::cpu;
  dev.name = "synthetic cpu";
  dev.compute_units = 2;
  dev.arch = "generic";
  const db::Id device = s.upsert_device(dev);
  const db::Id build = s.upsert_build({"test", "test", "test", "", ""});
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const TunePoint& p = plan.points[i];
    const db::Id w = s.upsert_workload(to_db_workload(p));
    std::vector<db::Measurement> rows;
    for (const bool mac : {false, true}) {
      const std::string& name = mac ? plan.names[i].first : plan.names[i].second;
      db::Measurement m;
      m.point = {device,
                 build,
                 s.upsert_instance(InstanceDesc::named(name, mactune::Backend::cpu,
                                                       mac ? Family::mac : Family::full)),
                 p.launch_text(),
                 w,
                 plan.policy,
                 plan.cold};
      std::vector<double> samples;
      for (int k = 0; k < std::max(count, 3); ++k) samples.push_back(fn(p, mac, k));
      m.stats = summarize(samples);
      if (count > 0) m.samples = samples;
      m.stop_reason = StopReason::max_samples;
      rows.push_back(m);
    }
    s.record_measurements(rows);
  }
}

// A deterministic wobble of a few percent, different per sample and config.
double wobble(const TunePoint& p, bool mac, int k) {
  return 1.0 + 0.03 * std::sin(1.7 * k + 0.37 * static_cast<double>(p.launch_text().size()) +
                               (mac ? 0.5 : 0.0) + 3.1 * p.forced.hit_rate);
}
bool has_chunk(const TunePoint& p, int chunk) {
  return p.launch_text().find("chunk_tokens=" + std::to_string(chunk) + ",") != std::string::npos ||
         p.launch_text().ends_with("chunk_tokens=" + std::to_string(chunk));
}

// The summary line's numbers: MAC agreement and the sampling fraction (percent).
struct Summary {
  int mac_agree = -1, buckets = -1;
  double percent = -1;
};
Summary summary_of(const std::string& out) {
  static const std::regex re(
      R"(replay: (\d+) buckets: MAC picks agree in (\d+) of \d+.*= ([0-9.]+)%)");
  std::smatch m;
  Summary s;
  if (std::regex_search(out, m, re)) {
    s.buckets = std::stoi(m[1]);
    s.mac_agree = std::stoi(m[2]);
    s.percent = std::stod(m[3]);
  }
  return s;
}

TEST(ReplayCli, ClearlyBestConfigIsPickedForLessSamplingTime) {
  TempDir dir;
  dir.write("r.yaml", replay_spec("r"));
  // MAC at chunk_tokens=64 is half the time of the others; the baselines are all alike.
  write_exhaustive(dir.file("r.yaml"), dir.file("ex.db"), [](const TunePoint& p, bool mac, int k) {
    const double base = mac ? (has_chunk(p, 64) ? 50e-6 : 100e-6) : 120e-6;
    return base * wobble(p, mac, k);
  });
  const auto r = run_mactune(dir, {"tune", "r.yaml", "--replay", "ex.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Summary s = summary_of(r.out);
  EXPECT_EQ(s.buckets, 1) << r.out;
  EXPECT_EQ(s.mac_agree, 1) << r.out;
  EXPECT_GT(s.percent, 0) << r.out;
  EXPECT_LT(s.percent, 100) << r.out;
  // The bucket's row: halving's and exhaustive's pick are chunk_tokens=64, the same.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\| 4 -\(2\)-> 2 -\(4\)-> 1 final \| [^|]*chunk_tokens=64[^|]* \| )"
                        R"([^|]*chunk_tokens=64[^|]* \| same \|)")))
      << r.out;
}

TEST(ReplayCli, FallsIntoTheHalvingTrapAsTheLiveSearchWould) {
  TempDir dir;
  dir.write("t.yaml", replay_spec("t"));
  // chunk_tokens=64 is the best config over all 10 samples (median and quartiles 40 us), but
  // its first 2 are slow (300 us): round 0 (2 samples each) drops it, and chunk_tokens=128
  // (90 us) wins; the others take 100 us.
  write_exhaustive(dir.file("t.yaml"), dir.file("ex.db"), [](const TunePoint& p, bool mac, int k) {
    double base = 120e-6;
    if (mac)
      base = has_chunk(p, 64) ? (k < 2 ? 300e-6 : 40e-6) : has_chunk(p, 128) ? 90e-6 : 100e-6;
    return base * wobble(p, mac, k);
  });
  const auto r = run_mactune(dir, {"tune", "t.yaml", "--replay", "ex.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(summary_of(r.out).mac_agree, 0) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\| 4 -\(2\)-> 2 -\(4\)-> 1 final \| [^|]*chunk_tokens=128[^|]* \| )"
                        R"([^|]*chunk_tokens=64[^|]* \| differs \|)")))
      << r.out;
}

TEST(ReplayCli, BadInputIsOneLineExit2) {
  TempDir dir;
  dir.write("r.yaml", replay_spec("r"));
  dir.write("small.yaml", replay_spec("small", "[32, 64]"));
  dir.write("ex.yaml", replay_spec("ex", "[32, 64, 128, 256]", "exhaustive"));
  const SampleFn flat = [](const TunePoint& p, bool mac, int k) {
    return 1e-4 * wobble(p, mac, k);
  };
  write_exhaustive(dir.file("small.yaml"), dir.file("small.db"), flat);
  write_exhaustive(dir.file("r.yaml"), dir.file("nosamples.db"), flat, 0);
  write_exhaustive(dir.file("r.yaml"), dir.file("ok.db"), flat);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"tune", "r.yaml", "--replay", "small.db"},
       "small.db: holds no complete measurement of 4 of the 8 points of r.yaml"},
      {{"tune", "r.yaml", "--replay", "nosamples.db"}, "hold no samples"},
      {{"tune", "r.yaml", "--replay", "absent.db"}, "absent.db"},
      {{"tune", "ex.yaml", "--replay", "ok.db"}, "add --search halving"},
      {{"tune", "r.yaml", "--replay", "ok.db", "--db", "out.db"}, "takes no"},
  };
  for (const Case& c : cases) {
    const auto r = run_mactune(dir, c.args);
    EXPECT_EQ(r.rc, 2) << c.args[3] << ": " << r.err;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find("mactune: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << "\n" << r.err;
  }
  // The exhaustive spec replays with --search halving.
  const auto r = run_mactune(dir, {"tune", "ex.yaml", "--search", "halving", "--replay", "ok.db"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

}  // namespace
}  // namespace mactune::tuner
