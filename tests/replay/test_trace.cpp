// Decode-trace layout checks: required tensors, consistent shapes, metadata, finite values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/error.h"
#include "replay/trace.h"
#include "replay_fixtures.h"

namespace mactune::replay {
namespace {

struct Spec {
  int layer = 1, T = 6, Hq = 4, Hkv = 2, D = 8;
  DType dtype = DType::f32;
  bool o_ref = true;
};

std::vector<float> randoms(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<TensorToWrite> tensors(const Spec& s) {
  const auto name = [&](const char* w) { return trace_tensor_name(s.layer, w); };
  std::vector<TensorToWrite> t = {
      {name("q_pre"), {s.T, s.Hq, s.D}, randoms(std::size_t(s.T) * s.Hq * s.D, 1), s.dtype},
      {name("k_pre"), {s.T, s.Hkv, s.D}, randoms(std::size_t(s.T) * s.Hkv * s.D, 2), s.dtype},
      {name("v"), {s.T, s.Hkv, s.D}, randoms(std::size_t(s.T) * s.Hkv * s.D, 3), s.dtype}};
  if (s.o_ref)
    t.push_back({name("o_ref"), {s.T, s.Hq, s.D}, randoms(std::size_t(s.T) * s.Hq * s.D, 4)});
  return t;
}

const std::map<std::string, std::string> kMeta = {{"rope_theta", "10000.0"}};

// Holds the image so the Safetensors view stays valid.
struct Image {
  std::vector<std::byte> bytes;
  DecodeTrace open(std::optional<double> theta = {}) const {
    return DecodeTrace::from_file(Safetensors::from_memory(bytes, "t.safetensors"), theta);
  }
};

std::string error_of(const std::vector<TensorToWrite>& t,
                     const std::map<std::string, std::string>& meta = kMeta) {
  const Image img{write_safetensors(t, meta)};
  try {
    const DecodeTrace tr = img.open();
    for (int l : tr.layers()) tr.load_layer(l);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "accepted a broken trace";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

class TraceLoads : public ::testing::TestWithParam<DType> {};

TEST_P(TraceLoads, ShapesValuesAndMetadata_T6_Hq4_Hkv2_D8) {
  Spec s;
  s.dtype = GetParam();
  const auto t = tensors(s);
  const Image img{write_safetensors(t, kMeta)};
  const DecodeTrace tr = img.open();
  EXPECT_EQ(tr.layers(), std::vector<int>{1});
  EXPECT_EQ(tr.rope_theta(), 10000.0);
  const TraceLayer L = tr.load_layer(1);
  EXPECT_EQ(L.steps, 6);
  EXPECT_EQ(L.q_heads, 4);
  EXPECT_EQ(L.kv_heads, 2);
  EXPECT_EQ(L.head_dim, 8);
  ASSERT_EQ(L.q_pre.size(), t[0].values.size());
  for (std::size_t i = 0; i < L.q_pre.size(); ++i)
    EXPECT_EQ(L.q_pre[i], static_cast<float>(round_to(s.dtype, t[0].values[i])));
  EXPECT_EQ(L.k_row(5)[0], static_cast<float>(round_to(s.dtype, t[1].values[5 * 2 * 8])));
  EXPECT_TRUE(L.has_o_ref());
  const Problem p = tr.problem(1, DType::bf16);
  EXPECT_EQ(p.group_size(), 2);
  EXPECT_EQ(p.kv_dtype, DType::bf16);
  EXPECT_EQ(img.open(500000.0).rope_theta(), 500000.0);  // explicit theta wins
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TraceLoads, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return std::string(safetensors_dtype_name(p.param));
                         });

TEST(Trace, OrefIsOptional) {
  Spec s;
  s.o_ref = false;
  const Image img{write_safetensors(tensors(s), kMeta)};
  EXPECT_FALSE(img.open().load_layer(1).has_o_ref());
}

TEST(Trace, MissingTensor) {
  auto t = tensors(Spec{});
  t.erase(t.begin() + 1);  // layer1.k_pre
  expect_error(error_of(t), {"t.safetensors", "layer 1 has no tensor 'layer1.k_pre'"});
}

TEST(Trace, StepsDisagree) {
  auto t = tensors(Spec{});
  t[1].shape[0] = 5;
  t[1].values.resize(5 * 2 * 8);
  expect_error(error_of(t), {"'layer1.k_pre' has shape [5, 2, 8]", "expected [6, kv_heads, 8]"});
}

TEST(Trace, ValueShapeDisagrees) {
  auto t = tensors(Spec{});
  t[2].shape = {6, 1, 16};
  expect_error(error_of(t), {"'layer1.v' has shape [6, 1, 16]", "expected [6, 2, 8]"});
}

TEST(Trace, OrefShapeDisagrees) {
  auto t = tensors(Spec{});
  t[3].shape = {6, 2, 16};
  expect_error(error_of(t), {"'layer1.o_ref' has shape [6, 2, 16]", "expected [6, 4, 8]"});
}

TEST(Trace, KvHeadsMustDivideQueryHeads) {
  Spec s;
  s.Hkv = 3;
  expect_error(error_of(tensors(s)), {"3 kv heads", "do not divide 4 query heads"});
}

TEST(Trace, OddHeadDim) {
  Spec s;
  s.D = 7;
  expect_error(error_of(tensors(s)), {"layer 1", "head_dim = 7"});
}

TEST(Trace, WrongRank) {
  auto t = tensors(Spec{});
  t[0].shape = {6, 32};
  expect_error(error_of(t), {"'layer1.q_pre' has shape [6, 32]", "[steps, q_heads, head_dim]"});
}

TEST(Trace, NoLayers) {
  expect_error(error_of({{"weights", {2}, {1.0f, 2.0f}}}), {"not a decode trace"});
}

TEST(Trace, MetadataDisagreesWithShapes) {
  auto meta = kMeta;
  meta["head_dim"] = "64";
  expect_error(error_of(tensors(Spec{}), meta), {"__metadata__.head_dim = 64", "[6, 4, 8]"});
  meta = kMeta;
  meta["softmax_scale"] = "0.125";  // 1/sqrt(64), but D = 8
  expect_error(error_of(tensors(Spec{}), meta), {"softmax_scale = 0.125", "1/sqrt(head_dim)"});
  meta = kMeta;
  meta["layers_included"] = "1,2";
  expect_error(error_of(tensors(Spec{}), meta), {"layers_included = '1,2'"});
  meta = kMeta;
  meta["position_offset"] = "17";
  expect_error(error_of(tensors(Spec{}), meta), {"position_offset = 17"});
  meta = kMeta;
  meta["rope_convention"] = "interleaved";
  expect_error(error_of(tensors(Spec{}), meta), {"rope_convention = 'interleaved'"});
  meta = kMeta;
  meta["rope_theta"] = "ten thousand";
  expect_error(error_of(tensors(Spec{}), meta), {"rope_theta = 'ten thousand' is not a number"});
  meta["layers_included"] = "1";
  meta["rope_theta"] = "1e4";
  EXPECT_EQ(error_of(tensors(Spec{}), meta), "");
}

TEST(Trace, RopeThetaRequiredWithoutOverride) {
  const Image img{write_safetensors(tensors(Spec{}), {})};
  try {
    img.open();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no rope_theta; give the RoPE base with --rope-theta"),
              std::string::npos);
  }
  EXPECT_EQ(img.open(10000.0).rope_theta(), 10000.0);
}

TEST(Trace, NonFiniteValueNamed) {
  auto t = tensors(Spec{});
  t[2].values[(3 * 2 + 1) * 8 + 5] = std::numeric_limits<float>::quiet_NaN();
  expect_error(error_of(t), {"'layer1.v' holds nan at [3, 1, 5]"});
}

TEST(Trace, UnknownLayerListsTheOnesHeld) {
  const DecodeTrace tr = DecodeTrace::open(testing::trace_path("text_1k.safetensors"));
  EXPECT_EQ(tr.layers(), std::vector<int>{2});
  EXPECT_EQ(tr.name(), "text_1k.safetensors");
  try {
    tr.load_layer(0);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no layer 0 (it holds layer(s) 2)"),
              std::string::npos);
  }
}

TEST(Trace, ShippedThetaFromMetadata) {
  EXPECT_EQ(DecodeTrace::open(testing::trace_path("code_1k_theta5e5.safetensors")).rope_theta(),
            500000.0);
  EXPECT_EQ(DecodeTrace::open(testing::trace_path("code_1k.safetensors")).rope_theta(), 10000.0);
}

}  // namespace
}  // namespace mactune::replay
