// The Chrome-trace writer and the structural validator: valid timelines pass, and every rule
// the validator claims to check is shown to catch a trace that breaks it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/timeline.h"
#include "profiler/trace_check.h"

namespace mactune::prof {
namespace {

using json = nlohmann::json;

std::string write(const Timeline& tl) {
  std::ostringstream out;
  write_chrome_trace(out, tl, {{"command", "mactune profile --steps 2"}});
  return out.str();
}

// Host process 10 with one thread (a step holding two phases), GPU process 20 with one stream,
// a counter and a launch flow from the host thread to the kernel.
Timeline sample_timeline() {
  Timeline tl;
  tl.name_process(10, "mactune profile", 0, "cpu hd128");
  tl.name_thread(10, 11, "decode loop", 0);
  tl.name_process(20, "GPU 0", 1);
  tl.name_thread(20, 7, "stream 7", 0);
  const std::int64_t t0 = 5'000'000'000;  // ns on the profiler clock
  tl.add(Span{"step 0", "step", 10, 11, t0, t0 + 10'000, {{"kv_bytes_read", std::int64_t{4096}}}});
  tl.add(Span{"match", "phase", 10, 11, t0 + 1'000, t0 + 2'500, {{"instance", std::string("x")}}});
  tl.add(Span{"attend", "phase", 10, 11, t0 + 3'000, t0 + 9'000, {}});
  tl.add(Span{"cudaLaunchKernel", "cuda_api", 10, 11, t0 + 3'100, t0 + 3'900, {}});
  tl.add(Span{"attend_kernel", "kernel", 20, 7, t0 + 4'000, t0 + 8'000, {}});
  tl.add(Flow{42, "launch", "launch", 10, 11, t0 + 3'500, 20, 7, t0 + 4'000});
  tl.add(Counter{"modeled MiB per step", 10, t0, {{"KV read", 1.5}}});
  return tl;
}

TEST(ChromeTrace, WriterOutputPassesTheValidator) {
  const std::string text = write(sample_timeline());
  TraceCheckOptions opt;
  opt.phases_every_step = {"match", "attend"};
  opt.min_steps = 1;
  const TraceCheck c = check_chrome_trace(text, opt);
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.spans, 5);
  EXPECT_EQ(c.flows, 1);
  EXPECT_EQ(c.steps, 1);
  EXPECT_EQ(c.tracks, 2);
}

TEST(ChromeTrace, TimestampsAreMicrosecondsFromTheEarliestEventWithNsPrecision) {
  const json doc = json::parse(write(sample_timeline()));
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["otherData"]["command"], "mactune profile --steps 2");
  EXPECT_EQ(doc["otherData"]["origin_ns"], "5000000000");
  int checked = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "match") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1.5);
      EXPECT_EQ(e["args"]["instance"], "x");
      ++checked;
    }
    if (e["ph"] == "f") {
      EXPECT_EQ(e["bp"], "e");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 4.0);
      ++checked;
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 7) {
      EXPECT_EQ(e["args"]["name"], "stream 7");
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3);
}

TEST(ChromeTrace, FormatAndQuote) {
  EXPECT_EQ(format_us(0), "0.000");
  EXPECT_EQ(format_us(1234567), "1234.567");
  EXPECT_EQ(format_us(5), "0.005");
  EXPECT_EQ(format_us(-1500), "-1.500");
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(json::parse(json_quote("tab\there é")).get<std::string>(), "tab\there é");
}

// Each case breaks one rule; the validator must name it.
struct BrokenCase {
  const char* name;
  const char* json;
  const char* expect;  // a piece of the error message
};

void PrintTo(const BrokenCase& c, std::ostream* out) {
  *out << c.name;
}

class ValidatorCatches : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(ValidatorCatches, TheBrokenRule) {
  TraceCheckOptions opt;
  opt.phases_every_step = {"match"};
  const TraceCheck c = check_chrome_trace(GetParam().json, opt);
  ASSERT_FALSE(c.ok());
  bool found = false;
  for (const auto& e : c.errors) found = found || e.find(GetParam().expect) != std::string::npos;
  EXPECT_TRUE(found) << "errors:\n" << c.summary();
}

#define META \
  R"({"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"p"}},{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"t"}})"

const BrokenCase kBroken[] = {
    {"NotJson", R"({"traceEvents":[)", "not valid JSON"},
    {"NoEventArray", R"({"events":[]})", "traceEvents"},
    {"MissingDur",
     "[" META R"(,{"ph":"X","name":"a","pid":1,"tid":2,"ts":1})"
     "]",
     "missing \"dur\""},
    {"NegativeDur",
     "[" META R"(,{"ph":"X","name":"a","pid":1,"tid":2,"ts":1,"dur":-2})"
     "]",
     "\"dur\" must be finite and >= 0"},
    {"StringTs",
     "[" META R"(,{"ph":"X","name":"a","pid":1,"tid":2,"ts":"1","dur":2})"
     "]",
     "\"ts\" must be a number"},
    {"Overlap",
     "[" META R"(,{"ph":"X","name":"a","pid":1,"tid":2,"ts":0,"dur":10},)"
     R"({"ph":"X","name":"b","pid":1,"tid":2,"ts":5,"dur":10})"
     "]",
     "overlaps \"a\" without nesting"},
    {"UnnamedThread",
     "[" META R"(,{"ph":"X","name":"a","pid":1,"tid":3,"ts":0,"dur":1})"
     "]",
     "no thread_name"},
    {"UnnamedProcess",
     R"([{"ph":"M","name":"thread_name","pid":4,"tid":2,"args":{"name":"t"}},)"
     R"({"ph":"X","name":"a","pid":4,"tid":2,"ts":0,"dur":1}])",
     "no process_name"},
    {"FlowEndWithoutStart",
     "[" META R"(,{"ph":"X","name":"k","pid":1,"tid":2,"ts":0,"dur":5},)"
     R"({"ph":"f","bp":"e","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":0})"
     "]",
     "has no start"},
    {"FlowStartWithOtherName",
     "[" META R"(,{"ph":"X","name":"k","pid":1,"tid":2,"ts":0,"dur":5},)"
     R"({"ph":"s","id":9,"cat":"launch","name":"other","pid":1,"tid":2,"ts":1},)"
     R"({"ph":"f","bp":"e","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":2})"
     "]",
     "has no start"},
    {"FlowStartOffAnySpan",
     "[" META R"(,{"ph":"X","name":"k","pid":1,"tid":2,"ts":0,"dur":5},)"
     R"({"ph":"s","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":7},)"
     R"({"ph":"f","bp":"e","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":4})"
     "]",
     "flow start lies on no span"},
    {"FlowBackwards",
     "[" META R"(,{"ph":"X","name":"k","pid":1,"tid":2,"ts":0,"dur":5},)"
     R"({"ph":"s","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":4},)"
     R"({"ph":"f","bp":"e","id":9,"cat":"launch","name":"launch","pid":1,"tid":2,"ts":1})"
     "]",
     "ends before it starts"},
    {"UnclosedBegin",
     "[" META R"(,{"ph":"B","name":"a","pid":1,"tid":2,"ts":0})"
     "]",
     "never closed"},
    {"UnknownPhase",
     "[" META R"(,{"ph":"Q","name":"a","pid":1,"tid":2,"ts":0})"
     "]",
     "unsupported phase"},
    {"CounterWithoutSeries",
     "[" META R"(,{"ph":"C","name":"c","pid":1,"ts":0,"args":{}})"
     "]",
     "non-empty \"args\""},
    {"StepWithoutMatch",
     "[" META R"(,{"ph":"X","name":"step 0","cat":"step","pid":1,"tid":2,"ts":0,"dur":10},)"
     R"({"ph":"X","name":"attend","cat":"phase","pid":1,"tid":2,"ts":1,"dur":2})"
     "]",
     "has no \"match\" phase span"},
};

INSTANTIATE_TEST_SUITE_P(Rules, ValidatorCatches, ::testing::ValuesIn(kBroken),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(ChromeTrace, PlanIsRequiredInEveryStepOnceItAppearsInOne) {
  const char* two_steps =
      "[" META R"(,{"ph":"X","name":"step 0","cat":"step","pid":1,"tid":2,"ts":0,"dur":10},)"
      R"({"ph":"X","name":"plan","cat":"phase","pid":1,"tid":2,"ts":1,"dur":2},)"
      R"({"ph":"X","name":"step 1","cat":"step","pid":1,"tid":2,"ts":20,"dur":10}])";
  TraceCheckOptions opt;
  opt.phases_where_present = {"plan"};
  const TraceCheck c = check_chrome_trace(two_steps, opt);
  ASSERT_EQ(c.errors.size(), 1u) << c.summary();
  EXPECT_NE(c.errors[0].find("step 1"), std::string::npos);
  opt.phases_where_present = {"ring_write"};  // absent everywhere: not required
  EXPECT_TRUE(check_chrome_trace(two_steps, opt).ok());
}

TEST(Timeline, SeparateOverlapsMovesSpansToLanesAndFlowsFollow) {
  Timeline tl;
  tl.name_process(1, "p", 0);
  tl.name_thread(1, 2, "stream 2", 0);
  tl.name_thread(1, 3, "host", 1);
  tl.add(Span{"a", "kernel", 1, 2, 0, 100, {}});
  tl.add(Span{"b", "kernel", 1, 2, 50, 150, {}});  // overlaps a without nesting
  tl.add(Span{"c", "kernel", 1, 2, 60, 70, {}});   // nests in a... and in b
  tl.add(Span{"launch b", "cuda_api", 1, 3, 10, 20, {}});
  tl.add(Flow{1, "launch", "launch", 1, 3, 15, 1, 2, 50});
  EXPECT_FALSE(check_chrome_trace(write(tl)).ok());
  EXPECT_EQ(tl.separate_overlaps(), 1);
  const TraceCheck c = check_chrome_trace(write(tl));
  EXPECT_TRUE(c.ok()) << c.summary();
  std::int64_t lane_tid = -1;
  for (const auto& s : tl.spans())
    if (s.name == "b") lane_tid = s.tid;
  ASSERT_NE(lane_tid, 2);
  EXPECT_EQ(tl.flows()[0].to_tid, lane_tid);
  bool named = false;
  for (const auto& t : tl.threads())
    named = named || (t.tid == lane_tid && t.name == "stream 2 (lane 2)");
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace mactune::prof
