#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "kernels/error.h"
#include "tuner/spec/axes.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {
namespace {

// The message of the InputError that parsing `text` throws ("" if none).
std::string error_of(const std::string& text, Backend backend = Backend::cpu) {
  try {
    parse_spec(text, "t.yaml", backend);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> texts(const Axis& a) {
  std::vector<std::string> out;
  for (const Value& v : a.values) out.push_back(v.text);
  return out;
}

TEST(TunerSpec, MinimalSpecGetsDefaults) {
  const Spec s = parse_spec("name: tiny\n", "t.yaml", Backend::cpu);
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(texts(s.axis("batch")), (std::vector<std::string>{"1"}));
  EXPECT_EQ(texts(s.axis("hit_rate")), (std::vector<std::string>{"0", "0.5", "0.9", "1"}));
  EXPECT_EQ(texts(s.axis("lag")), (std::vector<std::string>{"uniform(1,64)"}));
  EXPECT_TRUE(s.find_axis("chunk_tokens"));
  EXPECT_FALSE(s.find_axis("ctas_per_sm")) << "CUDA axes do not enter a CPU grid";
  EXPECT_EQ(s.output.db, "results/tiny.db");
  EXPECT_EQ(s.output.dispatch, "dispatch/tiny.json");
  EXPECT_EQ(s.measure.mode, CacheMode::cold);
  EXPECT_DOUBLE_EQ(s.decide.tie_tolerance, 0.01);
}

TEST(TunerSpec, AxesListsRangesAndCanonicalValues) {
  const Spec s = parse_spec(R"Y(name: axes
workload:
  batch: {pow2: [1, 64]}
  context: [32K, 65536, 128K]
  dtype: bfloat16
  hit_rate: {range: [0, 1, 0.25]}
  lag: [fixed(8), "uniform(1, 64)", "normal(32,8)"]
  coherence: [group, per-head]
mac:
  K: 1K
  summary_dtype: [fp32, bf16]
kernels:
  cpu: {threads: [1, 2], isa: avx2}
  cuda: {chunk_tokens: [64, 128]}
)Y",
                            "t.yaml", Backend::cpu);
  EXPECT_EQ(texts(s.axis("batch")),
            (std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64"}));
  EXPECT_EQ(texts(s.axis("context")), (std::vector<std::string>{"32768", "65536", "131072"}));
  EXPECT_EQ(texts(s.axis("dtype")), (std::vector<std::string>{"bf16"}));
  EXPECT_EQ(texts(s.axis("hit_rate")), (std::vector<std::string>{"0", "0.25", "0.5", "0.75", "1"}));
  EXPECT_EQ(texts(s.axis("lag")),
            (std::vector<std::string>{"fixed(8)", "uniform(1,64)", "normal(32,8)"}));
  EXPECT_EQ(texts(s.axis("coherence")), (std::vector<std::string>{"per-group", "per-head"}));
  EXPECT_EQ(texts(s.axis("K")), (std::vector<std::string>{"1024"}));
  EXPECT_EQ(texts(s.axis("summary_dtype")), (std::vector<std::string>{"f32", "bf16"}));
  EXPECT_EQ(texts(s.axis("threads")), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(s.axis("batch").line, 3);
  EXPECT_TRUE(s.axis("batch").given);
}

TEST(TunerSpec, CudaBackendTakesTheCudaSection) {
  const Spec s = parse_spec("name: g\nkernels:\n  cuda: {chunk_tokens: [64, 256], graph: on}\n",
                            "t.yaml", Backend::cuda);
  EXPECT_EQ(texts(s.axis("chunk_tokens")), (std::vector<std::string>{"64", "256"}));
  EXPECT_EQ(texts(s.axis("graph")), (std::vector<std::string>{"true"}));
  EXPECT_FALSE(s.find_axis("block_rows"));
}

// The chunk knob is chunk_tokens on both engines; min_chunk, the CUDA name of earlier releases,
// reads as the same axis (and naming both is naming it twice).
TEST(TunerSpec, MinChunkIsAnAliasOfTheCudaChunkTokens) {
  const Spec s =
      parse_spec("name: g\nkernels:\n  cuda: {min_chunk: [64, 256]}\n", "t.yaml", Backend::cuda);
  EXPECT_EQ(texts(s.axis("chunk_tokens")), (std::vector<std::string>{"64", "256"}));
  EXPECT_TRUE(s.axis("chunk_tokens").given);
  EXPECT_FALSE(s.find_axis("min_chunk"));
  const std::string e =
      error_of("name: g\nkernels:\n  cuda: {min_chunk: 64, chunk_tokens: 128}\n", Backend::cuda);
  EXPECT_NE(e.find("given twice"), std::string::npos) << e;
}

TEST(TunerSpec, UnknownKeysNameFileLineAndKey) {
  EXPECT_EQ(error_of("name: x\nworkloads: {}\n").rfind("t.yaml:2: workloads: unknown key", 0), 0u)
      << error_of("name: x\nworkloads: {}\n");
  const std::string e = error_of("name: x\nworkload:\n  batch: 1\n  contxt: 4096\n");
  EXPECT_EQ(e.rfind("t.yaml:4: workload.contxt: unknown key", 0), 0u) << e;
  EXPECT_EQ(
      error_of("name: x\nmeasure: {warmpu: 1}\n").rfind("t.yaml:2: measure.warmpu: unknown", 0),
      0u);
  // The section of the backend that does not run is still checked.
  EXPECT_EQ(error_of("name: x\nkernels:\n  cuda: {stagez: 2}\n")
                .rfind("t.yaml:3: kernels.cuda.stagez", 0),
            0u);
}

TEST(TunerSpec, WrongTypesNameFileLineAndKey) {
  std::string e = error_of("name: x\nworkload:\n  batch: [1, four]\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.batch: expected a number, got 'four'", 0), 0u) << e;
  e = error_of("name: x\nworkload:\n  context: 4096.5\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.context: expected an integer", 0), 0u) << e;
  e = error_of("name: x\nmeasure:\n  warmup: many\n");
  EXPECT_EQ(e.rfind("t.yaml:3: measure.warmup: expected a number", 0), 0u) << e;
  e = error_of("name: x\nworkload:\n  dtype: int8\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.dtype: unknown dtype 'int8'", 0), 0u) << e;
  e = error_of("name: x\nworkload:\n  hit_rate: 1.5\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.hit_rate: value 1.5 is out of range", 0), 0u) << e;
  e = error_of("name: x\nworkload:\n  batch: {a: 1}\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.batch.a: unknown key", 0), 0u) << e;
  e = error_of("name: x\nworkload: [1, 2]\n");
  EXPECT_EQ(e.rfind("t.yaml:2: workload: expected a mapping", 0), 0u) << e;
  e = error_of("name: x\nworkload:\n  lag: uniform(64,1)\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.lag: bad lag", 0), 0u) << e;
}

TEST(TunerSpec, EmptyAxisIsAnError) {
  std::string e = error_of("name: x\nworkload:\n  batch: []\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.batch: empty list", 0), 0u) << e;
  EXPECT_EQ(error_of("name: x\nworkload:\n  batch: {pow2: [8, 4]}\n").rfind("t.yaml:3:", 0), 0u);
  e = error_of("name: x\nworkload:\n  batch: [2, 2]\n");
  EXPECT_EQ(e.rfind("t.yaml:3: workload.batch: value 2 is listed twice", 0), 0u) << e;
  e = error_of(
      "name: x\nworkload: {q_heads: [8, 8], kv_heads: [8, 8]}\nzip: [[q_heads, kv_heads]]\n");
  EXPECT_EQ(e.rfind("t.yaml:3: zip: the value tuple at position 2 is listed twice", 0), 0u) << e;
}

TEST(TunerSpec, SyntaxErrorNamesTheLine) {
  const std::string e = error_of("name: x\nworkload:\n  batch: [1, 2\n  context: 4\n");
  EXPECT_EQ(e.rfind("t.yaml:", 0), 0u) << e;
  EXPECT_NE(e.find("syntax"), std::string::npos) << e;
}

TEST(TunerSpec, ZipGroupsNeedKnownAxesOfEqualLength) {
  const Spec s = parse_spec(
      "name: z\nworkload: {q_heads: [32, 64], kv_heads: [8, 8]}\nzip: [[q_heads, kv_heads]]\n",
      "t.yaml", Backend::cpu);
  ASSERT_EQ(s.zips.size(), 1u);
  EXPECT_EQ(s.zips[0].axes, (std::vector<std::string>{"q_heads", "kv_heads"}));
  std::string e =
      error_of("name: z\nworkload: {q_heads: [32, 64], kv_heads: 8}\nzip: [q_heads, kv_heads]\n");
  EXPECT_EQ(e.rfind("t.yaml:3: zip: axis 'kv_heads' has 1 values", 0), 0u) << e;
  e = error_of("name: z\nzip: [[q_heads, heads]]\n");
  EXPECT_EQ(e.rfind("t.yaml:2: zip: unknown axis 'heads'", 0), 0u) << e;
}

TEST(TunerSpec, ConstraintWithUnknownNameIsAnError) {
  const std::string e = error_of("name: c\nconstraints:\n  - r < context\n  - k >= 2*r\n");
  EXPECT_EQ(e.rfind("t.yaml:4: constraints[1]: unknown name 'k'", 0), 0u) << e;
}

TEST(TunerSpec, MeasurePolicyAndOutputs) {
  const Spec s = parse_spec(R"(name: m
measure: {warmup: 1, min_samples: 3, max_samples: 9, noise: 0.05, time_cap: 2, mode: hot}
decide: {tie_tolerance: 0.02}
output: {db: a.db, dispatch: b.json, header: b.h, report: rep}
seed: 42
)",
                            "t.yaml", Backend::cpu);
  EXPECT_EQ(s.measure.stop.warmup, 1);
  EXPECT_EQ(s.measure.stop.max_samples, 9);
  EXPECT_EQ(s.measure.mode, CacheMode::hot);
  EXPECT_EQ(s.measure.key(), "hot");
  EXPECT_DOUBLE_EQ(s.decide.tie_tolerance, 0.02);
  EXPECT_EQ(s.decide.ties, TieRule::overlap);
  EXPECT_EQ(parse_spec("name: t\ndecide: {ties: tolerance}\n", "t.yaml", Backend::cpu).decide.ties,
            TieRule::tolerance);
  EXPECT_EQ(error_of("name: t\ndecide:\n  ties: coin\n")
                .rfind("t.yaml:3: decide.ties: unknown tie rule", 0),
            0u);
  EXPECT_EQ(s.output.db, "a.db");
  EXPECT_EQ(s.output.header, "b.h");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.measure.timer, std::nullopt);  // auto
  EXPECT_EQ(parse_spec("name: t\nmeasure: {timer: cupti}\n", "t.yaml", Backend::cuda).measure.timer,
            Timer::cupti);
  EXPECT_EQ(parse_spec("name: t\nmeasure: {timer: auto}\n", "t.yaml", Backend::cuda).measure.timer,
            std::nullopt);
  EXPECT_EQ(error_of("name: t\nmeasure:\n  timer: rdtsc\n"),
            "t.yaml:3: measure.timer: expected auto, steady_clock, cuda_events or cupti, got "
            "'rdtsc'");
  // A timer of the other backend: refused where the spec names it, for either backend.
  EXPECT_EQ(error_of("name: t\nmeasure:\n  mode: hot\n  timer: cupti\n"),
            "t.yaml:4: measure.timer: cupti times the cuda backend, and this spec runs on cpu (its "
            "timer: steady_clock)");
  EXPECT_EQ(error_of("name: t\nmeasure: {timer: steady_clock}\n", Backend::cuda),
            "t.yaml:2: measure.timer: steady_clock times the cpu backend, and this spec runs on "
            "cuda (its timers: cuda_events, cupti)");
  EXPECT_EQ(error_of("name: t\nmeasure: {timer: steady_clock}\n"), "");
  const std::string e = error_of("name: m\nmeasure: {min_samples: 9, max_samples: 3}\n");
  EXPECT_NE(e.find("max_samples = 3 is below min_samples = 9"), std::string::npos) << e;
}

TEST(TunerSpec, SearchStrategy) {
  EXPECT_EQ(parse_spec("name: t\n", "t.yaml", Backend::cpu).search.strategy,
            SearchStrategy::exhaustive);
  const Spec h = parse_spec("name: t\nsearch: halving\n", "t.yaml", Backend::cpu);
  EXPECT_EQ(h.search.strategy, SearchStrategy::halving);
  EXPECT_EQ(h.search.first_samples, 2);
  const Spec m = parse_spec("name: t\nsearch: {strategy: halving, first_samples: 4}\n", "t.yaml",
                            Backend::cpu);
  EXPECT_EQ(m.search.strategy, SearchStrategy::halving);
  EXPECT_EQ(m.search.first_samples, 4);
  EXPECT_EQ(error_of("name: t\nsearch: bayes\n")
                .rfind("t.yaml:2: search: unknown search strategy 'bayes' (expected exhaustive or "
                       "halving)",
                       0),
            0u)
      << error_of("name: t\nsearch: bayes\n");
  EXPECT_EQ(error_of("name: t\nsearch:\n  first_samples: 0\n")
                .rfind("t.yaml:3: search.first_samples: must be in [1, 1000]", 0),
            0u);
  EXPECT_EQ(
      error_of("name: t\nsearch:\n  budget: 3\n").rfind("t.yaml:3: search.budget: unknown key", 0),
      0u);
}

TEST(TunerSpec, NameIsRequiredAndFileSafe) {
  EXPECT_EQ(error_of("workload: {batch: 1}\n").rfind("t.yaml:1: name: missing", 0), 0u);
  EXPECT_EQ(error_of("name: a/b\n").rfind("t.yaml:1: name:", 0), 0u);
}

// The part of `doc` under the heading that starts with `heading`, up to the next "## " (empty
// when there is no such heading).
std::string doc_section(const std::string& doc, const std::string& heading) {
  const std::size_t at = doc.find("\n" + heading);
  if (at == std::string::npos) return {};
  const std::size_t end = doc.find("\n## ", at + 1);
  return doc.substr(at, end == std::string::npos ? end : end - at);
}

bool has_row(const std::string& part, std::string_view name) {
  return part.find("| `" + std::string(name) + "` |") != std::string::npos;
}

// The "| `NAME` |" row of every field of S is in the section `heading`.
template <Described S>
void expect_documented(const std::string& doc, const std::string& heading) {
  const std::string part = doc_section(doc, heading);
  ASSERT_FALSE(part.empty()) << heading;
  for (const Field<S>& f : fields_of<S>())
    EXPECT_TRUE(has_row(part, f.name)) << heading << ": " << f.name;
}

// docs/spec.md documents every axis the reader accepts, and every key of the policy sections
// (their field tables' rows), key by key.
TEST(TunerSpec, DocsListEveryAxis) {
  const char* src = std::getenv("MACTUNE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "MACTUNE_SOURCE_DIR is set by ctest";
  std::ifstream in(std::string(src) + "/docs/spec.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(doc.empty());
  // Each axis in the section of its own spec key: a row under another engine's heading (two
  // engines may share a name, match_mode) does not document it.
  auto heading = [](Section s) -> std::string {
    switch (s) {
      case Section::workload:
        return "## `workload`";
      case Section::mac:
        return "## `mac`";
      case Section::cpu:
        return "## `kernels.cpu`";
      case Section::cuda:
        return "## `kernels.cuda`";
    }
    return {};
  };
  for (const AxisDef& d : axis_defs()) {
    const std::string part = doc_section(doc, heading(d.section));
    ASSERT_FALSE(part.empty()) << heading(d.section);
    EXPECT_TRUE(has_row(part, d.name())) << heading(d.section) << ": " << d.name();
  }
  expect_documented<MeasurePolicy>(doc, "## `measure`");
  expect_documented<Search>(doc, "## `search`");
  expect_documented<DecidePolicy>(doc, "## `decide`");
  for (const char* key : {"backend", "name", "db", "dispatch", "header", "report"})
    EXPECT_TRUE(has_row(doc, key)) << key;
}

TEST(TunerSpec, GlobMatch) {
  EXPECT_TRUE(glob_match("*", "AMD EPYC"));
  EXPECT_TRUE(glob_match("*H200*", "NVIDIA H200"));
  EXPECT_TRUE(glob_match("mac_cpu_*_hd128_?f16", "mac_cpu_avx2_hd128_bf16"));
  EXPECT_FALSE(glob_match("*H100*", "NVIDIA H200"));
  EXPECT_FALSE(glob_match("", "x"));
}

}  // namespace
}  // namespace mactune::tuner
