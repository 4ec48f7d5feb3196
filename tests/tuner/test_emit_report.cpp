// Decisions -> dispatch table (intervals, choices, break-even), the report and the SVG writer,
// on synthetic measurements stored through the db layer.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "db/store.h"
#include "dispatcher/dispatch.h"
#include "kernels/cpu/session.h"
#include "tuner/decide/emit.h"
#include "tuner/measure/progress.h"
#include "tuner/report/report.h"
#include "tuner/report/report_summary.h"
#include "tuner/report/svg.h"
#include "tuner/tune/tune.h"

namespace mactune::tuner {
namespace {

using testing::TempDir;

// Stores a synthetic pair: MAC takes `mac_ms`, full `full_ms`, both with a 1% half-IQR.
void store_pair(db::Store& s, db::Id dev, db::Id build, db::Id run, int batch, int context,
                double hit, const std::string& params, double mac_ms, double full_ms) {
  TunePoint p;
  p.shape.batch = batch;
  p.shape.q_heads = 32;
  p.shape.kv_heads = 8;
  p.shape.head_dim = 128;
  p.context = context;
  p.forced.hit_rate = hit;
  const db::Id w = s.upsert_workload(to_db_workload(p));
  const std::string isa =
      cpu::instances().front().name.find("avx512") != std::string::npos ? "avx512" : "avx2";
  for (bool mac : {false, true}) {
    const std::string name = cpu::instance_name(mac, isa, 128, DType::bf16);
    InstanceDesc info =
        InstanceDesc::named(name, mactune::Backend::cpu, mac ? Family::mac : Family::full);
    for (const auto& i : cpu::instances())
      if (i.name == name) info = i;
    db::Measurement m;
    m.point = {dev, build, s.upsert_instance(info), params, w, "steady_clock", true};
    m.run_id = run;
    const double t = (mac ? mac_ms : full_ms) * 1e-3;
    m.stats = {10, t, t * 0.99, t * 1.01, t * 0.98, t * 1.05, t, 0, 0.01};
    s.record_measurement(m);
  }
}

class EmitFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu::instances().empty()) GTEST_SKIP() << "no CPU instances in this build";
    store_.emplace(db::Store::open(dir_.file("e.db")));
    db::Store& s = *store_;
    dev_ = s.upsert_device(cpu_fingerprint());
    build_ = s.upsert_build({"test", "gcc", "h", "0", "t"});
    run_ = s.begin_run({.spec_text = "t", .device_id = dev_, .build_id = build_});
    // Two batches x two contexts; MAC wins from hit 0.5 at 64K, only at 1 at 4K batch 1, never
    // at 4K batch 8; chunk 256 is 20% faster than chunk 64 everywhere for both sides.
    for (int b : {1, 8})
      for (int c : {4096, 65536})
        for (const auto& [params, f] :
             {std::pair{"chunk_tokens=64", 1.2}, std::pair{"chunk_tokens=256", 1.0}})
          for (double h : {0.0, 0.5, 1.0}) {
            const double full = f * b * c * 1e-4;
            double mac = full * 1.1;  // slower at hit 0
            if (c == 65536 && h > 0) mac = full * (1.0 - 0.9 * h);
            if (c == 4096 && b == 1 && h == 1.0) mac = full * 0.5;
            if (c == 4096 && b == 1 && h == 0.5) mac = full * 1.005;  // too close to call
            store_pair(s, dev_, build_, run_, b, c, h, params, mac, full);
          }
  }
  Selection sel() const { return {dev_, build_, "steady_clock", true}; }

  TempDir dir_;
  std::optional<db::Store> store_;
  db::Id dev_ = 0, build_ = 0, run_ = 0;
};

TEST_F(EmitFixture, DecisionsAreStoredAndTheTableIsPiecewise) {
  const Decided d = decide_and_store(*store_, sel(), {});
  ASSERT_EQ(d.decisions.size(), 4u);
  EXPECT_EQ(d.loaded.pairs.size(), 24u);
  EXPECT_EQ(store_->best_configs(dev_).size(), 8u);
  const auto bes = store_->break_evens(dev_);
  ASSERT_EQ(bes.size(), 4u);
  for (const auto& b : bes) {
    if (b.bucket.context == 65536) {
      EXPECT_NE(b.notes.find(" bracket=(0,0.5];"), std::string::npos) << b.notes;
    }
  }
  for (const auto& d2 : d.decisions) {
    // The stored "chunk_tokens=256" reads back as the whole (typed) launch config.
    EXPECT_EQ(launch_text(d2.mac.config.launch),
              "threads=0,chunk_tokens=256,block_rows=16,match_mode=scan");
    EXPECT_EQ(d2.full.config.launch, d2.mac.config.launch);
    const BreakEvenStatus want = d2.bucket.context == 65536 ? BreakEvenStatus::ok
                                 : d2.bucket.batch == 1     ? BreakEvenStatus::ok
                                                            : BreakEvenStatus::never;
    EXPECT_EQ(d2.break_even.status, want) << d2.bucket.key();
    if (d2.bucket.context == 65536) {
      EXPECT_DOUBLE_EQ(*d2.break_even.hit_rate, 0.5);
    } else if (d2.bucket.batch == 1) {
      EXPECT_DOUBLE_EQ(*d2.break_even.hit_rate, 1.0);
    }
  }

  const auto t = make_table(d, "e.db");
  ASSERT_EQ(t.entries.size(), 4u);
  EXPECT_EQ(dispatch::check_structure(t), "");
  for (const auto& e : t.entries) {
    EXPECT_EQ(e.batch.hi, e.batch.lo == 1 ? std::optional<std::int64_t>(7) : std::nullopt);
    EXPECT_EQ(e.context.hi, e.context.lo == 1 ? std::optional<std::int64_t>(65535) : std::nullopt);
    EXPECT_TRUE(e.batch.lo == 1 || e.batch.lo == 8);
    EXPECT_TRUE(e.context.lo == 1 || e.context.lo == 65536);
    ASSERT_TRUE(e.mac);
    EXPECT_EQ(e.mac->ring_capacity, 512);
    EXPECT_EQ(e.mac->band, 256);
    EXPECT_FALSE(e.mac->tau) << "hits were forced: tau stays the engine's";
    EXPECT_EQ(std::get<std::int64_t>(e.mac->params.at("chunk_tokens")), 256);
    EXPECT_EQ(std::get<std::string>(e.mac->params.at("summary_dtype")), "f32");
    // Every MAC setting but K, r (their own keys) and tau reaches the table.
    EXPECT_EQ(std::get<double>(e.mac->params.at("accept_eps")), 1.0);
    EXPECT_EQ(std::get<std::int64_t>(e.mac->params.at("min_context")), 2048);
  }
  const std::string refusal =
      write_dispatch(t, dir_.file("d/t.json"), dir_.file("d/t.h"), cpu_fingerprint());
  EXPECT_EQ(refusal, "");
  // The loaded table answers like the decisions: batch 2 falls in [1, 7], context 100K in
  // [64K, inf): the (1, 64K) bucket, break-even 0.5.
  const auto disp = dispatch::Dispatcher::load(dir_.file("d/t.json"));
  ASSERT_TRUE(disp.table());
  Problem p;
  p.batch = 2;
  EXPECT_TRUE(disp.select(p, 100000, 0.6).use_mac());
  EXPECT_FALSE(disp.select(p, 100000, 0.4).use_mac());
  p.batch = 16;
  EXPECT_FALSE(disp.select(p, 2048, 1.0).use_mac()) << "never wins at small contexts, batch 8+";
}

TEST_F(EmitFixture, ReportWritesMarkdownAndPlots) {
  const Decided d = decide_only(*store_, sel(), {});
  EXPECT_EQ(store_->best_configs(dev_).size(), 0u) << "decide_only writes nothing";
  const auto files = write_report(*store_, d, dir_.file("rep"));
  ASSERT_EQ(files.size(), 3u);
  const std::string md = testing::read_file(dir_.file("rep/report.md"));
  EXPECT_NE(md.find("## hd128_q32_kv8_bf16_p16"), std::string::npos);
  EXPECT_NE(md.find("| 65536 | 8 |"), std::string::npos) << md;
  EXPECT_NE(md.find("never"), std::string::npos);
  const std::string svg = testing::read_file(dir_.file("rep/speedup_hd128_q32_kv8_bf16_p16.svg"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("hit rate 0.5"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos) << "the 1x line";
  EXPECT_NE(summary_table(d.decisions).find("| hd128_q32_kv8_bf16_p16_b8_c4096 |"),
            std::string::npos);
  // The break-even plot: the brackets as bands (64K: (0, 0.5]; 4K batch 1: [0.5, 1]), the
  // model's prediction dashed, in its batch's colour; the bracket in the table; the model's
  // section with its held-out error.
  EXPECT_NE(md.find("| 0.5 (0, 0.5] |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 [0.5, 1] |"), std::string::npos) << md << "a tie at 0.5: closed there";
  EXPECT_NE(md.find("## Cost model"), std::string::npos);
  EXPECT_NE(md.find("| held out | points | median |"), std::string::npos);
  const std::string be = testing::read_file(dir_.file("rep/breakeven_hd128_q32_kv8_bf16_p16.svg"));
  EXPECT_NE(be.find("class=\"band\""), std::string::npos);
  EXPECT_NE(be.find("batch 1 (model)"), std::string::npos);
  EXPECT_NE(be.find("stroke-dasharray=\"6,4\""), std::string::npos);
}

TEST_F(EmitFixture, BreakEvenChartBandsTheBracketAndDashesTheModel) {
  const Decided d = decide_only(*store_, sel(), {});
  const svg::Chart c = break_even_chart(d.decisions);
  ASSERT_EQ(c.panels.size(), 1u);
  ASSERT_EQ(c.panels[0].series.size(), 2u) << "no model: the measured lines only";
  const svg::Series& b1 = c.panels[0].series[0];
  EXPECT_EQ(b1.label, "batch 1");
  EXPECT_EQ(b1.x, (std::vector<double>{4096, 65536}));
  EXPECT_EQ(b1.band_lo, (std::vector<double>{0.5, 0}));
  EXPECT_EQ(b1.band_hi, (std::vector<double>{1, 0.5}));
  EXPECT_FALSE(b1.dashed);
  const svg::Series& b8 = c.panels[0].series[1];
  ASSERT_EQ(b8.off_scale.size(), 1u) << "4K batch 8: never";
  EXPECT_EQ(b8.off_scale[0].second, "never");

  const auto rows = load_model_rows(*store_, sel());
  EXPECT_EQ(rows.size(), 48u);
  const DeviceModels m = fit_device_models(rows, d.device);
  const svg::Chart cm = break_even_chart(d.decisions, {&m, &rows});
  ASSERT_EQ(cm.panels[0].series.size(), 4u);
  const svg::Series& pred = cm.panels[0].series[2];
  EXPECT_EQ(pred.label, "batch 1 (model)");
  EXPECT_EQ(pred.color_of, "batch 1");
  EXPECT_TRUE(pred.dashed);
  EXPECT_EQ(pred.x.front(), 4096);
  EXPECT_GE(pred.x.back(), 4 * 65536 * 0.99);
  const std::string out = svg::render(cm);
  // One band polygon per run of bracketed points: batch 1 one run of two points, batch 8 one
  // point (64K).
  std::size_t bands = 0;
  for (auto at = out.find("class=\"band\""); at != std::string::npos;
       at = out.find("class=\"band\"", at + 1))
    ++bands;
  EXPECT_EQ(bands, 2u);
}

TEST_F(EmitFixture, SelectRowsPicksThisDeviceAndTheLatestBuild) {
  const Selection s = select_rows(*store_, "auto", cpu_fingerprint());
  EXPECT_EQ(s.device_id, dev_);
  EXPECT_EQ(s.build_id, build_);
  EXPECT_EQ(s.policy, "steady_clock");
  EXPECT_THROW(select_rows(*store_, "*no such device*", cpu_fingerprint()), InputError);
}

// Launch text is read back by the engine's field table: each value with its field's type,
// never guessed from its characters; a key the table lacks is refused.
TEST(TunerEmit, ParamsKeepTheirTypes) {
  const Params cpu = to_params(parse_launch(Backend::cpu, "threads=0,chunk_tokens=256,isa=avx2"));
  EXPECT_EQ(std::get<std::int64_t>(cpu.at("threads")), 0);
  EXPECT_EQ(std::get<std::int64_t>(cpu.at("chunk_tokens")), 256);
  EXPECT_EQ(cpu.count("isa"), 0u) << "the ISA is spelt in the instance name";
  const Params cuda = to_params(parse_launch(Backend::cuda, "graph=true,match=auto,min_chunk=64"));
  EXPECT_EQ(std::get<bool>(cuda.at("graph")), true);
  EXPECT_EQ(std::get<std::string>(cuda.at("match")), "auto");
  // min_chunk, the CUDA spelling of earlier releases (and of their databases' params), reads as
  // chunk_tokens, the one name both engines give the chunk knob.
  EXPECT_EQ(std::get<std::int64_t>(cuda.at("chunk_tokens")), 64);
  EXPECT_EQ(cuda.count("min_chunk"), 0u);
  EXPECT_THROW(parse_launch(Backend::cpu, "threads=two"), InputError);
  EXPECT_THROW(parse_launch(Backend::cpu, "scale=0.5"), InputError);
}

TEST(TunerSvg, TicksAndLabels) {
  EXPECT_EQ(svg::ticks(svg::Scale::log2, 1, 64), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(svg::ticks(svg::Scale::log10, 0.5, 30),
            (std::vector<double>{0.5, 1, 2, 5, 10, 20, 50}));
  EXPECT_EQ(svg::ticks(svg::Scale::log10, 0.75, 2.45), (std::vector<double>{0.7, 1, 1.5, 2, 3}))
      << "a speedup axis spans the data, not whole decades";
  EXPECT_EQ(svg::ticks(svg::Scale::log10, 0.01, 1000),
            (std::vector<double>{0.01, 0.1, 1, 10, 100, 1000}));
  EXPECT_EQ(svg::ticks(svg::Scale::linear, 0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(svg::tick_label(131072), "128K");
  EXPECT_EQ(svg::tick_label(1048576), "1M");
  EXPECT_EQ(svg::tick_label(0.5), "0.5");
}

TEST(TunerSvg, RendersSeriesGapsAndOffScaleMarkers) {
  svg::Chart c;
  c.title = "t <&>";
  c.x_scale = svg::Scale::log2;
  svg::Panel p;
  p.title = "panel";
  p.hlines = {1};
  svg::Series s;
  s.label = "a";
  s.x = {1, 2, 4};
  s.y = {1.5, std::nan(""), 3};
  s.off_scale = {{8, "never"}};
  p.series = {s};
  c.panels = {p};
  const std::string out = svg::render(c);
  EXPECT_NE(out.find("t &lt;&amp;&gt;"), std::string::npos) << "escaped";
  EXPECT_EQ(out.find(" L"), std::string::npos) << "the NaN splits the line into single points";
  EXPECT_NE(out.find("-> never"), std::string::npos);
  EXPECT_EQ(out.find("<polygon"), std::string::npos) << "no band given";
}

TEST(TunerSvg, BandsSpanLoToHiAndDashedSeriesShareTheirColour) {
  svg::Chart c;
  c.y_min = 0;
  c.y_max = 1;
  svg::Panel p;
  svg::Series m;
  m.label = "batch 1";
  m.x = {1, 2};
  m.y = {0.5, 0.5};
  m.band_lo = {0.25, 0.25};
  m.band_hi = {0.5, 0.75};
  svg::Series pred;
  pred.label = "batch 1 (model)";
  pred.color_of = "batch 1";
  pred.dashed = true;
  pred.markers = false;
  pred.x = {1, 2};
  pred.y = {0.4, 0.6};
  p.series = {m, pred};
  c.panels = {p};
  const std::string out = svg::render(c);
  const auto band = out.find("<polygon class=\"band\" points=\"");
  ASSERT_NE(band, std::string::npos);
  // Four corners: hi at x=1, hi at x=2, then lo back from x=2 to x=1. y: panel top 64, height
  // 220 over [0, 1]: 0.5 -> 174, 0.75 -> 119, 0.25 -> 229.
  const std::string pts = out.substr(band, out.find("fill=", band) - band);
  EXPECT_NE(pts.find(",174.0 "), std::string::npos) << pts;
  EXPECT_NE(pts.find(",119.0 "), std::string::npos) << pts;
  EXPECT_NE(pts.find(",229.0 "), std::string::npos) << pts;
  // The dashed path has the colour of the solid one, and no markers of its own.
  EXPECT_NE(out.find("stroke=\"#0072B2\" stroke-width=\"1.6\" stroke-dasharray=\"6,4\""),
            std::string::npos)
      << out;
  std::size_t circles = 0;
  for (auto at = out.find("<circle"); at != std::string::npos; at = out.find("<circle", at + 1))
    ++circles;
  EXPECT_EQ(circles, 2u);
}

TEST(TunerProgress, BarAndDurations) {
  EXPECT_EQ(Progress::format_duration(5), "5s");
  EXPECT_EQ(Progress::format_duration(185), "3m05s");
  EXPECT_EQ(Progress::format_duration(3725), "1h02m");
  EXPECT_EQ(Progress::bar(12, 48, 185, true, "b=4", 8), "[##------] 12/48 25%  ETA 3m05s  b=4");
  EXPECT_EQ(Progress::bar(0, 10, 0, false, "", 4), "[----] 0/10 0%  ETA ?");
}

}  // namespace
}  // namespace mactune::tuner
