// Per-layer schedules: YAML round trip, errors that name the line, and a two-layer decoder
// that runs each layer with the settings the schedule gives it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/reference.h"
#include "replay/schedule.h"
#include "replay_fixtures.h"

namespace mactune::replay {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("mactune_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

bool same(const MacParams& a, const MacParams& b) {
  return a.ring_capacity == b.ring_capacity && a.band == b.band && a.tau == b.tau &&
         a.pick == b.pick && a.min_context == b.min_context && a.summary_dtype == b.summary_dtype &&
         a.rectify == b.rectify && a.accept_eps == b.accept_eps &&
         a.subtract_guard == b.subtract_guard && a.group_hits == b.group_hits;
}

TEST(LayerSchedule, RoundTripEveryField) {
  LayerSchedule s;
  MacParams a;
  a.ring_capacity = 1024, a.band = 64, a.tau = 0.93, a.pick = PickRule::newest;
  a.min_context = 0, a.summary_dtype = DType::bf16, a.accept_eps = 0.25, a.group_hits = true;
  MacParams b;
  b.tau = 1.0, b.rectify = Rectify::subtract, b.subtract_guard = 1e-3;
  s.layers = {{0, a}, {7, b}};
  s.fallback = MacParams{};
  s.fallback->tau = 0.1 + 0.2;  // not exactly representable: must read back bit for bit
  s.measured[0] = {{"skip_ratio", 0.125}, {"rel_err_p99", 0.0078}};
  s.provenance = ScheduleProvenance{"p99", 0.01, "cpu", "f32", {{"a \"b\".safetensors", "ab12"}}};
  const std::string path = temp_path("roundtrip.yaml");
  save_layer_schedule(path, s, "two lines\nof comment");
  const LayerSchedule r = load_layer_schedule(path);
  std::filesystem::remove(path);
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_TRUE(same(r.layers.at(0), a));
  EXPECT_TRUE(same(r.layers.at(7), b));
  ASSERT_TRUE(r.fallback);
  EXPECT_TRUE(same(*r.fallback, *s.fallback));
  EXPECT_EQ(r.measured.at(0).at("rel_err_p99"), 0.0078);
  ASSERT_TRUE(r.provenance);
  EXPECT_EQ(r.provenance->traces.at(0).name, "a \"b\".safetensors");
  EXPECT_EQ(r.provenance->max_err, 0.01);
  EXPECT_TRUE(same(r.for_layer(3), *s.fallback));  // unlisted: the default
  EXPECT_TRUE(r.mac_enabled(0));
  EXPECT_FALSE(r.mac_enabled(7));
}

// A value of row `f` other than its default, inside its range (and choices).
Scalar other_value(const Field<MacParams>& f) {
  const Scalar d = f.default_value();
  switch (f.type) {
    case FieldType::integer: {
      const auto def = std::get<std::int64_t>(d);
      const auto lo = static_cast<std::int64_t>(f.bounds.lo) + (f.bounds.lo_open ? 1 : 0);
      return lo != def ? lo : lo + 1;
    }
    case FieldType::real: {
      const double lo = f.bounds.lo, hi = std::min(f.bounds.hi, lo + 1.0);
      const double mid = lo + (hi - lo) * 0.3125;  // inside open ends too
      return mid != std::get<double>(d) ? mid : lo + (hi - lo) * 0.625;
    }
    case FieldType::boolean:
      return !std::get<bool>(d);
    case FieldType::choice:
      for (const std::string& c : f.choices)
        if (c != std::get<std::string>(d)) return c;
      break;
    default:
      break;
  }
  ADD_FAILURE() << "no other value for " << f.name;
  return d;
}

// The schedule's keys are MacParams' field table: each row, set alone to a value other than
// its default, is written once under its name and reads back (a new row needs no code here).
TEST(LayerSchedule, EveryRowOfTheTableRoundTrips) {
  for (const Field<MacParams>& f : fields_of<MacParams>()) {
    MacParams p;
    f.set(p, f.check(other_value(f)));
    ASSERT_NE(f.text_of(p), f.text_of(MacParams{})) << f.name;
    LayerSchedule s;
    s.layers = {{3, p}};
    const std::string text = layer_schedule_yaml(s, "");
    const std::string key = "\n    " + std::string(f.name) + ": ";
    const std::size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos) << f.name << " is not written:\n" << text;
    EXPECT_EQ(text.find(key, at + 1), std::string::npos) << f.name << " is written twice";
    const LayerSchedule r = parse_layer_schedule(text, "s.yaml");
    EXPECT_EQ(f.text_of(r.layers.at(3)), f.text_of(p)) << f.name;
    EXPECT_TRUE(same(r.layers.at(3), p)) << f.name;
  }
}

std::string error_of(const std::string& text) {
  try {
    parse_layer_schedule(text, "s.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, std::initializer_list<const char*> parts) {
  const std::string msg = error_of(text);
  ASSERT_FALSE(msg.empty()) << "accepted:\n" << text;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

const std::string kHead = "format: mactune-layer-schedule\nversion: 1\n";

TEST(LayerSchedule, ErrorsNameTheLine) {
  expect_error(kHead + "layers:\n  - layer: 2\n    K: 512\n    tua: 0.5\n",
               {"s.yaml:6:",
                "unknown key 'tua' in layer 2 (expected K, r, tau, summary_dtype, "
                "pick, rectify, accept_eps, min_context, subtract_guard, group_hits)"});
  expect_error(kHead + "layers:\n  - layer: 2\n    K: many\n",
               {"s.yaml:5:", "K: expected a number, got 'many'"});
  expect_error(kHead + "layers:\n  - layer: 2\n    tau: -0.5\n",
               {"s.yaml:5:", "tau: value -0.5 is out of range (tau must be in [0, 1e+06])"});
  // A row's range (the table's) and the settings together (validate) are both checked.
  expect_error(kHead + "layers:\n  - layer: 2\n    K: 2M\n", {"s.yaml:5:", "K: value 2097152"});
  expect_error(kHead + "layers:\n  - layer: 2\n    subtract_guard: 1\n",
               {"s.yaml:5:", "subtract_guard: value 1 is out of range"});
  expect_error(kHead + "layers:\n  - layer: 2\n    K: [1, 2]\n",
               {"s.yaml:5:", "K must be a single value"});
  expect_error(kHead + "layers:\n  - layer: 2\n  - layer: 2\n",
               {"s.yaml:5:", "layer 2 is listed twice"});
  expect_error(kHead + "layers:\n  - layer: 1\n    pick: closest\n",
               {"s.yaml:5:", "unknown pick rule 'closest'"});
  expect_error(kHead + "layers:\n  - K: 5\n", {"s.yaml:4:", "has no 'layer'"});
  expect_error(kHead + "layers: 3\n", {"'layers' must be a list"});
  expect_error("version: 1\nlayers: []\n", {"not a layer schedule"});
  expect_error("format: mactune-layer-schedule\nversion: 9\nlayers: []\n",
               {"unsupported schedule version"});
  expect_error(kHead + "layers: [\n", {"s.yaml:", "not valid YAML"});
  expect_error(kHead + "colour: red\nlayers: []\n", {"s.yaml:3:", "unknown key 'colour'"});
  EXPECT_EQ(error_of(kHead + "layers:\n  - layer: 2\n    tau: 0.5\n"), "");
  try {
    parse_layer_schedule(kHead + "layers:\n  - layer: 2\n", "s.yaml").for_layer(3);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no entry for layer 3"), std::string::npos);
  }
  EXPECT_THROW(load_layer_schedule(temp_path("does-not-exist.yaml")), InputError);
}

// A decoder with two layers, each run by its own session with the settings the schedule
// gives: layer 0 reuses (tau 0.6), layer 1 never does (tau 1). Both layers see the code_1k
// query stream (the file holds one layer); the first 512 steps keep the fp64 runs short.
TEST(LayerSchedule, DecoderRunsEachLayerWithItsSettings_Code1k_512Steps) {
  const std::string path = temp_path("decoder.yaml");
  {
    std::ofstream out(path);
    out << kHead
        << "default: {K: 256, r: 64, min_context: 0}\n"
           "layers:\n  - layer: 0\n    tau: 0.6\n  - layer: 1\n    tau: 1.0\n";
  }
  const LayerSchedule sched = load_layer_schedule(path);
  std::filesystem::remove(path);
  const auto& t = testing::loaded_trace("code_1k.safetensors");
  const TraceLayer& L = t.layer;
  Problem shape = t.trace.problem(2, DType::f32);

  std::vector<ref::Session> layers;
  for (int l = 0; l < 2; ++l) {
    layers.emplace_back(shape, sched.for_layer(l), t.trace.rope_theta(), sched.mac_enabled(l));
    layers.back().add_request();
  }
  EXPECT_EQ(sched.for_layer(0).ring_capacity, 256);  // from the default entry
  long long hits[2] = {0, 0}, read[2] = {0, 0};
  double worst_off = 0;  // layer 1 runs plain full attention: its output is o_full
  const int steps = 512, id = 0;
  const std::size_t row = std::size_t(L.q_heads) * L.head_dim;
  for (int m = 0; m < steps; ++m) {
    for (int l = 0; l < 2; ++l) {
      const auto res =
          layers[std::size_t(l)].step(std::span(&id, 1), std::span(L.q_row(m), row),
                                      std::span(L.k_row(m), std::size_t(L.kv_heads) * L.head_dim),
                                      std::span(L.v_row(m), std::size_t(L.kv_heads) * L.head_dim));
      hits[l] += res.stats.hit_heads;
      read[l] += res.stats.kv_tokens_read;
      if (l == 1)
        for (std::size_t i = 0; i < row; ++i)
          worst_off = std::max(worst_off, std::abs(res.out[i] - t.exact.out[m * row + i]));
    }
  }
  EXPECT_GT(hits[0], steps * L.q_heads / 4);  // the reusing layer hits on this stream
  EXPECT_EQ(hits[1], 0);
  EXPECT_LT(read[0], read[1]);                        // and reads less KV
  EXPECT_EQ(read[1], 2LL * steps * (steps + 1) / 2);  // every token, both KV heads
  EXPECT_LT(worst_off, 1e-12);
}

}  // namespace
}  // namespace mactune::replay
