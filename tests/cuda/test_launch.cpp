// Host-side logic of the CUDA backend, tested on every machine: launch math, the device
// planner's chunk search, canonical names, the generated registry and the GPU status.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/config.h"
#include "kernels/cuda/instance_grid.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/registry.h"
#include "kernels/cuda/session.h"
#include "kernels/plan.h"

namespace mactune::cuda {
namespace {

TEST(CudaLaunch, AttendSharedMemoryOfTheDefaultConfig) {
  const AttendConfig c{128, 8, 64, 2, DType::bf16};
  EXPECT_EQ(attend_q_bytes(c), 8192u);                 // hi + lo halves, [16][128] x 2 bytes
  EXPECT_EQ(attend_pipeline_bytes(c), 65536u);         // 2 stages x 64 tokens x (K + V) x 256 B
  EXPECT_EQ(attend_scratch_bytes(c), 16896u);          // 4 warps x 8 rows x 128 fp32 + (max, sum)
  EXPECT_EQ(attend_smem_bytes(c), 8192u + 65536u);     // the epilogue reuses the K/V ring
  EXPECT_EQ(227u * 1024u / attend_smem_bytes(c), 3u);  // three CTAs an SM on sm_90
  // D = 256: warps pair up over the dims, so the scratch holds 2 token parts, not 4.
  const AttendConfig wide{256, 16, 64, 2, DType::f16};
  EXPECT_EQ(attend_dim_parts(wide), 2);
  EXPECT_EQ(attend_scratch_bytes(wide), 2u * 16 * 256 * 4 + 2u * 16 * 2 * 4);
}

TEST(CudaLaunch, ConfigErrorsNameTheField) {
  EXPECT_TRUE(config_error(AttendConfig{}).empty());
  EXPECT_NE(config_error(AttendConfig{96, 8, 64, 2, DType::bf16}).find("head_dim"),
            std::string_view::npos);
  EXPECT_NE(config_error(AttendConfig{128, 17, 64, 2, DType::bf16}).find("group"),
            std::string_view::npos);
  EXPECT_NE(config_error(AttendConfig{128, 8, 32, 2, DType::bf16}).find("tile_tokens"),
            std::string_view::npos);
  EXPECT_NE(config_error(AttendConfig{128, 8, 64, 1, DType::bf16}).find("stages"),
            std::string_view::npos);
  EXPECT_NE(config_error(AttendConfig{128, 8, 64, 2, DType::f32}).find("kv_dtype"),
            std::string_view::npos);
  EXPECT_NE(config_error(MatchConfig{100, false, DType::bf16}).find("head_dim"),
            std::string_view::npos);
}

TEST(CudaLaunch, GridsAndCapacity) {
  EXPECT_EQ(attend_budget(3, 132), 396);
  EXPECT_EQ(attend_budget(0, 132), 132);  // at least one CTA an SM
  // 8 waves of uniform items plus one small item a segment (kernels/plan.h).
  EXPECT_EQ(attend_capacity(64 * 4, 396, 128), 8 * 396 + 2 * 256);
  EXPECT_EQ(attend_limits(396, 128).workers, 396);
  EXPECT_EQ(attend_limits(396, 64).min_chunk, 64);
  EXPECT_EQ(attend_grid(512, 396), 396);
  EXPECT_EQ(attend_grid(10, 396), 10);
  EXPECT_EQ(merge_grid(32), 8);
  EXPECT_EQ(merge_grid(33), 9);
}

TEST(CudaLaunch, MatchTilesFillTheGpuWithWholePasses) {
  for (bool probe : {false, true})
    for (int D : {64, 128, 256}) {
      const MatchConfig c{D, probe, DType::bf16};
      const int pass = match_rows_per_pass(c);
      EXPECT_EQ(pass, kMatchWarps * (32 / (D / 8)) * (probe ? 2 : 1));
      for (int K : {64, 512, 1024, 4096})
        for (long long heads : {32LL, 256LL, 2048LL}) {
          const long long resident = 132LL * 5;
          const int cand = match_candidates_per_cta(c, heads, K, resident);
          EXPECT_EQ(cand % pass, 0);
          const long long ctas = heads * match_tiles(K, cand);
          if (cand > pass) {
            EXPECT_GE(ctas, resident) << "D " << D << " K " << K;
          }
          // The next larger size would leave resident slots empty (or exceed the ring).
          if (2 * cand < K) {
            EXPECT_LT(heads * match_tiles(K, 2 * cand), resident) << "K " << K << " h " << heads;
          }
        }
    }
  // Batch 1, 32 heads, K = 1024: the smallest tiles, 32 a head, 1024 CTAs.
  const MatchConfig c{128, false, DType::bf16};
  EXPECT_EQ(match_candidates_per_cta(c, 32, 1024, 132 * 5), 32);
}

TEST(CudaNames, CanonicalNamesRoundTrip) {
  const AttendConfig a{128, 4, 64, 2, DType::bf16};
  EXPECT_EQ(instance_name(a), "attend_cuda_hd128_g4_t64_s2_bf16");
  EXPECT_EQ(parse_attend_name(instance_name(a)), a);
  const FullConfig f{64, 16, 128, 3, DType::f16};
  EXPECT_EQ(instance_name(f), "full_cuda_hd64_g16_t128_s3_f16");
  EXPECT_EQ(parse_full_name(instance_name(f)), f);
  const MatchConfig m{256, true, DType::f16};
  EXPECT_EQ(instance_name(m), "match_cuda_hd256_p1_f16");
  EXPECT_EQ(parse_match_name(instance_name(m)), m);
  EXPECT_EQ(instance_name(MergeConfig{64}), "merge_cuda_hd64");
  EXPECT_EQ(parse_merge_name("merge_cuda_hd64"), MergeConfig{64});
  EXPECT_EQ(config_string(a), "head_dim=128,group=4,tile_tokens=64,stages=2,kv_dtype=bf16");
  for (const char* bad : {"attend_cuda_hd128_g4_t64_s2", "attend_cuda_hd128_g4_t64_s2_bf17",
                          "attend_cpu_hd128_g4_t64_s2_bf16", "attend_cuda_hd0128_g4_t64_s2_bf16",
                          "full_cuda_hd128_g4_t64_s2_bf16_x", ""})
    EXPECT_FALSE(parse_attend_name(bad).has_value()) << bad;
  EXPECT_FALSE(parse_match_name("match_cuda_hd128_p2_bf16").has_value());
  EXPECT_FALSE(parse_merge_name("merge_cuda_hd128_bf16").has_value());
}

// A name matches the build's MACTUNE_KERNEL_FILTER globs (the CMake side turned them into a
// regex; this is an independent glob matcher).
bool glob_match(std::string_view pat, std::string_view s) {
  if (pat.empty()) return s.empty();
  if (pat[0] == '*')
    return glob_match(pat.substr(1), s) || (!s.empty() && glob_match(pat, s.substr(1)));
  return !s.empty() && (pat[0] == '?' || pat[0] == s[0]) && glob_match(pat.substr(1), s.substr(1));
}

TEST(CudaRegistry, NamesAreCanonicalUniqueAndFiltered) {
  const std::vector<InstanceDesc> all = instances();
  ASSERT_FALSE(all.empty()) << "no CUDA instance was built";
  EXPECT_EQ(all.size(), static_cast<std::size_t>(MACTUNE_TEST_INSTANCE_COUNT));
  std::set<std::string> names;
  for (const InstanceDesc& i : all) {
    EXPECT_TRUE(names.insert(i.name).second) << "duplicate " << i.name;
    EXPECT_EQ(i.backend, Backend::cuda);
    EXPECT_EQ(i.name.rfind(std::string(name_of(i.family)) + "_cuda_", 0), 0u) << i.name;
  }
  // The descriptions the dispatch catalog reads (generated from the same grid, no kernels)
  // are the registry's.
  const std::vector<InstanceDesc> grid = built_instance_descs();
  ASSERT_EQ(grid.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(grid[i].name, all[i].name);
    EXPECT_EQ(grid[i].family, all[i].family);
    EXPECT_EQ(grid[i].config, all[i].config);
  }
  for (const auto& i : attend_instances()) {
    EXPECT_EQ(i.name, instance_name(i.config));
    EXPECT_TRUE(config_error(i.config).empty()) << i.name;
  }
  for (const auto& i : full_instances()) EXPECT_EQ(i.name, instance_name(i.config));
  for (const auto& i : match_instances()) EXPECT_EQ(i.name, instance_name(i.config));
  for (const auto& i : merge_instances()) EXPECT_EQ(i.name, instance_name(i.config));
  EXPECT_FALSE(attend_instances().empty());
  EXPECT_FALSE(merge_instances().empty());
  std::string filter(kernel_filter());
  std::replace(filter.begin(), filter.end(), ';', ',');
  EXPECT_EQ(filter, MACTUNE_TEST_KERNEL_FILTER);
  if (!filter.empty()) {
    std::vector<std::string> globs;
    std::stringstream in(filter);
    for (std::string g; std::getline(in, g, ',');) globs.push_back(g);
    for (const std::string& n : names)
      EXPECT_TRUE(std::any_of(globs.begin(), globs.end(),
                              [&](const std::string& g) { return glob_match(g, n); }))
          << n << " is outside the filter " << filter;
  }
}

TEST(CudaRegistry, CanImplementSaysWhyNot) {
  const AttendInstance& a = attend_instances().front();
  Problem p;
  p.head_dim = a.config.head_dim;
  p.kv_dtype = a.config.kv_dtype;
  p.q_heads = 8 * a.config.group;
  p.kv_heads = 8;
  EXPECT_EQ(a.can_implement(p), "");
  p.q_heads = 8;  // G = 1 runs padded
  EXPECT_EQ(a.can_implement(p), "");
  Problem wide = p;
  wide.q_heads = 8 * (a.config.group + 1);
  EXPECT_NE(a.can_implement(wide).find("group size " + std::to_string(a.config.group + 1)),
            std::string::npos);
  Problem d = p;
  d.head_dim = a.config.head_dim == 64 ? 128 : 64;
  EXPECT_NE(a.can_implement(d).find("head_dim"), std::string::npos);
  Problem t = p;
  t.kv_dtype = DType::f32;
  EXPECT_NE(a.can_implement(t).find("f32"), std::string::npos);
  Problem bad = p;
  bad.kv_heads = 3;
  EXPECT_FALSE(a.can_implement(bad).empty());
  EXPECT_GT(a.workspace_bytes(p, 100), 0u);
  EXPECT_THROW(select_instance(attend_instances(), t), InputError);
  EXPECT_THROW(select_instance(attend_instances(), p, "attend_cuda_hd999_g8_t64_s2_bf16"),
               InputError);
  EXPECT_EQ(&select_instance(attend_instances(), p, a.name), &a);
  EXPECT_EQ(find_instance(attend_instances(), a.name), &a);
  EXPECT_EQ(find_instance(attend_instances(), "nope"), nullptr);
}

TEST(CudaDevice, StatusIsDecidedOnceAndExplained) {
  const GpuStatus& s = gpu_status();
  EXPECT_EQ(&s, &gpu_status());
  if (!s.usable) {
    EXPECT_FALSE(s.why_not.empty());
    SessionOptions o;
    o.shape.kv_dtype = DType::bf16;
    try {
      Session session(o);
      FAIL() << "a session was created without a usable GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(s.why_not), std::string::npos) << e.what();
    }
  } else {
    EXPECT_GE(s.count, 1);
    EXPECT_EQ(device_fingerprint(0).backend, Backend::cuda);
  }
}

}  // namespace
}  // namespace mactune::cuda
