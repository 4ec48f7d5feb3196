// Loading a large dispatch table takes time in proportion to its entries (issue 30: 100,000
// entries took over 20 s, the overlap check compared every pair). Timed against a table 20
// times smaller on the same machine, so a slow or loaded machine slows both: linear is ~20x,
// the quadratic check was ~400x.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "dispatch_fixtures.h"

namespace mactune::dispatch {
namespace {

// A grid of batch x context buckets of one shape: `n` entries, none overlapping.
std::string grid_table_json(int n) {
  DispatchTable t = testing::test_table();
  const Entry proto = t.entries.front();
  t.entries.clear();
  const int columns = 100;
  for (int i = 0; i < n; ++i) {
    Entry e = proto;
    const std::int64_t b = i / columns, c = i % columns;
    e.batch = {b * 4 + 1, b * 4 + 4};
    e.context = {c * 1000 + 1, c * 1000 + 1000};
    t.entries.push_back(e);
  }
  return to_json(t);
}

double load_seconds(const std::string& text, int expected) {
  const auto t0 = std::chrono::steady_clock::now();
  const DispatchTable t = parse_table(text, "grid");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(static_cast<int>(t.entries.size()), expected);
  return s;
}

TEST(DispatchScale, LoadTimeGrowsLinearlyWithEntries) {
  const int small = 1000, large = 20000;
  const std::string small_text = grid_table_json(small), large_text = grid_table_json(large);
  double t_small = 1e9;
  for (int i = 0; i < 3; ++i) t_small = std::min(t_small, load_seconds(small_text, small));
  const double t_large = load_seconds(large_text, large);
  // 20x the entries: ~20x the time when linear (n log n: ~28x), ~400x when quadratic.
  EXPECT_LT(t_large, 100 * t_small) << "small " << t_small << " s, large " << t_large << " s";
}

TEST(DispatchScale, OverlapFoundInALargeTable) {
  DispatchTable t = testing::test_table();
  const Entry proto = t.entries.front();
  t.entries.clear();
  for (int i = 0; i < 20000; ++i) {
    Entry e = proto;
    e.batch = {i * 2 + 1, i * 2 + 2};
    e.context = {1, 1000};
    t.entries.push_back(e);
  }
  t.entries[12345].batch = {12345 * 2 - 1, 12345 * 2 + 1};  // into both neighbours
  const std::string why = check_structure(t);
  EXPECT_NE(why.find("entries[12344] and entries[12345] overlap"), std::string::npos) << why;
}

}  // namespace
}  // namespace mactune::dispatch
