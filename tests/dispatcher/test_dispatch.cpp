// Dispatch tables: the JSON format, selection, and refusal of bad tables (one warning line,
// then the fallback for every select).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "dispatch_fixtures.h"
#include "kernels/error.h"

namespace mactune::dispatch {
namespace {

using testing::llama_shape;
using testing::test_catalog;
using testing::test_device;
using testing::test_table;
using testing::WarningLog;

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mactune_dispatch_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void expect_same_choice(const Choice& a, const Choice& b, const std::string& where) {
  EXPECT_EQ(a.source, b.source) << where;
  EXPECT_EQ(a.entry, b.entry) << where;
  EXPECT_EQ(a.full, b.full) << where;
  EXPECT_EQ(a.mac, b.mac) << where;
  EXPECT_EQ(a.min_hit_rate, b.min_hit_rate) << where;
}

// ---- The format.

TEST(DispatchJson, RoundTripKeepsEveryField) {
  const DispatchTable t = test_table();
  const std::string text = to_json(t);
  EXPECT_NE(text.find("\"schema\": \"mactune.dispatch/1\""), std::string::npos);
  EXPECT_NE(text.find("\"min_hit_rate\": null"), std::string::npos);
  EXPECT_NE(text.find("null\n"), std::string::npos);  // an unbounded interval end
  EXPECT_EQ(parse_table(text, "memory"), t);
}

TEST(DispatchJson, WriteIsAtomicAndReadsBack) {
  const auto dir = temp_dir("write");
  const auto path = dir / "table.json";
  write_table(test_table(), path);
  EXPECT_EQ(read_table(path), test_table());
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) files += f.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST(DispatchJson, WriteRefusesAnInvalidTable) {
  const auto dir = temp_dir("invalid");
  DispatchTable t = test_table();
  t.entries[1].batch = {4, 12};  // overlaps entry 3 (batch [9, inf), context [32768, inf))
  EXPECT_THROW(write_table(t, dir / "t.json"), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "t.json"));
  EXPECT_THROW(write_header(t, dir / "t.h"), InputError);
  EXPECT_THROW(write_table(test_table(), dir / "missing" / "t.json"), InputError);
  std::filesystem::remove_all(dir);
}

TEST(DispatchJson, ErrorsNameThePathAndTheProblem) {
  std::string text = to_json(test_table());
  const auto at = text.find("\"K\": 512");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "\"K\": \"512\"");
  try {
    parse_table(text, "t.json");
    FAIL() << "parsed a string K";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "dispatch table 't.json': $.entries[1].mac.K: expected an integer, got a string");
  }
}

TEST(DispatchJson, RejectsUnknownMissingAndMistypedKeys) {
  const std::string good = to_json(test_table());
  auto refused = [](std::string text, const std::string& what) {
    try {
      parse_table(text, "t");
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted: " << what;
  };
  std::string t = good;
  t.replace(t.find("\"min_hit_rate\": null"), 14, "\"min_hitrate\"");
  refused(t, "unknown key 'min_hitrate'");
  t = good;
  t.replace(t.find("\"time\""), 6, "\"when\"");
  refused(t, "$.generated: unknown key 'when'");
  refused(R"({"schema": "mactune.dispatch/1"})", "$: missing key 'device'");
  refused("[]", "$: expected an object, got an array");
  refused(good.substr(0, good.size() / 2), "not valid JSON");
  t = good;
  t.replace(t.find("\"bf16\""), 6, "\"int8\"");
  refused(t, "$.entries[0].shape.dtype: unknown dtype 'int8'");
  // The backend is an enum from the JSON in: a table for another engine is refused as it is read.
  t = good;
  const std::string cpu = "\"backend\": \"cpu\"";
  ASSERT_NE(t.find(cpu), std::string::npos);
  t.replace(t.find(cpu), cpu.size(), "\"backend\": \"tpu\"");
  refused(t, "$.device.backend: 'tpu' must be cpu or cuda");
  t = good;
  const std::string batch_0 = "[\n        1,\n        8\n      ]";
  ASSERT_NE(t.find(batch_0), std::string::npos);
  t.replace(t.find(batch_0), batch_0.size(), "[1]");
  refused(t, "$.entries[0].batch: expected [lo, hi]");
  t = good;
  t.replace(t.find("\"block_rows\": 16"), 16, "\"block_rows\": [16]");
  refused(t, "a parameter must be a number, a boolean or a string");
}

TEST(DispatchJson, DuplicateKeysAreRefusedNamingKeyAndLine) {
  const std::string good = to_json(test_table());
  auto refused = [](const std::string& text, const std::string& what) {
    try {
      parse_table(text, "t.json");
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted: " << what;
  };
  // A second "schema" as the last key of the top level: nlohmann would keep it silently.
  std::string t = good;
  t.insert(t.rfind('}'), ",\n\"schema\": \"mactune.dispatch/1\"\n");
  const int last_line = static_cast<int>(std::count(t.begin(), t.end(), '\n')) - 1;
  refused(
      t, "dispatch table 't.json': line " + std::to_string(last_line) + ": duplicate key 'schema'");
  // Inside an entry, with the key written on the same line as the first.
  t = good;
  const auto k = t.find("\"K\": 512");
  ASSERT_NE(k, std::string::npos);
  t.insert(k, "\"K\": 512, ");
  refused(t, "duplicate key 'K'");
  // The same key in two different objects is fine.
  EXPECT_NO_THROW(parse_table(good, "t.json"));
}

TEST(DispatchStructure, NamesTheFirstBadEntry) {
  auto why = [](const std::function<void(DispatchTable&)>& edit) {
    DispatchTable t = test_table();
    edit(t);
    return check_structure(t);
  };
  EXPECT_EQ(why([](DispatchTable&) {}), "");
  EXPECT_EQ(why([](DispatchTable& t) {
              t.entries[2].batch = {0, 4};
            }),
            "entries[2].batch: lo = 0 must be in [1, 2147483647]");
  EXPECT_EQ(why([](DispatchTable& t) {
              t.entries[0].context = {100, 50};
            }),
            "entries[0].context: hi = 50 must be in [lo = 100, 1073741824]");
  EXPECT_EQ(why([](DispatchTable& t) { t.entries[1].min_hit_rate = 1.5; }),
            "entries[1].min_hit_rate = 1.500000 must be in [0, 1]");
  EXPECT_EQ(why([](DispatchTable& t) { t.entries[0].min_hit_rate = 0.5; }),
            "entries[0].min_hit_rate is set but mac is null");
  EXPECT_EQ(why([](DispatchTable& t) { t.entries[1].mac->ring_capacity = 0; }),
            "entries[1].mac.K = 0 must be at least 1");
  EXPECT_EQ(why([](DispatchTable& t) { t.entries[3].shape.kv_heads = 5; }),
            "entries[3].shape: kv_heads = 5 does not divide q_heads = 32");
  EXPECT_NE(why([](DispatchTable& t) {
              t.entries[3].context = {30000, std::nullopt};
            }).find("entries[2] and entries[3] overlap"),
            std::string::npos);
  // Another shape may reuse the same intervals.
  EXPECT_EQ(why([](DispatchTable& t) {
              Entry e = t.entries[0];
              e.shape.page_size = 64;
              t.entries.push_back(e);
            }),
            "");
}

// ---- Selection.

TEST(DispatchSelect, PicksTheBucketAndMacFromTheBreakEven) {
  const Catalog catalog = test_catalog();
  WarningLog log;
  const Dispatcher d = Dispatcher::from_table(test_table(), "t", log.options(&catalog));
  ASSERT_NE(d.table(), nullptr);
  EXPECT_TRUE(log.lines.empty());
  const Problem p4 = llama_shape().problem(4);
  const Problem p32 = llama_shape().problem(32);

  Choice c = d.select(p4, 4096, 1.0);  // entry 0: no MAC there
  EXPECT_EQ(c.source, ChoiceSource::table);
  EXPECT_EQ(c.entry, 0);
  EXPECT_FALSE(c.use_mac());
  EXPECT_EQ(c.instance(), "full_cpu_avx2_hd128_bf16");
  EXPECT_EQ(std::get<std::int64_t>(c.full.params.at("chunk_tokens")), 256);

  c = d.select(p4, 32768, 0.69);  // entry 1 below its break-even 0.7
  EXPECT_EQ(c.entry, 1);
  EXPECT_FALSE(c.use_mac());
  EXPECT_EQ(c.min_hit_rate, 0.7);
  c = d.select(p4, 32768, 0.7);  // at the break-even: MAC
  ASSERT_TRUE(c.use_mac());
  EXPECT_EQ(c.instance(), "mac_cpu_avx2_hd128_bf16");
  EXPECT_EQ(c.mac->ring_capacity, 512);
  EXPECT_EQ(c.mac->band, 256);
  EXPECT_EQ(c.mac->tau, 0.45);
  EXPECT_EQ(c.full.instance, "full_cpu_avx2_hd128_bf16");  // the warm-up kernel comes along

  c = d.select(p32, 1000, 1.0);  // entry 2: MAC measured, never won
  EXPECT_EQ(c.entry, 2);
  EXPECT_FALSE(c.use_mac());
  c = d.select(p32, std::int64_t{1} << 20, 0.9);  // entry 3, unbounded above
  EXPECT_EQ(c.entry, 3);
  EXPECT_TRUE(c.use_mac());
  c = d.select(p32, 1 << 20, std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(c.use_mac());  // an unknown hit rate never picks MAC
  EXPECT_EQ(describe(d.select(p32, 1 << 20, 0.9)),
            "mac mac_cpu_avx2_hd128_bf16 K=512 r=256 tau=0.45 block_rows=16 chunk_tokens=256 "
            "isa=avx2 threads=4 (table entry 3, break-even 0.55)");
}

TEST(DispatchSelect, FallsBackOutsideTheTable) {
  const Catalog catalog = test_catalog();
  WarningLog log;
  const Dispatcher d = Dispatcher::from_table(test_table(), "t", log.options(&catalog));
  Problem other = llama_shape().problem(4);
  other.page_size = 32;  // a shape the table does not hold
  Choice c = d.select(other, 50000, 1.0);
  EXPECT_EQ(c.source, ChoiceSource::fallback);
  EXPECT_FALSE(c.use_mac());
  EXPECT_EQ(c.instance(), "full_cpu_avx2_hd128_bf16");  // the catalog's first full that fits
  EXPECT_EQ(describe(c), "full full_cpu_avx2_hd128_bf16 (fallback)");
  Problem small = testing::problem_of(ShapeKey{64, 16, 2, DType::f16, 1}, 8);
  EXPECT_EQ(d.select(small, 1023, 1.0).source, ChoiceSource::fallback);  // below its context
  EXPECT_EQ(d.select(small, 1023, 1.0).instance(), "full_cpu_avx2_hd64_f16");
  EXPECT_EQ(d.select(small, 65536, 0.0).instance(), "mac_cpu_avx2_hd64_f16");  // break-even 0
  Problem f16_128 = llama_shape().problem(1);
  f16_128.kv_dtype = DType::f16;  // no instance of this build runs it
  c = d.select(f16_128, 4096, 0.9);
  EXPECT_EQ(c.instance(), "");
  EXPECT_EQ(describe(c), "none (no full-attention instance of this build fits the shape)");
}

TEST(DispatchSelect, DispatcherAgreesWithThePureFunction) {
  const Catalog catalog = test_catalog();
  const DispatchTable t = test_table();
  WarningLog log;
  const Dispatcher d = Dispatcher::from_table(t, "t", log.options(&catalog));
  const ShapeKey shapes[] = {
      llama_shape(), {64, 16, 2, DType::f16, 1}, {128, 32, 8, DType::f32, 16}};
  for (const ShapeKey& s : shapes)
    for (int batch : {1, 2, 8, 9, 10, 63, 64, 65, 1000})
      for (std::int64_t ctx : {1, 1023, 1024, 32767, 32768, 65536, 65537, 1 << 30})
        for (double h : {0.0, 0.54, 0.55, 0.7, 1.0}) {
          const Problem p = s.problem(batch);
          expect_same_choice(d.select(p, ctx, h), select(&t, catalog, Backend::cpu, p, ctx, h),
                             std::to_string(batch) + "/" + std::to_string(ctx));
        }
}

TEST(DispatchSelect, NameFitsReadsHeadDimGroupBoundAndDtype) {
  const Problem p = llama_shape().problem(1);  // head_dim 128, G = 4, bf16
  EXPECT_TRUE(name_fits("mac_cpu_avx2_hd128_bf16", p));
  EXPECT_FALSE(name_fits("mac_cpu_avx2_hd64_bf16", p));
  EXPECT_FALSE(name_fits("mac_cpu_avx2_hd128_f16", p));
  EXPECT_TRUE(name_fits("attend_cuda_hd128_g4_t64_s2_bf16", p));
  EXPECT_TRUE(name_fits("attend_cuda_hd128_g8_t64_s2_bf16", p));  // up to 8 heads a group
  EXPECT_FALSE(name_fits("attend_cuda_hd128_g2_t64_s2_bf16", p));
  EXPECT_TRUE(name_fits("my_kernel", p));        // no fields: no constraint
  EXPECT_TRUE(name_fits("full_cpu_hdx_gq", p));  // not fields: hd/g need digits
  EXPECT_FALSE(name_fits("full_cpu_hd128_f32", p));
}

// ---- Refusal: one warning line, no table, the fallback for every select.

struct RefusalCase {
  const char* name;
  std::function<std::string()> text;  // the table's JSON
  const char* reason;                 // a part of the warning line
};

DispatchTable edited(const std::function<void(DispatchTable&)>& edit) {
  DispatchTable t = test_table();
  edit(t);
  return t;
}

const RefusalCase kRefusals[] = {
    {"AnotherDevice",
     [] {
       DeviceFingerprint other = test_device();
       other.name = "Other CPU";
       return to_json(test_table(other));
     },
     "made on another device: 'Other CPU'"},
    {"AnotherBackend",
     [] { return to_json(edited([](DispatchTable& t) { t.device.backend = Backend::cuda; })); },
     "made for backend cuda, this device is cpu"},
    {"AnotherSchemaVersion",
     [] {
       std::string s = to_json(test_table());
       s.replace(s.find("dispatch/1"), 10, "dispatch/2");
       return s;
     },
     "$.schema: 'mactune.dispatch/2' is not supported (this build reads mactune.dispatch/1)"},
    {"OverlappingIntervals",
     [] {
       // Written by hand: write_table would refuse to write it.
       std::string s = to_json(test_table());
       s.replace(s.find("32767"), 5, "40000");
       return s;
     },
     "entries[0] and entries[1] overlap"},
    {"UnknownInstance",
     [] {
       return to_json(edited(
           [](DispatchTable& t) { t.entries[3].mac->instance = "mac_cpu_avx9_hd128_bf16"; }));
     },
     "entries[3].mac 'mac_cpu_avx9_hd128_bf16' is not an instance of this build"},
    {"InstanceOfAnotherBackend",
     [] {
       return to_json(edited(
           [](DispatchTable& t) { t.entries[0].full.instance = "full_cuda_hd128_g4_bf16"; }));
     },
     "runs on cuda, the table is for cpu"},
    {"MacInstanceAsFull",
     [] {
       return to_json(edited(
           [](DispatchTable& t) { t.entries[2].full.instance = "mac_cpu_avx2_hd128_bf16"; }));
     },
     "is a mac instance, expected a full-attention one"},
    {"InstanceOfAnotherShape",
     [] {
       return to_json(
           edited([](DispatchTable& t) { t.entries[1].full.instance = "full_cpu_avx2_hd64_f16"; }));
     },
     "does not run head_dim 128, heads 32/8, bf16"},
    {"TruncatedJson", [] { return to_json(test_table()).substr(0, 300); }, "not valid JSON"},
    {"NotJsonAtAll", [] { return std::string("\x01\xff garbage"); }, "not valid JSON"},
    {"DeviceNameWithNewline",
     [] {
       DeviceFingerprint other = test_device();
       other.name = "Evil\nCPU";
       return to_json(test_table(other));
     },
     "made on another device: 'Evil CPU'"},
};

class DispatchRefusal : public ::testing::TestWithParam<int> {};

TEST_P(DispatchRefusal, WarnsOnceAndFallsBack) {
  const RefusalCase& rc = kRefusals[GetParam()];
  const Catalog catalog = test_catalog();
  WarningLog log;
  const Dispatcher d = Dispatcher::from_text(rc.text(), "bad.json", log.options(&catalog));
  EXPECT_EQ(d.table(), nullptr);
  ASSERT_EQ(log.lines.size(), 1u);
  const std::string& line = log.lines[0];
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind("dispatch table 'bad.json' refused: ", 0), 0u) << line;
  EXPECT_NE(line.find(rc.reason), std::string::npos) << line;
  EXPECT_NE(line.find("using the built-in fallback"), std::string::npos) << line;
  EXPECT_EQ(d.refusal(), line);
  // Every select, even where the table would have said MAC, is now the fallback.
  for (int batch : {1, 8, 32}) {
    const Choice c = d.select(llama_shape().problem(batch), 1 << 20, 1.0);
    EXPECT_EQ(c.source, ChoiceSource::fallback);
    EXPECT_FALSE(c.use_mac());
    EXPECT_EQ(c.instance(), "full_cpu_avx2_hd128_bf16");
  }
  EXPECT_EQ(log.lines.size(), 1u);  // selecting warns no more
}

INSTANTIATE_TEST_SUITE_P(Tables, DispatchRefusal,
                         ::testing::Range(0, static_cast<int>(std::size(kRefusals))),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(kRefusals[param.param].name);
                         });

TEST(DispatchLoad, MissingFileIsRefusedWithOneLine) {
  const Catalog catalog = test_catalog();
  WarningLog log;
  const Dispatcher d = Dispatcher::load("/nonexistent/dir/table.json", log.options(&catalog));
  EXPECT_EQ(d.table(), nullptr);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("cannot read the dispatch table: no such file or directory"),
            std::string::npos)
      << log.lines[0];
}

TEST(DispatchLoad, DefaultWarningGoesToStderrPrefixed) {
  const Catalog catalog = test_catalog();
  LoadOptions o;
  o.device = test_device();
  o.catalog = &catalog;
  ::testing::internal::CaptureStderr();
  const Dispatcher d = Dispatcher::from_text("{}", "empty.json", o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "mactune: warning: dispatch table 'empty.json' refused: $: missing key 'schema'; using "
            "the built-in fallback (full attention)\n");
}

TEST(DispatchLoad, AnotherDeviceIsAcceptedWhenTheCheckIsOff) {
  const Catalog catalog = test_catalog();
  DeviceFingerprint other = test_device();
  other.threads = 64;
  WarningLog log;
  LoadOptions o = log.options(&catalog);
  o.check_device = false;
  const Dispatcher d = Dispatcher::from_table(test_table(other), "t", o);
  ASSERT_NE(d.table(), nullptr);
  EXPECT_TRUE(log.lines.empty());
  EXPECT_EQ(d.select(llama_shape().problem(32), 1 << 20, 0.9).source, ChoiceSource::table);
}

TEST(DispatchLoad, FileRoundTripThroughTheDispatcher) {
  const auto dir = temp_dir("load");
  write_table(test_table(), dir / "t.json");
  const Catalog catalog = test_catalog();
  WarningLog log;
  const Dispatcher d = Dispatcher::load(dir / "t.json", log.options(&catalog));
  ASSERT_NE(d.table(), nullptr) << (log.lines.empty() ? "" : log.lines[0]);
  EXPECT_EQ(*d.table(), test_table());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mactune::dispatch
