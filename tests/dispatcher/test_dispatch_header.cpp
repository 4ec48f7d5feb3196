// The generated C++ header form of a dispatch table (written at build time from
// data/sample_dispatch.json by gen_header) holds the same table and gives the same answers as
// the JSON loaded at run time, over many shapes, batches, contexts and hit rates.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "dispatcher/dispatch.h"
#include "sample_dispatch_table.h"  // generated: mactune_test::sample_table()

namespace mactune::dispatch {
namespace {

DispatchTable json_table() {
  return read_table(MACTUNE_SAMPLE_DISPATCH_JSON);
}

// A catalog of exactly the instances the table names (CUDA, families from the name).
Catalog catalog_of(const DispatchTable& t) {
  std::vector<InstanceDesc> infos;
  for (const Entry& e : t.entries) {
    infos.push_back(InstanceDesc::named(e.full.instance, Backend::cuda, Family::full));
    if (e.mac) infos.push_back(InstanceDesc::named(e.mac->instance, Backend::cuda, Family::attend));
  }
  return Catalog(std::move(infos));
}

LoadOptions options(const Catalog& catalog, std::vector<std::string>& warnings) {
  LoadOptions o;
  o.device.backend = Backend::cuda;
  o.check_device = false;  // the sample was not made on this machine
  o.catalog = &catalog;
  o.warn = [&warnings](std::string_view w) { warnings.emplace_back(w); };
  return o;
}

TEST(DispatchHeader, HoldsTheSameTableAsTheJson) {
  EXPECT_EQ(mactune_test::sample_table(), json_table());
}

TEST(DispatchHeader, IsWhatToHeaderWritesToday) {
  std::ifstream in(MACTUNE_SAMPLE_DISPATCH_HEADER);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), to_header(json_table(), "mactune_test", "sample_table"));
}

TEST(DispatchHeader, GivesTheSameChoicesAsTheJson) {
  const DispatchTable from_json = json_table();
  const Catalog catalog = catalog_of(from_json);
  std::vector<std::string> warnings;
  const Dispatcher a =
      Dispatcher::from_table(mactune_test::sample_table(), "header", options(catalog, warnings));
  const Dispatcher b = Dispatcher::load(MACTUNE_SAMPLE_DISPATCH_JSON, options(catalog, warnings));
  ASSERT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_NE(a.table(), nullptr);
  ASSERT_NE(b.table(), nullptr);
  const ShapeKey shapes[] = {{128, 32, 8, DType::bf16, 16},
                             {128, 64, 8, DType::bf16, 16},
                             {64, 8, 8, DType::f16, 1},
                             {128, 32, 8, DType::bf16, 32},
                             {128, 32, 4, DType::bf16, 16}};
  const double rates[] = {0.0,  0.44,
                          0.45, 0.5,
                          0.7,  0.7000000000000001,
                          0.9,  0.97,
                          1.0,  std::numeric_limits<double>::quiet_NaN()};
  int compared = 0, from_table = 0, mac = 0;
  for (const ShapeKey& s : shapes) {
    for (int batch = 1; batch <= 80; batch += (batch < 20 ? 1 : 7)) {
      for (std::int64_t ctx : {1, 99, 100, 101, 8191, 8192, 16383, 16384, 32767, 32768, 131071,
                               131072, 262144, 262145, 1 << 30}) {
        for (double h : rates) {
          const Problem p = s.problem(batch);
          const Choice x = a.select(p, ctx, h);
          const Choice y = b.select(p, ctx, h);
          ASSERT_EQ(x.source, y.source);
          ASSERT_EQ(x.entry, y.entry);
          ASSERT_EQ(x.full, y.full);
          ASSERT_EQ(x.mac, y.mac);
          ASSERT_EQ(x.min_hit_rate, y.min_hit_rate);
          ASSERT_EQ(describe(x), describe(y));
          ++compared;
          from_table += x.source == ChoiceSource::table;
          mac += x.use_mac();
        }
      }
    }
  }
  // The grid reaches every kind of answer.
  EXPECT_GT(from_table, compared / 10);
  EXPECT_GT(mac, 100);
  EXPECT_GT(compared - from_table, 100);
}

}  // namespace
}  // namespace mactune::dispatch
