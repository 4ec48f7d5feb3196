// The safetensors reader: round trips in every dtype, the shipped traces, SHA-256 vectors, and
// one clear error for each way a file can be broken.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "kernels/error.h"
#include "replay/safetensors.h"
#include "replay/sha256.h"
#include "replay_fixtures.h"

namespace mactune::replay {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// A file image: 8-byte length, the header text as given, then `data_bytes` bytes of data.
std::vector<std::byte> image(const std::string& header, std::size_t data_bytes,
                             std::uint64_t length_field = ~0ull) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0x3f});
  const std::uint64_t n = length_field == ~0ull ? header.size() : length_field;
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

// The message of the InputError that parsing `img` throws ("" if it parses).
std::string error_of(const std::vector<std::byte>& img) {
  try {
    const Safetensors s = Safetensors::from_memory(img, "t.safetensors");
    for (const auto& [name, info] : s.tensors()) s.read_f32(name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class SafetensorsRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsRoundTrip, ValuesShapesMetadata) {
  const DType dt = GetParam();
  const std::vector<float> a = random_values(3 * 5 * 2, 1), b = random_values(7, 2);
  const auto img = write_safetensors(
      {{"a", {3, 5, 2}, a, dt}, {"b.x", {7}, b, DType::f32}, {"empty", {0, 4}, {}, dt}},
      {{"rope_theta", "10000"}, {"note", "hi \"there\""}});
  const Safetensors s = Safetensors::from_memory(img);
  ASSERT_EQ(s.tensors().size(), 3u);
  EXPECT_EQ(s.header_size() % 8, 0u);  // padded like the reference writer
  EXPECT_EQ(s.tensor("a").dtype, dt);
  EXPECT_EQ(s.tensor("a").shape_string(), "[3, 5, 2]");
  EXPECT_EQ(s.tensor("empty").numel(), 0u);
  EXPECT_EQ(s.metadata().at("note"), "hi \"there\"");
  const std::vector<float> got = s.read_f32("a");
  ASSERT_EQ(got.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(got[i], static_cast<float>(round_to(dt, a[i]))) << i;
  EXPECT_EQ(s.read_f32("b.x"), b);
  EXPECT_TRUE(s.read_f32("empty").empty());
  EXPECT_THROW(s.tensor("c"), InputError);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SafetensorsRoundTrip,
                         ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return std::string(safetensors_dtype_name(p.param));
                         });

TEST(Safetensors, OpensShippedTrace_Code1k) {
  const Safetensors s = Safetensors::open(testing::trace_path("code_1k.safetensors"));
  EXPECT_EQ(s.file_size(), 5245184u);
  EXPECT_EQ(s.header_size(), 2296u);
  ASSERT_EQ(s.tensors().size(), 4u);
  EXPECT_EQ(s.tensor("layer2.q_pre").shape_string(), "[1024, 8, 64]");
  EXPECT_EQ(s.tensor("layer2.v").begin, 2621440u);
  EXPECT_EQ(s.metadata().at("rope_theta"), "10000.0");
  const std::vector<float> v = s.read_f32("layer2.k_pre");
  ASSERT_EQ(v.size(), 1024u * 2 * 64);
  double sumsq = 0;
  for (float x : v) sumsq += double(x) * x;
  EXPECT_GT(sumsq, 1.0);  // real data, not zeros
  // The digest `sha256sum data/traces/code_1k.safetensors` prints.
  EXPECT_EQ(s.sha256(), "a70e7d83ea10668ad21220d09cce58c0a2452d8329b8272b5e1153ed314a0aae");
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(bytes_of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(sha256_hex(bytes_of(two_blocks)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Fed in uneven pieces: the same digest.
  const std::string million(1000000, 'a');
  Sha256 h;
  for (std::size_t at = 0, step = 1; at < million.size(); at += step, step = step * 3 % 1000 + 1)
    h.update(std::as_bytes(std::span(million.data() + at, std::min(step, million.size() - at))));
  EXPECT_EQ(Sha256::hex(h.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// ---- Malformed files: one InputError each, naming the problem (and the tensor).

struct Broken {
  const char* name;
  std::vector<std::byte> img;
  std::vector<const char*> expect;  // substrings of the message
};

std::vector<Broken> broken_files() {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::vector<Broken> c;
  c.push_back({"Empty", {}, {"0 bytes long", "too short"}});
  c.push_back({"FiveBytes", std::vector<std::byte>(5), {"5 bytes long"}});
  c.push_back({"HeaderPastEnd", image(ok, 16, ok.size() + 17), {"runs past the end of the file"}});
  c.push_back({"HeaderHuge", image(ok, 16, 1ull << 40), {"exceeds the", "limit"}});
  c.push_back({"TruncatedData", image(ok, 10), {"tensor 'a'", "run past the end", "10-byte"}});
  c.push_back({"TrailingBytes", image(ok, 20), {"last 4 bytes", "belong to no tensor"}});
  c.push_back({"NotJson", image("{\"a\": [1, 2", 0), {"not valid JSON"}});
  c.push_back({"NotObject", image("[1, 2, 3]", 0), {"must be a JSON object", "array"}});
  c.push_back({"BadDtypeF64",
               image(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", 16),
               {"tensor 'a'", "dtype F64 is not supported"}});
  c.push_back({"UnknownDtype",
               image(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8),
               {"tensor 'a'", "unknown dtype 'Q4'"}});
  c.push_back({"ShapeBytesMismatch",
               image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
               {"tensor 'a'", "shape [3] x F32 needs 3 x 4 bytes", "hold 16"}});
  c.push_back({"Overlap",
               image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     12),
               {"tensor 'b'", "overlap tensor 'a'"}});
  c.push_back({"Hole",
               image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     12),
               {"bytes [4, 8)", "before tensor 'b'", "belong to no tensor"}});
  c.push_back({"EndBeforeBegin",
               image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8),
               {"tensor 'a'", "end before they begin"}});
  c.push_back({"NegativeDim",
               image(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
               {"tensor 'a'", "non-negative integer", "-1"}});
  c.push_back({"FloatDim",
               image(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
               {"tensor 'a'", "non-negative integer"}});
  c.push_back({"ShapeOverflow",
               image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                     R"("data_offsets":[0,4]}})",
                     4),
               {"tensor 'a'", "overflows"}});
  c.push_back({"MissingOffsets",
               image(R"({"a":{"dtype":"F32","shape":[1]}})", 0),
               {"tensor 'a'", "missing \"data_offsets\""}});
  c.push_back({"UnknownKey",
               image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
               {"tensor 'a'", "unknown key \"x\""}});
  c.push_back({"DuplicateTensor",
               image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     8),
               {"tensor 'a' appears twice"}});
  c.push_back({"DeepNesting", image("{\"a\":{\"shape\":[[[[[[1]]]]]]}}", 0), {"nests deeper"}});
  c.push_back({"MetadataNotString",
               image(R"({"__metadata__":{"rope_theta":10000}})", 0),
               {"__metadata__.rope_theta must be a string"}});
  c.push_back({"OffsetsNotPair",
               image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
               {"tensor 'a'", "[begin, end]"}});
  return c;
}

void PrintTo(const Broken& b, std::ostream* os) {
  *os << b.name << " (" << b.img.size() << " bytes)";
}

class SafetensorsBroken : public ::testing::TestWithParam<Broken> {};

TEST_P(SafetensorsBroken, OneClearError) {
  const std::string msg = error_of(GetParam().img);
  ASSERT_FALSE(msg.empty()) << "parsed a broken file";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;    // one line
  EXPECT_EQ(msg.rfind("t.safetensors: ", 0), 0u) << msg;  // names the source first
  for (const char* part : GetParam().expect) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Files, SafetensorsBroken, ::testing::ValuesIn(broken_files()),
                         [](const ::testing::TestParamInfo<Broken>& p) { return p.param.name; });

TEST(Safetensors, EveryTruncationOfARealHeaderFailsCleanly) {
  // Cut a valid trace-like file at every length: each prefix is refused with InputError
  // (never a crash, never an out-of-bounds read: the ASan build checks the latter).
  const auto img = write_safetensors({{"layer0.q_pre", {3, 2, 4}, random_values(24, 3)},
                                      {"layer0.k_pre", {3, 1, 4}, random_values(12, 4)},
                                      {"layer0.v", {3, 1, 4}, random_values(12, 5)}},
                                     {{"rope_theta", "10000"}});
  for (std::size_t n = 0; n < img.size(); ++n) {
    const std::vector<std::byte> cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(error_of(cut).empty()) << "prefix of " << n << " bytes parsed";
  }
  EXPECT_TRUE(error_of(img).empty()) << error_of(img);
}

TEST(Safetensors, OpenNamesMissingFileAndDirectory) {
  try {
    Safetensors::open("/nonexistent/x.safetensors");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.safetensors: no such file"),
              std::string::npos);
  }
  EXPECT_THROW(Safetensors::open(MACTUNE_TRACE_DIR), InputError);
}

}  // namespace
}  // namespace mactune::replay
