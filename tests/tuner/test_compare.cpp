// `mactune compare`'s classifier and matcher (tuner/report/compare.h) on hand-made intervals and on
// databases written through the store API: SAME / FASTER / SLOWER / AMBIGUOUS at the edges of
// the rule, the latest row of a re-measured point, one-sided and failed points, two devices.
#include <gtest/gtest.h>

#include "tests/db/fixtures.h"
#include "tuner/decide/decide.h"
#include "tuner/report/compare.h"

namespace mactune::tuner {
namespace {

TimeStats interval(double q1, double median, double q3) {
  TimeStats s;
  s.samples = 9;
  s.q1_s = q1;
  s.median_s = median;
  s.q3_s = q3;
  s.min_s = q1 * 0.9;
  s.max_s = q3 * 1.1;
  s.mean_s = median;
  return s;
}

TEST(CompareClassify, SameWithinThresholdEvenWhenIntervalsAreDisjoint) {
  const TimeStats base = interval(0.999, 1.0, 1.001);
  EXPECT_EQ(classify_change(base, interval(1.039, 1.04, 1.041), 0.05), Change::same);
  EXPECT_EQ(classify_change(base, interval(0.959, 0.96, 0.961), 0.05), Change::same);
  EXPECT_EQ(classify_change(base, base, 0.0), Change::same);
}

TEST(CompareClassify, FasterAndSlowerNeedDisjointIntervalsBeyondThreshold) {
  const TimeStats base = interval(0.95, 1.0, 1.05);
  EXPECT_EQ(classify_change(base, interval(1.06, 1.10, 1.15), 0.05), Change::slower);
  EXPECT_EQ(classify_change(base, interval(0.80, 0.90, 0.94), 0.05), Change::faster);
  // Touching (q1 == base q3) is an overlap: the rule is strict, as in the decisions.
  EXPECT_EQ(classify_change(base, interval(1.05, 1.10, 1.15), 0.05), Change::ambiguous);
  EXPECT_EQ(interval_verdict(interval(1.05, 1.10, 1.15), base), Verdict::tie);
}

TEST(CompareClassify, OverlappingIntervalsBeyondThresholdAreAmbiguous) {
  const TimeStats base = interval(0.8, 1.0, 1.3);
  EXPECT_EQ(classify_change(base, interval(1.0, 1.2, 1.5), 0.05), Change::ambiguous);
  EXPECT_EQ(classify_change(base, interval(0.6, 0.85, 0.9), 0.05), Change::ambiguous);
  // A wider threshold makes the same pair SAME.
  EXPECT_EQ(classify_change(base, interval(1.0, 1.2, 1.5), 0.25), Change::same);
}

TEST(CompareClassify, MacOverFullIsTheWidestIntervalTheTwoIqrsAllow) {
  const TimeStats r = mac_over_full(interval(1.0, 2.0, 3.0), interval(4.0, 5.0, 8.0));
  EXPECT_DOUBLE_EQ(r.median_s, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(r.q1_s, 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(r.q3_s, 3.0 / 4.0);
}

// A database of one device: MAC and full rows at two hit rates and two chunk sizes.
struct Db {
  db::testing::TempDir dir;
  std::string path;
  db::Store store;
  db::Id dev = 0, build = 0, mac = 0, full = 0;
  explicit Db(const std::string& name, const DeviceFingerprint& d = db::testing::test_device(),
              const std::string& rev = "abc")
      : path(dir.file(name)), store(db::Store::open(path)) {
    dev = store.upsert_device(d);
    build = store.upsert_build(db::testing::test_build(rev));
    mac = store.upsert_instance(db::testing::test_instance("mac"));
    full = store.upsert_instance(db::testing::test_instance("full"));
  }
  void put(db::Id instance, const std::string& params, double hit, double median_s,
           const std::string& finished = "2026-12-01T10:00:00.000Z", db::Id build_id = 0,
           bool ok = true) {
    db::Measurement m;
    m.point = {dev,
               build_id ? build_id : build,
               instance,
               params,
               store.upsert_workload(db::testing::test_workload(1, 4096, hit)),
               "steady_clock",
               true};
    m.status = ok ? db::PointStatus::ok : db::PointStatus::failed;
    m.error = ok ? "" : "out of memory";
    m.stats = db::testing::test_stats(median_s);
    m.finished_at = finished;
    store.record_measurement(m);
  }
  // Both sides of a pair at each (chunk, hit): MAC `mac_s`, full 2 ms.
  void fill(double mac_s, double slow_chunk_factor = 1.0) {
    for (const char* p : {"chunk_tokens=64", "chunk_tokens=128"})
      for (double hit : {0.0, 1.0}) {
        const double f = std::string(p) == "chunk_tokens=128" ? slow_chunk_factor : 1.0;
        put(mac, p, hit, mac_s * f * (1 + hit));
        put(full, p, hit, 2e-3);
      }
  }
};

TEST(CompareStores, ADatabaseAgainstItselfIsAllSame) {
  Db a("a.db");
  a.fill(1e-3);
  const Comparison c = compare_stores(a.store, a.store, {});
  EXPECT_FALSE(c.cross_device);
  EXPECT_EQ(c.points.size(), 8u);
  EXPECT_EQ(c.count(Change::same), 8u);
  EXPECT_TRUE(c.only_base.empty() && c.only_new.empty());
  EXPECT_EQ(compare_summary(c),
            "compare: 8 points: 8 SAME, 0 FASTER, 0 SLOWER, 0 AMBIGUOUS; 0 only in BASE, 0 only "
            "in NEW");
}

BreakEven found(double lo, double hi, bool closed) {
  BreakEven be;
  be.status = BreakEvenStatus::ok;
  be.hit_rate = hi;
  be.lo = lo;
  be.lo_closed = closed;
  return be;
}

TEST(CompareBreakEven, AgreeWithinTheResolutionOrInsideTheOtherBracket) {
  // Within the resolution, whatever the brackets.
  EXPECT_TRUE(break_evens_agree(found(0.6, 0.62, false), found(0.62, 0.64, false), 0.02));
  EXPECT_FALSE(break_evens_agree(found(0.6, 0.62, false), found(0.62, 0.65, false), 0.02));
  // One inside the other's bracket: (lo, hi] excludes lo, [lo, hi] (a tie at lo) includes it.
  EXPECT_TRUE(break_evens_agree(found(0.5, 0.9, false), found(0.5, 0.625, false), 0.02));
  EXPECT_FALSE(break_evens_agree(found(0.78125, 1, false), found(0.65625, 0.78125, false), 0.02));
  EXPECT_TRUE(break_evens_agree(found(0.78125, 1, true), found(0.65625, 0.78125, false), 0.02));
  // Not found: agree only on the same status.
  BreakEven never, ambiguous;
  never.status = BreakEvenStatus::never;
  ambiguous.status = BreakEvenStatus::ambiguous;
  EXPECT_TRUE(break_evens_agree(never, never, 0.02));
  EXPECT_FALSE(break_evens_agree(never, ambiguous, 0.02));
  EXPECT_FALSE(break_evens_agree(found(0, 1, false), never, 0.02));
}

TEST(CompareStores, BreakEvensSideBySide) {
  Db a("a.db"), b("b.db", db::testing::test_device(), "def");
  a.fill(1e-3);  // MAC 1 ms against 2 at hit 0 (faster), 2 against 2 at hit 1: ambiguous
  b.fill(3e-3);  // MAC 3 and 6 ms against 2: never
  const Comparison self = compare_stores(a.store, a.store, {});
  ASSERT_EQ(self.break_evens.size(), 1u);
  EXPECT_EQ(self.break_evens[0].base.status, BreakEvenStatus::ambiguous);
  EXPECT_TRUE(self.break_evens[0].agree);
  EXPECT_EQ(break_even_summary(self),
            "break-even: 1 buckets in both, 1 agree (within 0.02 or inside the other's bracket)");
  const Comparison c = compare_stores(a.store, b.store, {});
  ASSERT_EQ(c.break_evens.size(), 1u);
  EXPECT_EQ(c.break_evens[0].next.status, BreakEvenStatus::never);
  EXPECT_FALSE(c.break_evens[0].agree);
  const std::string md = compare_markdown(c);
  EXPECT_NE(md.find("| ambiguous | never | **differ** |"), std::string::npos) << md;
}

TEST(CompareStores, SlowerExactlyWhereTheNewBuildIsSlower) {
  Db a("a.db"), b("b.db", db::testing::test_device(), "def");
  a.fill(1e-3);
  b.fill(1e-3, 1.5);
  const Comparison c = compare_stores(a.store, b.store, {});
  ASSERT_EQ(c.points.size(), 8u);
  for (const ComparedPoint& p : c.points) {
    const bool slowed = p.instance.starts_with("mac_") && p.params == "chunk_tokens=128";
    EXPECT_EQ(p.change, slowed ? Change::slower : Change::same) << p.instance << " " << p.params;
    if (slowed) {
      EXPECT_DOUBLE_EQ(p.ratio, 1.5);
    }
  }
  EXPECT_TRUE(c.any_slower());
  const std::string md = compare_markdown(c);
  EXPECT_NE(md.find("## hd128_q8_kv2_bf16_p16, batch 1, context 4096 (2 SLOWER)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 1.500 | **SLOWER** |"), std::string::npos) << md;
}

TEST(CompareStores, TheLatestRowOfAReMeasuredPointIsCompared) {
  Db a("a.db"), b("b.db");
  a.fill(1e-3);
  b.fill(1e-3);
  // NEW re-measured one point with a later build: faster, finished later.
  const db::Id build2 = b.store.upsert_build(db::testing::test_build("later"));
  b.put(b.mac, "chunk_tokens=64", 0.0, 0.5e-3, "2026-12-01T11:00:00.000Z", build2);
  const Comparison c = compare_stores(a.store, b.store, {});
  EXPECT_EQ(c.next.superseded, 1u);
  EXPECT_EQ(c.next.builds, 2u);
  EXPECT_EQ(c.count(Change::faster), 1u);
  EXPECT_EQ(c.count(Change::same), 7u);
}

TEST(CompareStores, OneSidedAndFailedPointsAreListed) {
  Db a("a.db"), b("b.db");
  a.fill(1e-3);
  b.fill(1e-3);
  a.put(a.mac, "chunk_tokens=256", 0.0, 1e-3);                                         // BASE only
  b.put(b.full, "chunk_tokens=512", 0.0, 1e-3, "2026-12-01T10:00:00.000Z", 0, false);  // failed
  const Comparison c = compare_stores(a.store, b.store, {});
  ASSERT_EQ(c.only_base.size(), 1u);
  EXPECT_EQ(c.only_base[0].params, "chunk_tokens=256");
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_EQ(c.only_new[0].failed, "out of memory");
  const std::string md = compare_markdown(c);
  EXPECT_NE(md.find("## Only in BASE (1)"), std::string::npos) << md;
  EXPECT_NE(md.find("failed: out of memory"), std::string::npos) << md;
}

TEST(CompareStores, TwoDevicesCompareMacOverFullRatiosNotTimes) {
  DeviceFingerprint other = db::testing::test_device();
  other.name = "Other CPU";
  Db a("a.db"), b("b.db", other);
  a.fill(1e-3);
  // Every time on the other device is 3x longer (MAC and full alike): the same ratios...
  for (const char* p : {"chunk_tokens=64", "chunk_tokens=128"})
    for (double hit : {0.0, 1.0}) {
      const double f = std::string(p) == "chunk_tokens=128" && hit == 1.0 ? 2.0 : 1.0;
      b.put(b.mac, p, hit, 3e-3 * (1 + hit) * f);  // ...except one MAC point, twice as slow
      b.put(b.full, p, hit, 6e-3);
    }
  const Comparison c = compare_stores(a.store, b.store, {});
  EXPECT_TRUE(c.cross_device);
  ASSERT_EQ(c.points.size(), 4u);  // pairs, not rows
  for (const ComparedPoint& p : c.points) {
    const bool slowed = p.params == "chunk_tokens=128" && p.hit_rate == 1.0;
    EXPECT_EQ(p.change, slowed ? Change::slower : Change::same) << p.params << " " << p.hit_rate;
    EXPECT_DOUBLE_EQ(p.base.median_s, 1e-3 * (1 + p.hit_rate) / 2e-3);
  }
  EXPECT_NE(compare_markdown(c).find("**Two different devices**"), std::string::npos);
  EXPECT_NE(compare_summary(c).find("(MAC/full ratios, two devices)"), std::string::npos);
}

TEST(CompareStores, BadInputNamesTheFile) {
  Db a("a.db"), empty("empty.db");
  a.fill(1e-3);
  try {
    compare_stores(a.store, empty.store, {});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("empty.db: the database holds no measurements"),
              std::string::npos)
        << e.what();
  }
  CompareOptions o;
  o.new_device = "*H200*";
  EXPECT_THROW(compare_stores(a.store, a.store, o), InputError);
  o = {};
  o.threshold = 1.5;
  EXPECT_THROW(compare_stores(a.store, a.store, o), InputError);
}

}  // namespace
}  // namespace mactune::tuner
