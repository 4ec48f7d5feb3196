#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "kernels/error.h"
#include "tuner/search/sweep.h"
#include "tuner/spec/grid.h"

namespace mactune::tuner {
namespace {

std::vector<TunePoint> grid_of(const std::string& text) {
  return expand_grid(parse_spec(text, "g.yaml", Backend::cpu));
}

std::string error_of(const std::string& text) {
  try {
    grid_of(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TunerGrid, CartesianProductInGridOrderWithHitRateInnermost) {
  const auto pts = grid_of(R"(name: g
workload: {batch: [1, 4], context: [4096, 8192], hit_rate: [0, 1]}
kernels:
  cpu: {chunk_tokens: [128, 512]}
)");
  ASSERT_EQ(pts.size(), 16u);
  for (std::size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(pts[i].index, i);
  // Innermost: hit rate, then the launch parameters, then batch, then context.
  EXPECT_EQ(pts[0].forced.hit_rate, 0);
  EXPECT_EQ(pts[1].forced.hit_rate, 1);
  EXPECT_EQ(pts[0].cpu.chunk_tokens, 128);
  EXPECT_EQ(pts[2].cpu.chunk_tokens, 512);
  EXPECT_EQ(pts[4].shape.batch, 4);
  EXPECT_EQ(pts[8].context, 8192);
  EXPECT_EQ(pts[0].launch_text(), "threads=0,chunk_tokens=128,block_rows=16,match_mode=scan");
  EXPECT_TRUE(pts[0].forced.enabled);
  EXPECT_EQ(pts[0].mac.ring_capacity, 512);
  EXPECT_EQ(pts[0].mac.min_context, 0);
  EXPECT_EQ(bucket_of(pts[5]).key(), "hd128_q32_kv8_bf16_p16_b4_c4096");
}

TEST(TunerGrid, ZipAdvancesAxesTogether) {
  const auto pts = grid_of(R"(name: z
workload: {q_heads: [32, 64, 28], kv_heads: [8, 8, 4], hit_rate: 1}
zip: [[q_heads, kv_heads]]
)");
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0].shape.group_size(), 4);
  EXPECT_EQ(pts[1].shape.group_size(), 8);
  EXPECT_EQ(pts[2].shape.group_size(), 7);
}

TEST(TunerGrid, ConstraintsFilterPoints) {
  const auto pts = grid_of(R"(name: c
workload: {context: [256, 1024, 4096], hit_rate: 1}
mac: {K: [128, 512, 1024], r: [64, 256]}
constraints:
  - r < context
  - K >= 2*r
)");
  std::set<std::tuple<int, int, int>> got;
  for (const auto& p : pts) {
    EXPECT_LT(p.mac.band, p.context);
    EXPECT_GE(p.mac.ring_capacity, 2 * p.mac.band);
    got.insert({p.context, p.mac.ring_capacity, p.mac.band});
  }
  // context 256: r = 64 only (K 128/512/1024); 1024 and 4096: r 64 (3 K) + r 256 (K 512, 1024).
  EXPECT_EQ(pts.size(), 3u + 5u + 5u);
  EXPECT_EQ(got.size(), pts.size());
}

TEST(TunerGrid, ImpossibleConstraintNamesItsLine) {
  const std::string e = error_of(R"(name: c
workload: {context: [256, 1024]}
constraints:
  - r < context
  - K > 1M
)");
  EXPECT_EQ(e.rfind("g.yaml:5: constraints[1]: 'K > 1M' is impossible", 0), 0u) << e;
}

TEST(TunerGrid, ConstraintsThatTogetherLeaveNothing) {
  const std::string e = error_of(R"(name: c
workload: {context: [256, 1024]}
constraints:
  - context < 512
  - context > 512
)");
  EXPECT_EQ(e.rfind("g.yaml:4: constraints: no point", 0), 0u) << e;
}

TEST(TunerGrid, InvalidShapeAfterConstraintsIsAnError) {
  const std::string e = error_of("name: s\nworkload:\n  q_heads: 32\n  kv_heads: [8, 3]\n");
  EXPECT_EQ(e.rfind("g.yaml:4: workload.kv_heads: kv_heads = 3 does not divide q_heads = 32", 0),
            0u)
      << e;
  // The same grid with a constraint on G is fine.
  EXPECT_EQ(grid_of("name: s\nworkload:\n  q_heads: 32\n  kv_heads: [8, 3]\n  hit_rate: 1\n"
                    "constraints: [G == 4]\n")
                .size(),
            1u);
}

TEST(TunerGrid, ShardsAreDisjointAndCoverTheGrid) {
  const auto pts =
      grid_of("name: s\nmac: {r: 32}\nworkload: {batch: [1, 2, 4], context: [64, 128]}\n");
  ASSERT_EQ(pts.size(), 24u);
  std::multiset<std::size_t> seen;
  for (int i = 0; i < 5; ++i) {
    const auto part = shard_points(pts, i, 5);
    EXPECT_GE(part.size(), 4u);
    EXPECT_LE(part.size(), 5u);
    for (const auto& p : part) seen.insert(p.index);
    EXPECT_EQ(part.size(), shard_points(pts, i, 5).size()) << "deterministic";
  }
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), 24u);
}

// The specs shipped in configs/ parse and expand to the grids their comments promise.
TEST(TunerGrid, ShippedSpecs) {
  const char* src = std::getenv("MACTUNE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "MACTUNE_SOURCE_DIR is set by ctest";
  const std::string dir = std::string(src) + "/configs/";
  const Spec quick = load_spec(dir + "cpu-quick.yaml", Backend::cpu);
  EXPECT_EQ(expand_grid(quick).size(), 2u * 3u * 3u * 2u);  // batch x context x hit x match
  EXPECT_EQ(quick.device.backend, Backend::cpu);
  // cpu-wide: >= 16 configs per bucket (chunk x block_rows x threads x K x r), 6 buckets.
  const Spec wide = load_spec(dir + "cpu-wide.yaml", Backend::cpu);
  const auto wide_pts = expand_grid(wide);
  EXPECT_EQ(wide_pts.size(), 6u * 2u * 32u);  // buckets x hit rates x configs
  std::map<std::string, std::set<std::string>> configs;
  for (const auto& p : wide_pts)
    configs[bucket_of(p).key()].insert(p.launch_text() + "|" + fields_text(p.mac));
  EXPECT_EQ(configs.size(), 6u);
  for (const auto& [b, c] : configs) EXPECT_GE(c.size(), 16u) << b;
  EXPECT_EQ(wide.search.strategy, SearchStrategy::halving);
  EXPECT_TRUE(quick.decide.search_break_even());
  EXPECT_DOUBLE_EQ(quick.decide.resolution, 0.02);
  const Spec cuda_quick = load_spec(dir + "cuda-quick.yaml", Backend::cuda);
  EXPECT_EQ(expand_grid(cuda_quick).size(), 2u * 2u * 4u * 2u);  // batch x context x hit x chunk
  EXPECT_EQ(cuda_quick.device.backend, Backend::cuda);
  const Spec h200 = load_spec(dir + "h200.yaml", Backend::cuda);
  const auto pts = expand_grid(h200);
  // 7 batches x 4 contexts x 2 GQA x 6 hit rates x 2 chunks, less batch 64 x 256K (24 points).
  EXPECT_EQ(pts.size(), 7u * 4u * 2u * 6u * 2u - 24u);
  std::set<int> groups;
  std::set<double> hits;
  for (const auto& p : pts) {
    groups.insert(p.shape.group_size());
    hits.insert(p.forced.hit_rate);
    EXPECT_EQ(p.shape.head_dim, 128);
    EXPECT_EQ(p.shape.kv_dtype, DType::bf16);
    EXPECT_LE(static_cast<long long>(p.shape.batch) * p.context, 8LL << 20);
  }
  EXPECT_EQ(groups, (std::set<int>{4, 8}));
  EXPECT_EQ(hits, (std::set<double>{0, 0.5, 0.9, 0.95, 0.99, 1}));
}

TEST(TunerGrid, InterleaveGroupsHoldEveryConfigOfABucketAtOneHitRate) {
  const auto pts = grid_of(R"(name: g
workload: {batch: [1, 4], hit_rate: [0, 1]}
mac: {K: [256, 512]}
kernels:
  cpu: {chunk_tokens: [128, 512]}
)");
  ASSERT_EQ(pts.size(), 16u);
  std::vector<PendingPoint> pending;
  for (const auto& p : pts) pending.push_back({&p, {}, {}});
  EXPECT_EQ(interleave_groups(pending, Interleave::point).size(), 16u);
  const auto groups = interleave_groups(pending, Interleave::bucket);
  ASSERT_EQ(groups.size(), 4u);  // 2 batches x 2 hit rates
  std::set<std::size_t> seen;
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 4u);  // 2 chunk sizes x 2 ring capacities
    for (std::size_t i : g) {
      EXPECT_EQ(pts[i].shape.batch, pts[g[0]].shape.batch);
      EXPECT_EQ(pts[i].forced.hit_rate, pts[g[0]].forced.hit_rate);
      seen.insert(i);
    }
  }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_EQ(groups[0][0], 0u) << "groups come in grid order of their first point";
}

TEST(TunerGrid, ShardText) {
  EXPECT_EQ(parse_shard("0/4"), (std::pair<int, int>{0, 4}));
  EXPECT_EQ(parse_shard("3/4"), (std::pair<int, int>{3, 4}));
  EXPECT_THROW(parse_shard("4/4"), InputError);
  EXPECT_THROW(parse_shard("1/0"), InputError);
  EXPECT_THROW(parse_shard("a/b"), InputError);
  EXPECT_THROW(parse_shard("1"), InputError);
}

}  // namespace
}  // namespace mactune::tuner
